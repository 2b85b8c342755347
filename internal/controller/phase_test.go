package controller

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
)

func TestVMPhase(t *testing.T) {
	now := metav1.Now()
	ready := []metav1.Condition{{Type: banlieuev1.ConditionReady, Status: metav1.ConditionTrue, Reason: banlieuev1.ReasonReconciled}}
	scheduled := &banlieuev1.ScheduledPlacement{ProviderName: "a", FailureDomain: "a"}
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
