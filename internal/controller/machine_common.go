package controller

import (
	"cmp"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
)

// What every machine kind takes from the VM the same way, whatever its backend.

// machineSize is the machine's CPUs and memory, the class's unless the VM overrides them, and
// the VM's disk overrides by disk name.
func machineSize(vm *banlieuev1.VirtualMachine, class *banlieuev1.VMClass) (cpus, memoryMiB int32, disks []banlieuev1.DiskOverride) {
	cpus, memoryMiB = class.Spec.Hardware.CPUs, class.Spec.Hardware.MemoryMiB
	if o := vm.Spec.HardwareOverride; o != nil {
		if o.CPUs != nil {
			cpus = *o.CPUs
		}
		if o.MemoryMiB != nil {
			memoryMiB = *o.MemoryMiB
		}
		disks = o.DiskOverrides
	}
	return cpus, memoryMiB, disks
}

// machinePower is the machine's desiredPowerState, powerOffMode and powerOffTimeout. The VM's
// defaults are applied by the API server; a VM read before they existed (or built in a test)
// gets the same ones here, so the machine never depends on its own defaulting.
func machinePower(vm *banlieuev1.VirtualMachine) (banlieuev1.PowerState, banlieuev1.PowerOffMode, *metav1.Duration) {
	timeout := &metav1.Duration{Duration: defaultPowerOffTimeout}
	if vm.Spec.PowerOffTimeout != nil {
		timeout = vm.Spec.PowerOffTimeout.DeepCopy()
	}
	return cmp.Or(vm.Spec.DesiredPowerState, banlieuev1.PoweredOn), cmp.Or(vm.Spec.PowerOffMode, banlieuev1.PowerOffTrySoft), timeout
}

// userDataFields is the machine's userDataSecretRef and userDataHash: the per-machine Secret
// the controller writes, never the content.
func userDataFields(in buildInput) (*banlieuev1.LocalObjectReference, string) {
	if in.UserData == nil {
		return nil, ""
	}
	return &banlieuev1.LocalObjectReference{Name: in.UserData.Name}, in.UserData.Hash
}

// secretName is a reference's name, "" when there is none.
func secretName(ref *banlieuev1.LocalObjectReference) string {
	if ref == nil {
		return ""
	}
	return ref.Name
}
