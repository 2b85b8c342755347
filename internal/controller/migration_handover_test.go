package controller

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	infrav1 "banlieue.io/banlieue/api/infrastructure/v1alpha1"
	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
)

func TestHandover(t *testing.T) {
	m := &banlieuev1.VirtualMachineMigration{ObjectMeta: metav1.ObjectMeta{Name: "mv"}}
	machine := &infrav1.LibvirtMachine{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web"}}
	machine.Spec = infrav1.LibvirtMachineSpec{ProviderRef: &infrav1.ProviderReference{Name: "a", Namespace: "ns"}, Pool: "pa",
		FailureDomain: "fa", ProviderID: "libvirt://a/u", Network: []infrav1.LibvirtNetworkInterface{{Name: "eth0"}},
		Migration: &infrav1.LibvirtMachineMigration{MigrationName: "mv", TargetProvider: infrav1.ProviderReference{Name: "b", Namespace: "ns"}}}
	report := func(name string, p infrav1.LibvirtMachineMigrationPhase) *infrav1.LibvirtMachineMigrationStatus {
		return &infrav1.LibvirtMachineMigrationStatus{MigrationName: name, Phase: p}
	}
	for _, tc := range []struct {
		name string
		rep  *infrav1.LibvirtMachineMigrationStatus
		want bool
	}{
		{"no report", nil, false},
		{"migrating", report("mv", infrav1.MachineMigrationMigrating), false},
		{"failed", report("mv", infrav1.MachineMigrationFailed), false},
		{"another migration's success", report("old", infrav1.MachineMigrationSucceeded), false},
		{"succeeded", report("mv", infrav1.MachineMigrationSucceeded), true},
	} {
		mc := machine.DeepCopy()
		mc.Status.Migration = tc.rep
		if got := handoverDue(m, mc); got != tc.want {
			t.Errorf("%s: handoverDue %v, want %v", tc.name, got, tc.want)
		}
	}
	done := machine.DeepCopy()
	done.Spec.Migration = nil
	if handoverDue(m, done) {
		t.Error("a machine already handed over is due again")
	}

	built := &infrav1.LibvirtMachine{Spec: infrav1.LibvirtMachineSpec{ProviderRef: &infrav1.ProviderReference{Name: "b", Namespace: "ns"},
		Pool: "pb", FailureDomain: "fb", Network: []infrav1.LibvirtNetworkInterface{{Name: "eth0", Source: infrav1.NetworkSource{Name: "net-b"}}}}}
	out := handedOver(machine, built)
	if out.Spec.Migration != nil || *out.Spec.ProviderRef != machine.Spec.Migration.TargetProvider || out.Spec.Pool != "pb" ||
		out.Spec.FailureDomain != "fb" || out.Spec.Network[0].Source.Name != "net-b" || out.Spec.ProviderID != "libvirt://a/u" {
		t.Errorf("handed over: %+v", out.Spec)
	}
	if machine.Spec.Migration == nil || machine.Spec.Pool != "pa" {
		t.Error("handedOver changed the machine it was given")
	}
}
