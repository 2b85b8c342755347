package libvirt

import (
	"context"
	"fmt"
	"slices"

	infrav1 "banlieue.io/banlieue/api/infrastructure/v1alpha1"
	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
	"banlieue.io/banlieue/pkg/libvirt"
)

// restoreWriter writes status.restore; the machine in memory keeps it for the pass.
type restoreWriter func(ctx context.Context, st *infrav1.LibvirtMachineRestoreStatus) error

// restoreRefusal says why the restore spec.restore asks for cannot be done on the record, with
// its reason, or "" when it can. The provider restores the newest snapshot in the chain only:
// its layer's top is the disks' top, so the restore replaces that top with an empty one under
// the same name, and the definition stays as it is; an older snapshot would need the later
// ones' layers, which other snapshots still hold. Pure.
func restoreRefusal(s *infrav1.LibvirtMachineSpec, snaps []infrav1.LibvirtMachineSnapshotStatus, name string) (reason, msg string) {
	i := slices.IndexFunc(snaps, func(st infrav1.LibvirtMachineSnapshotStatus) bool { return st.Name == name })
	if i < 0 || snaps[i].Phase != infrav1.SnapshotTaken {
		return banlieuev1.ReasonRestoreFailed, fmt.Sprintf("snapshot %s is not taken on the host", name)
	}
	var disks []string
	for _, l := range snaps[i].Layers {
		disks = append(disks, l.Disk)
	}
	var want []string
	for _, d := range s.Disks {
		want = append(want, d.Name)
	}
	if !slices.Equal(disks, want) {
		return banlieuev1.ReasonSnapshotDoesNotMatch, fmt.Sprintf(
			"snapshot %s holds disks %v, the machine now has %v; nothing was changed", name, disks, want)
	}
	for _, later := range snaps[i+1:] {
		if snapshotHolds(later.Phase) {
			return banlieuev1.ReasonRestoreFailed, fmt.Sprintf(
				"snapshot %s is older than snapshot %s: only the newest snapshot can be restored; delete the later ones first. Nothing was changed", name, later.Name)
		}
	}
	return "", ""
}

// restoreActive says whether spec.restore asks for a restore the provider has not ended.
func restoreActive(m *infrav1.LibvirtMachine) bool {
	r := m.Spec.Restore
	if r == nil {
		return false
	}
	st := m.Status.Restore
	return st == nil || st.RestoreName != r.RestoreName || st.Phase == infrav1.MachineRestoreInProgress
}

// convergeRestore brings the disks back to the snapshot spec.restore names (ADR-0155): the
// domain destroyed (what the guest wrote since the snapshot is what the restore drops), each
// disk's top layer replaced by an empty one over the snapshot's frozen layer, under the same
// name, so the definition needs no change; the report Succeeded. This pass's power step then
// starts the domain when the machine asks to run. Every step can be done again: a pass that
// died mid-way repeats them, the domain staying off until the report is written.
func convergeRestore(ctx context.Context, c *libvirt.Client, pool libvirt.StoragePool, m *infrav1.LibvirtMachine,
	dom libvirt.Domain, write restoreWriter) error {
	if !restoreActive(m) {
		return nil
	}
	r := m.Spec.Restore
	report := &infrav1.LibvirtMachineRestoreStatus{RestoreName: r.RestoreName, Phase: infrav1.MachineRestoreInProgress}
	if reason, msg := restoreRefusal(&m.Spec, m.Status.Snapshots, r.SnapshotName); reason != "" {
		report.Phase, report.Reason, report.Message = infrav1.MachineRestoreFailed, reason, msg
		return write(ctx, report)
	}
	if st := m.Status.Restore; st == nil || st.RestoreName != r.RestoreName {
		if err := write(ctx, report); err != nil {
			return fmt.Errorf("restore %s: recording it before the host changes: %w", r.RestoreName, err)
		}
	}
	state, _, err := c.DomainState(ctx, dom)
	if err != nil {
		return fmt.Errorf("restore %s: reading the domain's state: %w", r.RestoreName, err)
	}
	if isRunning(state) {
		if err := c.DomainDestroy(libvirt.WithCallTimeout(ctx, destroyTimeout), dom); err != nil && !libvirt.IsNotFound(err) {
			return fmt.Errorf("restore %s: stopping domain %s: %w", r.RestoreName, dom.Name, err)
		}
	}
	snap := m.Status.Snapshots[slices.IndexFunc(m.Status.Snapshots, func(st infrav1.LibvirtMachineSnapshotStatus) bool {
		return st.Name == r.SnapshotName
	})]
	for _, l := range snap.Layers {
		below, err := c.StorageVolLookupByName(ctx, pool, l.Volume)
		if err != nil {
			return fmt.Errorf("restore %s: looking the snapshot's layer %s up: %w", r.RestoreName, l.Volume, err)
		}
		info, err := c.StorageVolGetInfo(ctx, below)
		if err != nil {
			return fmt.Errorf("restore %s: reading the size of %s: %w", r.RestoreName, l.Volume, err)
		}
		// The new top keeps the size the disk grew to since the snapshot.
		if top, err := c.StorageVolLookupByName(ctx, pool, l.Top); err == nil {
			if ti, err := c.StorageVolGetInfo(ctx, top); err == nil {
				info.Capacity = max(info.Capacity, ti.Capacity)
			}
		}
		if err := deleteLayer(ctx, c, pool, l.Top); err != nil {
			return fmt.Errorf("restore %s: deleting the writes since the snapshot (%s): %w", r.RestoreName, l.Top, err)
		}
		xml, err := renderVolume(volumeSpec{name: l.Top, capacity: info.Capacity, format: formatQCOW2,
			backingPath: below.Key, backingFormat: formatQCOW2})
		if err != nil {
			return err
		}
		if _, err := c.StorageVolCreateXML(ctx, pool, xml, 0); err != nil {
			return fmt.Errorf("restore %s: creating the new top %s over %s: %w", r.RestoreName, l.Top, l.Volume, err)
		}
	}
	report.Phase = infrav1.MachineRestoreSucceeded
	if err := write(ctx, report); err != nil {
		return fmt.Errorf("restore %s: recording it done: %w", r.RestoreName, err)
	}
	return nil
}
