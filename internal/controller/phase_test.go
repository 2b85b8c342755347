package controller

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
)

func TestVMPhase(t *testing.T) {
	now := metav1.Now()
	ready := []metav1.Condition{{Type: banlieuev1.ConditionReady, Status: metav1.ConditionTrue, Reason: banlieuev1.ReasonReconciled}}
	scheduled := &banlieuev1.ScheduledPlacement{ProviderName: "a", FailureDomain: "a"}
	// machine is a scheduled VM whose machine reported provisioned and power.
	machine := func(provisioned bool, power banlieuev1.PowerState) func(*banlieuev1.VirtualMachine) {
		return func(vm *banlieuev1.VirtualMachine) {
			vm.Status.Scheduled = scheduled
			vm.Status.Initialization = &banlieuev1.InitializationStatus{Provisioned: ptr.To(provisioned)}
			vm.Status.ObservedPowerState = power
		}
	}
	desired := func(p banlieuev1.PowerState, then ...func(*banlieuev1.VirtualMachine)) func(*banlieuev1.VirtualMachine) {
		return func(vm *banlieuev1.VirtualMachine) {
			vm.Spec.DesiredPowerState = p
			for _, f := range then {
				f(vm)
			}
		}
	}
	tests := []struct {
		name string
		vm   func(*banlieuev1.VirtualMachine)
		want banlieuev1.VirtualMachinePhase
	}{
		{"new", func(*banlieuev1.VirtualMachine) {}, "Pending"},
		{"scheduled", func(vm *banlieuev1.VirtualMachine) { vm.Status.Scheduled = scheduled }, "Provisioning"},
		{"ready", func(vm *banlieuev1.VirtualMachine) { vm.Status.Scheduled = scheduled; vm.Status.Conditions = ready }, "Ready"},
		{"paused beats ready", func(vm *banlieuev1.VirtualMachine) { vm.Spec.Paused = true; vm.Status.Conditions = ready }, "Paused"},
		{"deleting beats paused", func(vm *banlieuev1.VirtualMachine) { vm.Spec.Paused = true; vm.DeletionTimestamp = &now }, "Deleting"},

		{"off as asked", desired(banlieuev1.PoweredOff, machine(true, banlieuev1.PoweredOff)), "Stopped"},
		{"off, asked Suspended: an off domain stays off", desired(banlieuev1.Suspended, machine(true, banlieuev1.PoweredOff)), "Stopped"},
		{"suspended as asked", desired(banlieuev1.Suspended, machine(true, banlieuev1.Suspended)), "Suspended"},
		{"off, asked on: not yet started", desired(banlieuev1.PoweredOn, machine(true, banlieuev1.PoweredOff)), "Provisioning"},
		{"off, default power: not yet started", machine(true, banlieuev1.PoweredOff), "Provisioning"},
		{"suspended, asked on: not yet resumed", desired(banlieuev1.PoweredOn, machine(true, banlieuev1.Suspended)), "Provisioning"},
		{"asked off, still running: shutting down", desired(banlieuev1.PoweredOff, machine(true, banlieuev1.PoweredOn)), "Provisioning"},
		{"asked off, machine not provisioned", desired(banlieuev1.PoweredOff, machine(false, banlieuev1.PoweredOff)), "Provisioning"},
		{"asked off, machine not observed yet", desired(banlieuev1.PoweredOff, func(vm *banlieuev1.VirtualMachine) { vm.Status.Scheduled = scheduled }), "Provisioning"},
		{"asked off, not scheduled (a stale status)", desired(banlieuev1.PoweredOff, machine(true, banlieuev1.PoweredOff),
			func(vm *banlieuev1.VirtualMachine) { vm.Status.Scheduled = nil }), "Pending"},
		{"paused beats stopped", desired(banlieuev1.PoweredOff, machine(true, banlieuev1.PoweredOff),
			func(vm *banlieuev1.VirtualMachine) { vm.Spec.Paused = true }), "Paused"},
		{"deleting beats stopped", desired(banlieuev1.PoweredOff, machine(true, banlieuev1.PoweredOff),
			func(vm *banlieuev1.VirtualMachine) { vm.DeletionTimestamp = &now }), "Deleting"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			vm := testVM("web-01")
			tt.vm(vm)
			if got := vmPhase(vm, &vm.Status); got != tt.want {
				t.Errorf("phase = %s, want %s", got, tt.want)
			}
		})
	}
}

// Every derivable phase is in vmPhases, so the banlieue_virtualmachines gauge emits it.
func TestVMPhasesListsEveryPhase(t *testing.T) {
	listed := map[banlieuev1.VirtualMachinePhase]bool{}
	for _, p := range vmPhases {
		listed[p] = true
	}
	for _, p := range []banlieuev1.VirtualMachinePhase{banlieuev1.VMPhaseDeleting, banlieuev1.VMPhasePaused, banlieuev1.VMPhaseReady,
		banlieuev1.VMPhaseStopped, banlieuev1.VMPhaseSuspended, banlieuev1.VMPhaseProvisioning, banlieuev1.VMPhasePending} {
		if !listed[p] {
			t.Errorf("phase %s is not in vmPhases", p)
		}
	}
}
