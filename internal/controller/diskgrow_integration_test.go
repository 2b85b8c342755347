package controller

import (
	"context"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	infrav1 "banlieue.io/banlieue/api/infrastructure/v1alpha1"
	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
)

// testDiskSizes: a raised diskOverrides size reaches the LibvirtMachine, which the provider then
// grows; removing the override would fall back to the class's smaller size, which the machine's
// own rule refuses: the VM says so and the machine keeps its disk.
func (s *suite) testDiskSizes(ctx context.Context, t *testing.T) {
	ns := "ns-r"
	s.namespace(ctx, t, ns)
	s.provider(ctx, t, ns, "lab", "libvirt")
	s.image(ctx, t, "img-r", banlieuev1.InstallImmediate, readyRowIn(ns, "lab"))
	vm := guideVM(ns, "web-01", "small", "img-r", nil)
	vm.Spec.HardwareOverride = &banlieuev1.HardwareOverride{DiskOverrides: []banlieuev1.DiskOverride{{Name: "os", SizeGiB: 30}}}
	s.create(ctx, t, vm)
	diskIs := func(size int32) func(*infrav1.LibvirtMachine) bool {
		return func(m *infrav1.LibvirtMachine) bool { return len(m.Spec.Disks) == 1 && m.Spec.Disks[0].SizeGiB == size }
	}
	s.waitMachineWhere(ctx, t, ns, "web-01", "disk os at the override's 30 GiB", diskIs(30))

	s.patchVM(ctx, t, ns, "web-01", func(vm *banlieuev1.VirtualMachine) { vm.Spec.HardwareOverride.DiskOverrides[0].SizeGiB = 40 })
	s.waitMachineWhere(ctx, t, ns, "web-01", "disk os raised to 40 GiB", diskIs(40))

	// The class says 20 GiB.
	s.patchVM(ctx, t, ns, "web-01", func(vm *banlieuev1.VirtualMachine) { vm.Spec.HardwareOverride = nil })
	got := s.waitVM(ctx, t, ns, "web-01", "Scheduled=False InfraBuildFailed", func(vm *banlieuev1.VirtualMachine) bool {
		return hasCondition(vm.Status.Conditions, banlieuev1.ConditionScheduled, metav1.ConditionFalse, banlieuev1.ReasonInfraBuildFailed)
	})
	msg := meta.FindStatusCondition(got.Status.Conditions, banlieuev1.ConditionScheduled).Message
	for _, want := range []string{"spec.disks[0].sizeGiB", "disks[].sizeGiB must not shrink: shrinking a disk is refused"} {
		if !strings.Contains(msg, want) {
			t.Errorf("Scheduled message %q lacks %q", msg, want)
		}
	}
	t.Logf("the VM says: %s", msg)
	if m := s.waitMachine(ctx, t, ns, "web-01"); !diskIs(40)(m) {
		t.Errorf("machine disks %+v, want os kept at 40 GiB", m.Spec.Disks)
	}
}
