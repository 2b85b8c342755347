package libvirt

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	infrav1 "banlieue.io/banlieue/api/infrastructure/v1alpha1"
	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
)

func TestNamespaceRefusal(t *testing.T) {
	shared := func(a *banlieuev1.AllowedNamespaces) *banlieuev1.Provider {
		return &banlieuev1.Provider{ObjectMeta: metav1.ObjectMeta{Namespace: "banlieue-system", Name: "lab"},
			Spec: banlieuev1.ProviderSpec{AllowedNamespaces: a}}
	}
	bySelector := &banlieuev1.AllowedNamespaces{From: banlieuev1.NamespacesFromSelector,
		Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"banlieue.io/lab": "allowed"}}}
	for _, tc := range []struct {
		name   string
		p      *banlieuev1.Provider
		ns     string
		labels map[string]string
		want   string // "" = served
	}{
		{"own namespace", shared(nil), "banlieue-system", nil, ""},
		{"another namespace of a Same Provider", shared(nil), "team-b", nil,
			"invalid spec.providerRef: Provider banlieue-system/lab does not admit namespace team-b (allowedNamespaces.from is Same"},
		{"an admitted namespace", shared(bySelector), "team-a", map[string]string{"banlieue.io/lab": "allowed"}, ""},
		{"a namespace whose labels do not match", shared(bySelector), "team-b", map[string]string{"team": "b"},
			`Provider banlieue-system/lab does not admit namespace team-b (allowedNamespaces.selector "banlieue.io/lab=allowed" does not match`},
		{"All", shared(&banlieuev1.AllowedNamespaces{From: banlieuev1.NamespacesFromAll}), "team-b", nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := namespaceRefusal(tc.p, tc.ns, tc.labels)
			if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
				t.Errorf("namespaceRefusal = %q; want %q in it", got, tc.want)
			}
		})
	}
}

// A provider process serves exactly its Provider: a machine of another namespace that names a
// Provider of the same name without a namespace is that namespace's Provider, not this one.
func TestMachineReconcilerServes(t *testing.T) {
	machine := func(ns, ref, refNs string) *infrav1.LibvirtMachine {
		return &infrav1.LibvirtMachine{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "m"},
			Spec: infrav1.LibvirtMachineSpec{ProviderRef: infrav1.ProviderReference{Name: ref, Namespace: refNs}}}
	}
	r := &MachineReconciler{ProviderName: "lab", ProviderNamespace: "banlieue-system"}
	for _, tc := range []struct {
		m    *infrav1.LibvirtMachine
		want bool
	}{
		{machine("banlieue-system", "lab", ""), true},
		{machine("banlieue-system", "lab", "banlieue-system"), true},
		{machine("team-a", "lab", "banlieue-system"), true},
		{machine("team-b", "lab", ""), false},
		{machine("team-b", "lab", "team-b"), false},
		{machine("banlieue-system", "other", ""), false},
		{machine("team-a", "other", "banlieue-system"), false},
	} {
		if got := r.serves(tc.m); got != tc.want {
			t.Errorf("serves(%s → %s) = %v, want %v", tc.m.Namespace, tc.m.ProviderKey(), got, tc.want)
		}
	}
}
