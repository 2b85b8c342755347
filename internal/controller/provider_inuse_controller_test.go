package controller

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/event"

	infrav1 "banlieue.io/banlieue/api/infrastructure/v1alpha1"
	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
)

func TestProviderRefChanged(t *testing.T) {
	machine := func(ref *infrav1.ProviderReference, mutate func(*infrav1.LibvirtMachine)) *infrav1.LibvirtMachine {
		m := &infrav1.LibvirtMachine{ObjectMeta: metav1.ObjectMeta{Name: "web-01", Namespace: "team-a"},
			Spec: infrav1.LibvirtMachineSpec{ProviderRef: ref}}
		if mutate != nil {
			mutate(m)
		}
		return m
	}
	host := &infrav1.ProviderReference{Name: "host-1"}
	cases := []struct {
		name     string
		old, new *infrav1.LibvirtMachine
		want     bool
	}{
		{"a status write", machine(host, nil), machine(host, func(m *infrav1.LibvirtMachine) {
			m.Status.ObservedPowerState = banlieuev1.PoweredOff
		}), false},
		{"a finalizer", machine(host, nil), machine(host, func(m *infrav1.LibvirtMachine) {
			m.Finalizers = []string{infrav1.FinalizerLibvirtMachine}
		}), false},
		{"the same Provider named with its namespace", machine(host, nil),
			machine(&infrav1.ProviderReference{Name: "host-1", Namespace: "team-a"}, nil), false},
		{"placed after its creation", machine(nil, nil), machine(host, nil), true},
		{"moved to another Provider", machine(host, nil), machine(&infrav1.ProviderReference{Name: "host-2"}, nil), true},
		{"moved to a shared Provider of another namespace", machine(host, nil),
			machine(&infrav1.ProviderReference{Name: "host-1", Namespace: "shared"}, nil), true},
	}
	p := providerRefChanged(libvirtKind)
	for _, tc := range cases {
		if got := p.Update(event.UpdateEvent{ObjectOld: tc.old, ObjectNew: tc.new}); got != tc.want {
			t.Errorf("%s: Update = %t, want %t", tc.name, got, tc.want)
		}
	}
	if !p.Create(event.CreateEvent{Object: machine(host, nil)}) || !p.Delete(event.DeleteEvent{Object: machine(host, nil)}) {
		t.Error("a machine created or deleted must reach the provider-in-use controller")
	}
}
