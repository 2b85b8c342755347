package operator

import (
	"reflect"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	infrav1 "banlieue.io/banlieue/api/infrastructure/v1alpha1"
	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
	"banlieue.io/banlieue/internal/userdata"
)

func TestUserDataGrants(t *testing.T) {
	shared := &banlieuev1.Provider{ObjectMeta: metav1.ObjectMeta{Namespace: "banlieue-system", Name: "lab"},
		Spec: banlieuev1.ProviderSpec{AllowedNamespaces: &banlieuev1.AllowedNamespaces{From: banlieuev1.NamespacesFromSelector,
			Selector: &banlieuev1.LabelSelector{MatchLabels: map[string]string{"banlieue.io/lab": "allowed"}}}}}
	machine := func(ns, name, providerNs, provider string, withUserData bool) infrav1.LibvirtMachine {
		m := infrav1.LibvirtMachine{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: infrav1.LibvirtMachineSpec{ProviderRef: &infrav1.ProviderReference{Namespace: providerNs, Name: provider}}}
		if withUserData {
			m.Spec.UserDataSecretRef = &banlieuev1.LocalObjectReference{Name: "whatever-the-spec-says"}
		}
		return m
	}
	allowed := map[string]map[string]string{"team-a": {"banlieue.io/lab": "allowed"}, "team-b": {}}
	tests := []struct {
		name     string
		machines []infrav1.LibvirtMachine
		nsLabels map[string]map[string]string
		want     map[string][]string
	}{
		{"own namespace, providerRef.namespace defaulted",
			[]infrav1.LibvirtMachine{machine("banlieue-system", "b", "", "lab", true), machine("banlieue-system", "a", "banlieue-system", "lab", true)},
			nil, map[string][]string{"banlieue-system": {userdata.SecretName("a"), userdata.SecretName("b")}}},
		{"admitted tenant namespace, in the machine's namespace",
			[]infrav1.LibvirtMachine{machine("team-a", "web", "banlieue-system", "lab", true)},
			allowed, map[string][]string{"team-a": {userdata.SecretName("web")}}},
		{"a namespace the Provider does not admit gets nothing",
			[]infrav1.LibvirtMachine{machine("team-b", "web", "banlieue-system", "lab", true)},
			allowed, map[string][]string{}},
		{"a same-named Provider of the machine's own namespace is another Provider",
			[]infrav1.LibvirtMachine{machine("team-a", "web", "", "lab", true)},
			allowed, map[string][]string{}},
		{"a machine without user-data gets nothing",
			[]infrav1.LibvirtMachine{machine("team-a", "web", "banlieue-system", "lab", false)},
			allowed, map[string][]string{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := userDataGrants(shared, tt.machines, tt.nsLabels); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("userDataGrants = %v, want %v", got, tt.want)
			}
		})
	}
}
