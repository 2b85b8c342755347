package controller

import (
	"k8s.io/apimachinery/pkg/api/meta"

	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
)

// vmPhases are the phases of status.phase and of banlieue_virtualmachines (docs/operations.md),
// in the order they are derived.
var vmPhases = []banlieuev1.VirtualMachinePhase{
	banlieuev1.VMPhaseDeleting, banlieuev1.VMPhasePaused, banlieuev1.VMPhaseReady,
	banlieuev1.VMPhaseStopped, banlieuev1.VMPhaseSuspended,
	banlieuev1.VMPhaseProvisioning, banlieuev1.VMPhasePending,
}

// vmPhase is the first phase that applies to vm with status. Ready means running; a VM whose
// machine is provisioned in the other power state its spec asks for reads Stopped or Suspended
// rather than Provisioning, which would read as stuck (docs/adr/0147-phases-of-a-vm-as-its-spec-asks.md).
func vmPhase(vm *banlieuev1.VirtualMachine, status *banlieuev1.VirtualMachineStatus) banlieuev1.VirtualMachinePhase {
	provisioned := status.Scheduled != nil && machineProvisioned(status)
	desired, observed := vm.Spec.DesiredPowerState, status.ObservedPowerState
	switch {
	case !vm.DeletionTimestamp.IsZero():
		return banlieuev1.VMPhaseDeleting
	case vm.Spec.Paused:
		return banlieuev1.VMPhasePaused
	case meta.IsStatusConditionTrue(status.Conditions, banlieuev1.ConditionReady):
		return banlieuev1.VMPhaseReady
	case provisioned && observed == banlieuev1.PoweredOff && (desired == banlieuev1.PoweredOff || desired == banlieuev1.Suspended):
		return banlieuev1.VMPhaseStopped
	case provisioned && observed == banlieuev1.Suspended && desired == banlieuev1.Suspended:
		return banlieuev1.VMPhaseSuspended
	case status.Scheduled != nil:
		return banlieuev1.VMPhaseProvisioning
	}
	return banlieuev1.VMPhasePending
}
