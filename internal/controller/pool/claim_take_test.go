package pool

import (
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
	"banlieue.io/banlieue/internal/app"
)

func testClaim(bound string) *banlieuev1.VirtualMachineClaim {
	c := &banlieuev1.VirtualMachineClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c", UID: "claim-uid"},
		Spec:       banlieuev1.VirtualMachineClaimSpec{PoolRef: banlieuev1.LocalObjectReference{Name: "web"}},
	}
	if bound != "" {
		c.Status.VirtualMachineRef = &banlieuev1.LocalObjectReference{Name: bound}
	}
	return c
}

// takenVM is a VM as takeMember leaves it for testClaim, changed by mutate.
func takenVM(t *testing.T, name string, mutate func(*banlieuev1.VirtualMachine)) banlieuev1.VirtualMachine {
	t.Helper()
	vm := banlieuev1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name,
		Labels: map[string]string{banlieuev1.LabelPool: "web"}}}
	if err := takeMember(&vm, testClaim(""), app.NewScheme()); err != nil {
		t.Fatal(err)
	}
	mutate(&vm)
	return vm
}

func ownedBy(uid types.UID, controller bool) func(*banlieuev1.VirtualMachine) {
	return func(vm *banlieuev1.VirtualMachine) {
		vm.OwnerReferences = []metav1.OwnerReference{{APIVersion: "banlieue.io/v1alpha1", Kind: "VirtualMachineClaim",
			Name: "c", UID: uid, Controller: ptr.To(controller)}}
	}
}

func TestTakenBy(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*banlieuev1.VirtualMachine)
		want   bool
	}{
		{"as takeMember left it", func(*banlieuev1.VirtualMachine) {}, true},
		{"the claim's label only, no owner", func(vm *banlieuev1.VirtualMachine) {
			vm.OwnerReferences = nil
			delete(vm.Labels, banlieuev1.LabelPool)
		}, false},
		{"both labels, no owner", func(vm *banlieuev1.VirtualMachine) { vm.OwnerReferences = nil }, false},
		{"still owned by the pool", func(vm *banlieuev1.VirtualMachine) {
			vm.OwnerReferences = []metav1.OwnerReference{{APIVersion: "banlieue.io/v1alpha1", Kind: "VirtualMachinePool",
				Name: "web", UID: "pool-uid", Controller: ptr.To(true)}}
		}, false},
		{"an earlier claim of the same name", ownedBy("old-claim-uid", true), false},
		{"the claim as owner but not controller", ownedBy("claim-uid", false), false},
		{"another pool's label", func(vm *banlieuev1.VirtualMachine) { vm.Labels[banlieuev1.LabelPool] = "db" }, false},
		{"no pool label", func(vm *banlieuev1.VirtualMachine) { delete(vm.Labels, banlieuev1.LabelPool) }, false},
		{"another claim's label", func(vm *banlieuev1.VirtualMachine) { vm.Labels[banlieuev1.LabelClaim] = "d" }, false},
	}
	for _, tc := range tests {
		vm := takenVM(t, "web-abcde", tc.mutate)
		if got := takenBy(&vm, testClaim("web-abcde")); got != tc.want {
			t.Errorf("%s: takenBy = %v, want %v (%+v)", tc.name, got, tc.want, vm.ObjectMeta)
		}
	}
}

// TestStrays is what a release or a hold deletes besides the recorded member, and what an
// unbound claim takes as already its own.
func TestStrays(t *testing.T) {
	bound := takenVM(t, "web-bound", func(*banlieuev1.VirtualMachine) {})
	stray := takenVM(t, "web-stray", func(*banlieuev1.VirtualMachine) {})
	labelled := takenVM(t, "labelled", func(vm *banlieuev1.VirtualMachine) { vm.OwnerReferences = nil })
	foreign := takenVM(t, "foreign", ownedBy("old-claim-uid", true))
	all := []banlieuev1.VirtualMachine{bound, stray, labelled, foreign}
	tests := []struct {
		name, recorded string
		want           []string
	}{
		{"bound: the unrecorded member only", "web-bound", []string{"web-stray"}},
		{"unbound: every member the claim took", "", []string{"web-bound", "web-stray"}},
		{"the recorded name of a VM the claim did not take", "labelled", []string{"web-bound", "web-stray"}},
	}
	for _, tc := range tests {
		var got []string
		for _, vm := range strays(testClaim(tc.recorded), all) {
			got = append(got, vm.Name)
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s: strays = %v, want %v", tc.name, got, tc.want)
		}
	}
}
