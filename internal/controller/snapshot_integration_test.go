package controller

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	infrav1 "banlieue.io/banlieue/api/infrastructure/v1alpha1"
	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
	"banlieue.io/banlieue/internal/testenv"
)

func snapshotOf(ns, name, vm string) *banlieuev1.VirtualMachineSnapshot {
	return &banlieuev1.VirtualMachineSnapshot{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: banlieuev1.VirtualMachineSnapshotSpec{VMName: vm}}
}

func (s *suite) waitSnapshot(ctx context.Context, t *testing.T, ns, name, what string,
	ok func(*banlieuev1.VirtualMachineSnapshot) bool) *banlieuev1.VirtualMachineSnapshot {
	t.Helper()
	var snap banlieuev1.VirtualMachineSnapshot
	testenv.Eventually(t, 3*waitTimeout, "snapshot "+name+" "+what, func() error {
		if err := s.c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &snap); err != nil {
			return err
		}
		ready, msg := snapReadyOf(snap.Status.Conditions)
		return testenv.Unmet(ok(&snap), fmt.Sprintf("phase %s, Ready %s: %s", snap.Status.Phase, ready, msg))
	})
	return &snap
}

func (s *suite) waitRestore(ctx context.Context, t *testing.T, ns, name, what string,
	ok func(*banlieuev1.VirtualMachineRestore) bool) *banlieuev1.VirtualMachineRestore {
	t.Helper()
	var r banlieuev1.VirtualMachineRestore
	testenv.Eventually(t, 3*waitTimeout, "restore "+name+" "+what, func() error {
		if err := s.c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &r); err != nil {
			return err
		}
		ready, msg := snapReadyOf(r.Status.Conditions)
		return testenv.Unmet(ok(&r), fmt.Sprintf("phase %s, Ready %s: %s", r.Status.Phase, ready, msg))
	})
	return &r
}

// reportSnapshots writes the machine's status as the provider would: running, with the
// snapshots' records and the restore's report.
func (s *suite) reportSnapshots(ctx context.Context, t *testing.T, ns, name string, snaps []infrav1.LibvirtMachineSnapshotStatus,
	restore *infrav1.LibvirtMachineRestoreStatus) {
	t.Helper()
	m := s.waitMachine(ctx, t, ns, name)
	s.machineStatus(ctx, t, m, infrav1.LibvirtMachineStatus{
		Initialization:     &banlieuev1.InitializationStatus{Provisioned: ptr.To(true)},
		ObservedPowerState: banlieuev1.PoweredOn,
		Conditions: []metav1.Condition{{Type: banlieuev1.ConditionReady, Status: metav1.ConditionTrue, Reason: "DomainRunning",
			Message: "domain is running", LastTransitionTime: metav1.Now()}},
		Snapshots: snaps,
		Restore:   restore,
	})
}

func takenReport(name string, disks ...string) infrav1.LibvirtMachineSnapshotStatus {
	now := metav1.Now()
	r := infrav1.LibvirtMachineSnapshotStatus{Name: name, Phase: infrav1.SnapshotTaken, Consistency: banlieuev1.ApplicationConsistent, TakenAt: &now}
	for _, d := range disks {
		r.Layers = append(r.Layers, infrav1.SnapshotLayer{Disk: d, Volume: "ns-snap-web-" + d + ".qcow2", Top: "ns-snap-web-" + d + ".qcow2-" + name})
	}
	return r
}

// testSnapshots: the controller's half of snapshots and restores against the API server, the
// suite playing the provider. A snapshot reaches the machine's spec.snapshots with its UID and
// is owned by its VM; the provider's record makes it Ready; a ninth is refused and never
// reaches the machine; a restore over other disks is refused, one over the same disks is
// requested, mirrored and withdrawn; a deleted snapshot is withdrawn and stays until the
// provider has merged its layer.
func (s *suite) testSnapshots(ctx context.Context, t *testing.T) {
	ns := "ns-snap"
	s.namespace(ctx, t, ns)
	s.provider(ctx, t, ns, "lab", "libvirt")
	s.image(ctx, t, "img-snap", banlieuev1.InstallImmediate, readyRowIn(ns, "lab"))
	s.create(ctx, t, guideVM(ns, "web", "small", "img-snap", nil))
	machine := s.waitMachine(ctx, t, ns, "web")
	disk := machine.Spec.Disks[0].Name

	s.create(ctx, t, snapshotOf(ns, "nothing", "absent"))
	s.waitSnapshot(ctx, t, ns, "nothing", "Failed VMNotFound", func(sn *banlieuev1.VirtualMachineSnapshot) bool {
		ready, msg := snapReadyOf(sn.Status.Conditions)
		return sn.Status.Phase == banlieuev1.SnapshotFailed && ready == "False/VMNotFound" && strings.Contains(msg, "spec.vmName")
	})

	s.create(ctx, t, snapshotOf(ns, "s1", "web"))
	s1 := s.waitSnapshot(ctx, t, ns, "s1", "InProgress", func(sn *banlieuev1.VirtualMachineSnapshot) bool {
		return sn.Status.Phase == banlieuev1.SnapshotInProgress
	})
	if !controllerutil.ContainsFinalizer(s1, banlieuev1.FinalizerVirtualMachineSnapshot) ||
		len(s1.OwnerReferences) != 1 || s1.OwnerReferences[0].Kind != "VirtualMachine" || s1.OwnerReferences[0].Name != "web" {
		t.Errorf("s1: finalizers %v owners %+v, want the snapshot finalizer and VirtualMachine web as owner", s1.Finalizers, s1.OwnerReferences)
	}
	s.waitMachineWhere(ctx, t, ns, "web", "asked for s1", func(m *infrav1.LibvirtMachine) bool {
		return len(m.Spec.Snapshots) == 1 && m.Spec.Snapshots[0].Name == "s1" && m.Spec.Snapshots[0].UID == string(s1.UID)
	})
	s.reportSnapshots(ctx, t, ns, "web", []infrav1.LibvirtMachineSnapshotStatus{takenReport("s1", disk)}, nil)
	s1 = s.waitSnapshot(ctx, t, ns, "s1", "Ready", func(sn *banlieuev1.VirtualMachineSnapshot) bool {
		return sn.Status.Phase == banlieuev1.SnapshotReady
	})
	if s1.Status.Consistency != banlieuev1.ApplicationConsistent || len(s1.Status.Disks) != 1 || s1.Status.Disks[0].Name != disk {
		t.Errorf("s1 Ready with consistency %s disks %+v, want ApplicationConsistent over disk %s", s1.Status.Consistency, s1.Status.Disks, disk)
	}

	// Seven more fill the VM's eight; a ninth is refused and never reaches the machine.
	for i := 2; i <= banlieuev1.MaxSnapshotsPerVM; i++ {
		s.create(ctx, t, snapshotOf(ns, fmt.Sprintf("s%d", i), "web"))
	}
	s.waitMachineWhere(ctx, t, ns, "web", "asked for eight", func(m *infrav1.LibvirtMachine) bool {
		return len(m.Spec.Snapshots) == banlieuev1.MaxSnapshotsPerVM
	})
	s.create(ctx, t, snapshotOf(ns, "s9", "web"))
	s.waitSnapshot(ctx, t, ns, "s9", "Failed SnapshotLimitReached", func(sn *banlieuev1.VirtualMachineSnapshot) bool {
		ready, _ := snapReadyOf(sn.Status.Conditions)
		return sn.Status.Phase == banlieuev1.SnapshotFailed && ready == "False/"+banlieuev1.ReasonSnapshotLimitReached
	})
	s.waitEvents(ctx, t, ns, "s9", []string{"Warning/SnapshotLimitReached"})
	if m := s.waitMachine(ctx, t, ns, "web"); slices.ContainsFunc(m.Spec.Snapshots, func(x infrav1.LibvirtMachineSnapshot) bool { return x.Name == "s9" }) {
		t.Errorf("the refused s9 reached the machine: %+v", m.Spec.Snapshots)
	}

	// s2 was taken over a disk the VM no longer has: its restore is refused, nothing requested.
	reports := []infrav1.LibvirtMachineSnapshotStatus{takenReport("s1", disk), takenReport("s2", disk, "gone")}
	s.reportSnapshots(ctx, t, ns, "web", reports, nil)
	s.waitSnapshot(ctx, t, ns, "s2", "Ready", func(sn *banlieuev1.VirtualMachineSnapshot) bool { return sn.Status.Phase == banlieuev1.SnapshotReady })
	s.create(ctx, t, &banlieuev1.VirtualMachineRestore{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "back-s2"},
		Spec: banlieuev1.VirtualMachineRestoreSpec{SnapshotName: "s2"}})
	s.waitRestore(ctx, t, ns, "back-s2", "Failed SnapshotDoesNotMatch", func(r *banlieuev1.VirtualMachineRestore) bool {
		ready, msg := snapReadyOf(r.Status.Conditions)
		return r.Status.Phase == banlieuev1.RestoreFailed && ready == "False/SnapshotDoesNotMatch" && strings.Contains(msg, "gone")
	})
	s.waitEvents(ctx, t, ns, "back-s2", []string{"Warning/SnapshotDoesNotMatch"})
	if m := s.waitMachine(ctx, t, ns, "web"); m.Spec.Restore != nil {
		t.Errorf("a refused restore reached the machine: %+v", m.Spec.Restore)
	}

	// A restore of s1 is requested, mirrored, and withdrawn once the provider is done.
	s.create(ctx, t, &banlieuev1.VirtualMachineRestore{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "back-s1"},
		Spec: banlieuev1.VirtualMachineRestoreSpec{SnapshotName: "s1"}})
	s.waitMachineWhere(ctx, t, ns, "web", "asked to restore s1", func(m *infrav1.LibvirtMachine) bool {
		return m.Spec.Restore != nil && m.Spec.Restore.RestoreName == "back-s1" && m.Spec.Restore.SnapshotName == "s1"
	})
	r := s.waitRestore(ctx, t, ns, "back-s1", "InProgress", func(r *banlieuev1.VirtualMachineRestore) bool {
		return r.Status.Phase == banlieuev1.RestoreInProgress
	})
	if r.Status.VMName != "web" || !controllerutil.ContainsFinalizer(r, banlieuev1.FinalizerVirtualMachineRestore) {
		t.Errorf("back-s1: vmName %q finalizers %v", r.Status.VMName, r.Finalizers)
	}
	s.reportSnapshots(ctx, t, ns, "web", reports, &infrav1.LibvirtMachineRestoreStatus{RestoreName: "back-s1", Phase: infrav1.MachineRestoreSucceeded})
	s.waitRestore(ctx, t, ns, "back-s1", "Succeeded", func(r *banlieuev1.VirtualMachineRestore) bool {
		ready, _ := snapReadyOf(r.Status.Conditions)
		return r.Status.Phase == banlieuev1.RestoreSucceeded && ready == "True/Restored" && r.Status.CompletionTime != nil &&
			!controllerutil.ContainsFinalizer(r, banlieuev1.FinalizerVirtualMachineRestore)
	})
	s.waitMachineWhere(ctx, t, ns, "web", "the restore withdrawn", func(m *infrav1.LibvirtMachine) bool { return m.Spec.Restore == nil })
	s.waitEvents(ctx, t, ns, "back-s1", []string{"Normal/RestoreInProgress", "Normal/Restored"})

	// runStrategy PoweredOff: the VM is asked to stay off before the provider is asked.
	s.create(ctx, t, &banlieuev1.VirtualMachineRestore{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "off-s1"},
		Spec: banlieuev1.VirtualMachineRestoreSpec{SnapshotName: "s1", RunStrategy: banlieuev1.RestorePoweredOff}})
	s.waitMachineWhere(ctx, t, ns, "web", "asked to restore s1 for off-s1", func(m *infrav1.LibvirtMachine) bool {
		return m.Spec.Restore != nil && m.Spec.Restore.RestoreName == "off-s1"
	})
	if vm := s.waitVM(ctx, t, ns, "web", "exists", func(*banlieuev1.VirtualMachine) bool { return true }); vm.Spec.DesiredPowerState != banlieuev1.PoweredOff {
		t.Errorf("off-s1 reached the machine while the VM asks for %s, want PoweredOff first", vm.Spec.DesiredPowerState)
	}
	s.reportSnapshots(ctx, t, ns, "web", reports, &infrav1.LibvirtMachineRestoreStatus{RestoreName: "off-s1", Phase: infrav1.MachineRestoreSucceeded})
	s.waitRestore(ctx, t, ns, "off-s1", "Succeeded", func(r *banlieuev1.VirtualMachineRestore) bool { return r.Status.Phase == banlieuev1.RestoreSucceeded })
	s.waitMachineWhere(ctx, t, ns, "web", "off-s1 withdrawn", func(m *infrav1.LibvirtMachine) bool { return m.Spec.Restore == nil })

	// A deleted snapshot leaves the machine's list at once, and goes once the provider no
	// longer records it.
	if err := s.c.Delete(ctx, snapshotOf(ns, "s1", "web")); err != nil {
		t.Fatal(err)
	}
	s.waitMachineWhere(ctx, t, ns, "web", "s1 withdrawn", func(m *infrav1.LibvirtMachine) bool {
		return !slices.ContainsFunc(m.Spec.Snapshots, func(x infrav1.LibvirtMachineSnapshot) bool { return x.Name == "s1" }) &&
			len(m.Spec.Snapshots) == banlieuev1.MaxSnapshotsPerVM-1
	})
	if err := s.c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "s1"}, &banlieuev1.VirtualMachineSnapshot{}); err != nil {
		t.Errorf("s1 went before the provider merged its layer: %v", err)
	}
	s.reportSnapshots(ctx, t, ns, "web", reports[1:], nil)
	testenv.Eventually(t, 3*waitTimeout, "s1 gone once merged", func() error {
		err := s.c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "s1"}, &banlieuev1.VirtualMachineSnapshot{})
		return testenv.Unmet(apierrors.IsNotFound(err), fmt.Sprint(err))
	})
}
