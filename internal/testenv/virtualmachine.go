package testenv

import (
	"context"
	"fmt"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "banlieue.io/banlieue/api/infrastructure/v1alpha1"
	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
)

// VirtualMachineFor plays the controller's part for a suite that runs no controller: it creates
// the VirtualMachine a LibvirtMachine was made for (same namespace and name) with the
// status.infrastructureRef the controller writes, so what follows a VM to its machine (the
// console relay) finds it. The provider's own packages name no VirtualMachine type
// (test/boundaries); their suites go through this.
func (e *Env) VirtualMachineFor(ctx context.Context, t testing.TB, machine types.NamespacedName) types.NamespacedName {
	t.Helper()
	vm := &banlieuev1.VirtualMachine{
		ObjectMeta: metav1.ObjectMeta{Namespace: machine.Namespace, Name: machine.Name},
		Spec: banlieuev1.VirtualMachineSpec{ClassRef: banlieuev1.LocalObjectReference{Name: "unused"},
			ImageRef: banlieuev1.LocalObjectReference{Name: "unused"}},
	}
	e.Create(ctx, t, vm)
	vm.Status.InfrastructureRef = &banlieuev1.InfrastructureReference{APIGroup: infrav1.GroupVersion.Group, Kind: "LibvirtMachine",
		Name: machine.Name, Namespace: machine.Namespace}
	if err := e.Client.Status().Update(ctx, vm); err != nil {
		t.Fatalf("writing VirtualMachine %s status.infrastructureRef: %v", machine, err)
	}
	return machine
}

// WaitVMCondition waits until the VirtualMachine key has condition cond True, and fails t after
// timeout with the conditions it last had.
func WaitVMCondition(ctx context.Context, t testing.TB, c client.Reader, key types.NamespacedName, cond string, timeout time.Duration) {
	t.Helper()
	Eventually(t, timeout, key.Name+" "+cond+"=True", func() error {
		var vm banlieuev1.VirtualMachine
		if err := c.Get(ctx, key, &vm); err != nil {
			return err
		}
		return Unmet(meta.IsStatusConditionTrue(vm.Status.Conditions, cond), fmt.Sprintf("%+v", vm.Status.Conditions))
	})
}
