package controller

import (
	"cmp"
	"fmt"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	infrav1 "banlieue.io/banlieue/api/infrastructure/v1alpha1"
	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
)

// Snapshots and restores, the controller's half (docs/guides/libvirt-provider.md, "Snapshots and restores"): pure
// decisions over a VirtualMachineSnapshot or VirtualMachineRestore, its VM and the VM's
// LibvirtMachine. The reconcilers (snapshot_controller.go) only read and write.

// snapshotInput is what stepSnapshot decides from.
type snapshotInput struct {
	Snapshot *banlieuev1.VirtualMachineSnapshot
	// VM is nil when spec.vmName names none.
	VM *banlieuev1.VirtualMachine
	// MachineKind is the VM's machine kind (its Provider's class), "" when unknown.
	MachineKind string
	// Machine is the VM's LibvirtMachine, nil when there is none.
	Machine *infrav1.LibvirtMachine
	// Siblings are the snapshots naming the same VM, this one included.
	Siblings []banlieuev1.VirtualMachineSnapshot
	Now      metav1.Time
}

// admittedSnapshots are the names of a VM's snapshots within MaxSnapshotsPerVM: those already
// requested on the machine first (a snapshot once admitted stays so), then the others by
// creation time and name. Failed and deleted snapshots hold no place.
func admittedSnapshots(siblings []banlieuev1.VirtualMachineSnapshot, machine *infrav1.LibvirtMachine) map[string]bool {
	requested := map[string]bool{}
	if machine != nil {
		for _, s := range machine.Spec.Snapshots {
			requested[s.Name] = true
		}
	}
	var live []*banlieuev1.VirtualMachineSnapshot
	for i := range siblings {
		s := &siblings[i]
		if s.Status.Phase == banlieuev1.SnapshotFailed || !s.DeletionTimestamp.IsZero() {
			continue
		}
		live = append(live, s)
	}
	slices.SortFunc(live, func(a, b *banlieuev1.VirtualMachineSnapshot) int {
		if ra, rb := requested[a.Name], requested[b.Name]; ra != rb {
			if ra {
				return -1
			}
			return 1
		}
		return cmp.Or(a.CreationTimestamp.Compare(b.CreationTimestamp.Time), cmp.Compare(a.Name, b.Name))
	})
	out := map[string]bool{}
	for i, s := range live {
		if i < banlieuev1.MaxSnapshotsPerVM {
			out[s.Name] = true
		}
	}
	return out
}

// snapshotReport is the provider's record of the named snapshot, nil when it has none.
func snapshotReport(machine *infrav1.LibvirtMachine, name string) *infrav1.LibvirtMachineSnapshotStatus {
	if machine == nil {
		return nil
	}
	for i := range machine.Status.Snapshots {
		if machine.Status.Snapshots[i].Name == name {
			return &machine.Status.Snapshots[i]
		}
	}
	return nil
}

// stepSnapshot is the snapshot's next status from in, and whether the snapshot is to be listed
// in the machine's spec.snapshots (taken and kept). It is pure: a restarted controller resumes
// from what the status and the machine say.
func stepSnapshot(in snapshotInput) (banlieuev1.VirtualMachineSnapshotStatus, bool) {
	s := in.Snapshot
	st := *s.Status.DeepCopy()
	st.ObservedGeneration = s.Generation
	if st.Phase == "" {
		st.Phase = banlieuev1.SnapshotPending
	}
	ready := func(status metav1.ConditionStatus, reason, msg string) {
		banlieuev1.SetCondition(&st.Conditions, s.Generation, metav1.Condition{Type: banlieuev1.ConditionReady,
			Status: status, Reason: reason, Message: msg})
	}
	fail := func(reason, msg string) (banlieuev1.VirtualMachineSnapshotStatus, bool) {
		st.Phase = banlieuev1.SnapshotFailed
		ready(metav1.ConditionFalse, reason, msg)
		return st, false
	}
	if st.Phase == banlieuev1.SnapshotFailed {
		return st, false
	}
	vm := in.VM
	switch {
	case vm == nil:
		return fail(banlieuev1.ReasonVMNotFound, fmt.Sprintf("spec.vmName: no VirtualMachine %s in namespace %s", s.Spec.VMName, s.Namespace))
	case vm.Status.Scheduled != nil && in.MachineKind != "" && in.MachineKind != "LibvirtMachine":
		sc := vm.Status.Scheduled
		return fail(banlieuev1.ReasonSnapshotsUnsupported, fmt.Sprintf(
			"spec.vmName: VirtualMachine %s runs on Provider %s/%s of ProviderClass %s, whose machines cannot be snapshotted; only libvirt machines can",
			vm.Name, cmp.Or(sc.ProviderNamespace, vm.Namespace), sc.ProviderName, sc.ProviderClass))
	case in.Machine == nil || vm.Status.Scheduled == nil:
		st.Phase = banlieuev1.SnapshotPending
		ready(metav1.ConditionFalse, banlieuev1.ReasonVMNotPlaced, fmt.Sprintf(
			"spec.vmName: VirtualMachine %s has no placement or no machine yet; the snapshot waits for it", vm.Name))
		return st, false
	case !admittedSnapshots(in.Siblings, in.Machine)[s.Name]:
		return fail(banlieuev1.ReasonSnapshotLimitReached, fmt.Sprintf(
			"VirtualMachine %s has %d snapshots already, the most a VM may have: delete one and create this snapshot again",
			vm.Name, banlieuev1.MaxSnapshotsPerVM))
	}
	report := snapshotReport(in.Machine, s.Name)
	switch {
	case report == nil && st.Phase == banlieuev1.SnapshotReady:
		// Taken once, and the machine no longer records it: its layers went with a machine
		// recreated or torn down. Taking it again would hold other data under the same name.
		return fail(banlieuev1.ReasonSnapshotFailed, fmt.Sprintf(
			"the machine of VirtualMachine %s no longer records the snapshot's layers (the VM was recreated); it cannot be restored", vm.Name))
	case report == nil || report.Phase == infrav1.SnapshotRecorded:
		st.Phase = banlieuev1.SnapshotInProgress
		ready(metav1.ConditionFalse, banlieuev1.ReasonSnapshotInProgress, fmt.Sprintf(
			"the provider takes the snapshot of VirtualMachine %s's disks", vm.Name))
	case report.Phase == infrav1.SnapshotFailed:
		return fail(banlieuev1.ReasonSnapshotFailed, cmp.Or(report.Message, "the provider could not take the snapshot"))
	case report.Phase == infrav1.SnapshotTaken:
		st.Phase, st.Consistency, st.CreationTime = banlieuev1.SnapshotReady, report.Consistency, report.TakenAt
		st.Disks = st.Disks[:0]
		for _, l := range report.Layers {
			st.Disks = append(st.Disks, banlieuev1.SnapshotDisk{Name: l.Disk, Volume: l.Volume})
		}
		msg := fmt.Sprintf("the snapshot of VirtualMachine %s is taken, %s", vm.Name, report.Consistency)
		if report.Message != "" {
			msg += ": " + report.Message
		}
		ready(metav1.ConditionTrue, banlieuev1.ReasonSnapshotTaken, msg)
	}
	return st, true
}

// machineSnapshots is the machine's spec.snapshots with name (of uid) kept or dropped: appended
// at the end when newly kept, in the order taken; nil when nothing changes.
func machineSnapshots(machine *infrav1.LibvirtMachine, name, uid string, keep bool) ([]infrav1.LibvirtMachineSnapshot, bool) {
	cur := machine.Spec.Snapshots
	i := slices.IndexFunc(cur, func(s infrav1.LibvirtMachineSnapshot) bool { return s.Name == name })
	switch {
	case keep && i >= 0 && cur[i].UID == uid, !keep && i < 0:
		return nil, false
	case keep && i >= 0:
		// The same name, another object: the old one's layers go, the new one is taken anew.
		out := slices.Delete(slices.Clone(cur), i, i+1)
		return append(out, infrav1.LibvirtMachineSnapshot{Name: name, UID: uid}), true
	case keep:
		return append(slices.Clone(cur), infrav1.LibvirtMachineSnapshot{Name: name, UID: uid}), true
	}
	return slices.Delete(slices.Clone(cur), i, i+1), true
}

// restoreInput is what stepRestore decides from.
type restoreInput struct {
	Restore  *banlieuev1.VirtualMachineRestore
	Snapshot *banlieuev1.VirtualMachineSnapshot
	VM       *banlieuev1.VirtualMachine
	Machine  *infrav1.LibvirtMachine
	Now      metav1.Time
}

// snapshotMatches reports how the machine's disks differ from the snapshot's, "" when they
// are the same disks: a restore over other disks would lose or mix data.
func snapshotMatches(snap *banlieuev1.VirtualMachineSnapshot, machine *infrav1.LibvirtMachine) string {
	var taken, now []string
	for _, d := range snap.Status.Disks {
		taken = append(taken, d.Name)
	}
	for _, d := range machine.Spec.Disks {
		now = append(now, d.Name)
	}
	if slices.Equal(taken, now) {
		return ""
	}
	return fmt.Sprintf("the snapshot holds disks %v, the VM now has %v", taken, now)
}

// stepRestore is the restore's next status from in, and the machine's spec.restore it asks for
// (nil: none of its own). keep is false when the request is to be left as it is (another
// restore's).
func stepRestore(in restoreInput) (st banlieuev1.VirtualMachineRestoreStatus, want *infrav1.LibvirtMachineRestore, mine bool) {
	r := in.Restore
	st = *r.Status.DeepCopy()
	st.ObservedGeneration = r.Generation
	if st.Phase == "" {
		st.Phase = banlieuev1.RestorePending
	}
	ready := func(status metav1.ConditionStatus, reason, msg string) {
		banlieuev1.SetCondition(&st.Conditions, r.Generation, metav1.Condition{Type: banlieuev1.ConditionReady,
			Status: status, Reason: reason, Message: msg})
	}
	end := func(phase banlieuev1.RestorePhase, status metav1.ConditionStatus, reason, msg string) {
		st.Phase, st.CompletionTime = phase, &in.Now
		ready(status, reason, msg)
	}
	mine = in.Machine != nil && (in.Machine.Spec.Restore == nil || in.Machine.Spec.Restore.RestoreName == r.Name)
	if st.Phase.Final() {
		return st, nil, mine
	}
	if in.Snapshot != nil {
		st.VMName = in.Snapshot.Spec.VMName
	}
	snap, pending := in.Snapshot, st.Phase == banlieuev1.RestorePending
	switch {
	case snap == nil && pending:
		end(banlieuev1.RestoreFailed, metav1.ConditionFalse, banlieuev1.ReasonSnapshotNotFound,
			fmt.Sprintf("spec.snapshotName: no VirtualMachineSnapshot %s in namespace %s", r.Spec.SnapshotName, r.Namespace))
		return st, nil, mine
	case pending && snap.Status.Phase == banlieuev1.SnapshotFailed:
		end(banlieuev1.RestoreFailed, metav1.ConditionFalse, banlieuev1.ReasonSnapshotNotReady,
			fmt.Sprintf("spec.snapshotName: VirtualMachineSnapshot %s failed; it cannot be restored", snap.Name))
		return st, nil, mine
	case pending && snap.Status.Phase != banlieuev1.SnapshotReady:
		ready(metav1.ConditionFalse, banlieuev1.ReasonSnapshotNotReady, fmt.Sprintf(
			"spec.snapshotName: VirtualMachineSnapshot %s is %s; the restore waits until it is Ready", snap.Name, cmp.Or(string(snap.Status.Phase), "Pending")))
		return st, nil, mine
	case in.VM == nil && pending:
		end(banlieuev1.RestoreFailed, metav1.ConditionFalse, banlieuev1.ReasonVMNotFound,
			fmt.Sprintf("VirtualMachine %s of snapshot %s is gone", st.VMName, r.Spec.SnapshotName))
		return st, nil, mine
	case in.Machine == nil:
		if !pending {
			end(banlieuev1.RestoreFailed, metav1.ConditionFalse, banlieuev1.ReasonVMNotFound,
				fmt.Sprintf("VirtualMachine %s's machine is gone; the restore cannot end", st.VMName))
			return st, nil, mine
		}
		ready(metav1.ConditionFalse, banlieuev1.ReasonVMNotPlaced, fmt.Sprintf("VirtualMachine %s has no machine yet", st.VMName))
		return st, nil, mine
	case !mine:
		ready(metav1.ConditionFalse, banlieuev1.ReasonRestoreWaiting, fmt.Sprintf(
			"VirtualMachineRestore %s of the same VM runs; this one starts after it", in.Machine.Spec.Restore.RestoreName))
		return st, nil, false
	}
	if pending {
		if diff := snapshotMatches(snap, in.Machine); diff != "" {
			end(banlieuev1.RestoreFailed, metav1.ConditionFalse, banlieuev1.ReasonSnapshotDoesNotMatch,
				fmt.Sprintf("spec.snapshotName: VirtualMachineSnapshot %s no longer matches VirtualMachine %s's disks (%s); nothing was changed",
					snap.Name, st.VMName, diff))
			return st, nil, mine
		}
	}
	want = &infrav1.LibvirtMachineRestore{RestoreName: r.Name, SnapshotName: r.Spec.SnapshotName}
	var report *infrav1.LibvirtMachineRestoreStatus
	if rs := in.Machine.Status.Restore; rs != nil && rs.RestoreName == r.Name {
		report = rs
	}
	switch {
	case report != nil && report.Phase == infrav1.MachineRestoreSucceeded:
		end(banlieuev1.RestoreSucceeded, metav1.ConditionTrue, banlieuev1.ReasonRestored,
			fmt.Sprintf("VirtualMachine %s's disks are back to snapshot %s", st.VMName, r.Spec.SnapshotName))
		return st, nil, mine
	case report != nil && report.Phase == infrav1.MachineRestoreFailed:
		reason := banlieuev1.ReasonRestoreFailed
		if report.Reason == banlieuev1.ReasonSnapshotDoesNotMatch {
			reason = report.Reason
		}
		end(banlieuev1.RestoreFailed, metav1.ConditionFalse, reason, cmp.Or(report.Message, "the provider could not restore the snapshot"))
		return st, nil, mine
	}
	st.Phase = banlieuev1.RestoreInProgress
	ready(metav1.ConditionFalse, banlieuev1.ReasonRestoreInProgress, fmt.Sprintf(
		"the provider stops VirtualMachine %s, brings its disks back to snapshot %s and starts it as asked", st.VMName, r.Spec.SnapshotName))
	return st, want, mine
}
