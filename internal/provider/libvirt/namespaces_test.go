package libvirt

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"libvirt.org/go/libvirtxml"

	infrav1 "banlieue.io/banlieue/api/infrastructure/v1alpha1"
	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
)

func TestNamespaceRefusal(t *testing.T) {
	shared := func(a *banlieuev1.AllowedNamespaces) *banlieuev1.Provider {
		return &banlieuev1.Provider{ObjectMeta: metav1.ObjectMeta{Namespace: "banlieue-system", Name: "lab"},
			Spec: banlieuev1.ProviderSpec{AllowedNamespaces: a}}
	}
	bySelector := &banlieuev1.AllowedNamespaces{From: banlieuev1.NamespacesFromSelector,
		Selector: &banlieuev1.LabelSelector{MatchLabels: map[string]string{"banlieue.io/lab": "allowed"}}}
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
			Spec: infrav1.LibvirtMachineSpec{ProviderRef: &infrav1.ProviderReference{Name: ref, Namespace: refNs}}}
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

// A machine on a shared Provider records the Provider's namespace on its domain, so that the
// Provider's audit finds it; a machine on its own namespace's Provider writes the record it
// always wrote.
func TestOwnerRecordsASharedProvider(t *testing.T) {
	for _, tc := range []struct {
		refNs, wantAttr string
		want            string
	}{
		{"", "", "team-a/lab"},
		{"team-a", "", "team-a/lab"},
		{"banlieue-system", `providerNamespace="banlieue-system"`, "banlieue-system/lab"},
	} {
		m := &infrav1.LibvirtMachine{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "web-01", UID: "u-1"},
			Spec: infrav1.LibvirtMachineSpec{ProviderRef: &infrav1.ProviderReference{Name: "lab", Namespace: tc.refNs}}}
		md, err := ownerOf(m).metadata()
		if err != nil {
			t.Fatal(err)
		}
		if has := strings.Contains(md.XML, "providerNamespace"); has != (tc.wantAttr != "") || !strings.Contains(md.XML, tc.wantAttr) {
			t.Errorf("providerRef.namespace %q: record %s, want %q in it", tc.refNs, md.XML, tc.wantAttr)
		}
		o, ok := DomainOwner(&libvirtxml.Domain{Metadata: md})
		if !ok || o.providerKey().String() != tc.want || o.UID != "u-1" {
			t.Errorf("providerRef.namespace %q: read back %+v (%v), Provider %s; want %s", tc.refNs, o, ok, o.providerKey(), tc.want)
		}
	}
}
