package operator

import (
	"reflect"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/event"

	infrav1 "banlieue.io/banlieue/api/infrastructure/v1alpha1"
	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
	"banlieue.io/banlieue/internal/userdata"
)

// TestVSphereUserDataGrants: a vsphere Provider's account is granted its VSphereMachines'
// user-data Secrets under the same rules as a libvirt one's (TestUserDataGrants).
func TestVSphereUserDataGrants(t *testing.T) {
	shared := &banlieuev1.Provider{ObjectMeta: metav1.ObjectMeta{Namespace: "banlieue-system", Name: "vc"},
		Spec: banlieuev1.ProviderSpec{AllowedNamespaces: &banlieuev1.AllowedNamespaces{From: banlieuev1.NamespacesFromSelector,
			Selector: &banlieuev1.LabelSelector{MatchLabels: map[string]string{"banlieue.io/vc": "allowed"}}}}}
	machine := func(ns, name, providerNs, provider string, withUserData bool) infrav1.VSphereMachine {
		m := infrav1.VSphereMachine{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: infrav1.VSphereMachineSpec{ProviderRef: &infrav1.ProviderReference{Namespace: providerNs, Name: provider}}}
		if withUserData {
			m.Spec.UserDataSecretRef = &banlieuev1.LocalObjectReference{Name: "whatever-the-spec-says"}
		}
		return m
	}
	allowed := map[string]map[string]string{"team-a": {"banlieue.io/vc": "allowed"}, "team-b": {}}
	tests := []struct {
		name     string
		machines []infrav1.VSphereMachine
		want     map[string][]string
	}{
		{"own namespace: names derived from the machines, sorted",
			[]infrav1.VSphereMachine{machine("banlieue-system", "b", "", "vc", true), machine("banlieue-system", "a", "banlieue-system", "vc", true)},
			map[string][]string{"banlieue-system": {userdata.SecretName("a"), userdata.SecretName("b")}}},
		{"admitted tenant namespace", []infrav1.VSphereMachine{machine("team-a", "db", "banlieue-system", "vc", true)},
			map[string][]string{"team-a": {userdata.SecretName("db")}}},
		{"a namespace the Provider does not admit", []infrav1.VSphereMachine{machine("team-b", "db", "banlieue-system", "vc", true)},
			map[string][]string{}},
		{"another Provider's machine", []infrav1.VSphereMachine{machine("team-a", "db", "", "vc", true)}, map[string][]string{}},
		{"a machine without user-data", []infrav1.VSphereMachine{machine("team-a", "db", "banlieue-system", "vc", false)},
			map[string][]string{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := vsphereUserDataGrants(shared, tt.machines, allowed); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("vsphereUserDataGrants = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestVSphereUserDataRefChanged: what of a VSphereMachine wakes its Provider's grants: its
// user-data reference, its Provider and the Cluster API Machine controlling it; not its status.
func TestVSphereUserDataRefChanged(t *testing.T) {
	base := func() *infrav1.VSphereMachine {
		return &infrav1.VSphereMachine{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "m"},
			Spec: infrav1.VSphereMachineSpec{ProviderRef: &infrav1.ProviderReference{Name: "vc"}}}
	}
	owned := func(uid string) func(*infrav1.VSphereMachine) {
		return func(m *infrav1.VSphereMachine) {
			yes := true
			m.OwnerReferences = []metav1.OwnerReference{{APIVersion: "cluster.x-k8s.io/v1beta2", Kind: "Machine", Name: "m", UID: types.UID(uid), Controller: &yes}}
		}
	}
	tests := []struct {
		name string
		old  []func(*infrav1.VSphereMachine)
		cur  []func(*infrav1.VSphereMachine)
		want bool
	}{
		{"a Machine takes the machine over", nil, []func(*infrav1.VSphereMachine){owned("u1")}, true},
		{"another Machine", []func(*infrav1.VSphereMachine){owned("u1")}, []func(*infrav1.VSphereMachine){owned("u2")}, true},
		{"user-data set", nil, []func(*infrav1.VSphereMachine){func(m *infrav1.VSphereMachine) {
			m.Spec.UserDataSecretRef = &banlieuev1.LocalObjectReference{Name: "x"}
		}}, true},
		{"status only", []func(*infrav1.VSphereMachine){owned("u1")}, []func(*infrav1.VSphereMachine){owned("u1"), func(m *infrav1.VSphereMachine) {
			m.Status.VMRef = "vm-42"
		}}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			old, cur := base(), base()
			for _, f := range tt.old {
				f(old)
			}
			for _, f := range tt.cur {
				f(cur)
			}
			if got := vsphereUserDataRefChanged.Update(event.UpdateEvent{ObjectOld: old, ObjectNew: cur}); got != tt.want {
				t.Errorf("passes %v, want %v", got, tt.want)
			}
		})
	}
}
