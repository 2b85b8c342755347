package libvirt

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"libvirt.org/go/libvirtxml"

	infrav1 "banlieue.io/banlieue/api/infrastructure/v1alpha1"
	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
	"banlieue.io/banlieue/pkg/libvirt"
)

// mergeWait bounds how long one pass waits for a commit job before it looks again on a later
// pass; the job belongs to the domain and runs on meanwhile.
const mergeWait = 2 * time.Minute

// domainStartPaused is VIR_DOMAIN_START_PAUSED: QEMU runs, the guest's CPUs do not.
const domainStartPaused = 1

// diskChain is one live disk: its target and its layers' files, top first.
type diskChain struct {
	target string
	files  []string
}

// diskChains reads each file-backed disk's chain of layers from a live definition. Pure.
func diskChains(def *libvirtxml.Domain) []diskChain {
	var out []diskChain
	if def.Devices == nil {
		return nil
	}
	for _, d := range def.Devices.Disks {
		if d.Target == nil || d.Source == nil || d.Source.File == nil || d.Device == "cdrom" {
			continue
		}
		ch := diskChain{target: d.Target.Dev, files: []string{d.Source.File.File}}
		for b := d.BackingStore; b != nil && b.Source != nil && b.Source.File != nil; b = b.BackingStore {
			ch.files = append(ch.files, b.Source.File.File)
		}
		out = append(out, ch)
	}
	return out
}

// layerMerge is where one layer's merge stands on the host.
type layerMerge int

const (
	// mergeRefused: the chain does not hold the layer over its recorded volume; nothing is done.
	mergeRefused layerMerge = iota
	// mergeDone: the layer is out of the chain and its volume beneath holds its writes.
	mergeDone
	// mergeActive: the layer is the disk's top: an active commit and a pivot.
	mergeActive
	// mergeInner: the layer is inside the chain: a plain commit into the volume beneath.
	mergeInner
)

// placeLayer finds where layer l stands in the chains: above its volume (its top, or inside),
// or gone from a chain that still holds its volume. Pure.
func placeLayer(chains []diskChain, l infrav1.SnapshotLayer) (layerMerge, diskChain, int) {
	for _, ch := range chains {
		k := slices.IndexFunc(ch.files, func(f string) bool { return pathNames(f, l.Top) })
		if k < 0 {
			continue
		}
		if k+1 >= len(ch.files) || !pathNames(ch.files[k+1], l.Volume) {
			return mergeRefused, ch, k
		}
		if k == 0 {
			return mergeActive, ch, k
		}
		return mergeInner, ch, k
	}
	for _, ch := range chains {
		if slices.ContainsFunc(ch.files, func(f string) bool { return pathNames(f, l.Volume) }) {
			return mergeDone, ch, -1
		}
	}
	return mergeRefused, diskChain{}, -1
}

// afterMerge is the record once snapshot i's layers are merged: the snapshot gone, and a later
// snapshot whose layer was one of its tops now names the volume it was merged into. Pure.
func afterMerge(snaps []infrav1.LibvirtMachineSnapshotStatus, i int) []infrav1.LibvirtMachineSnapshotStatus {
	merged := snaps[i]
	out := make([]infrav1.LibvirtMachineSnapshotStatus, 0, len(snaps)-1)
	for j, st := range snaps {
		if j == i {
			continue
		}
		st.Layers = slices.Clone(st.Layers)
		for k, l := range st.Layers {
			for _, m := range merged.Layers {
				if m.Disk == l.Disk && m.Top == l.Volume {
					st.Layers[k].Volume = m.Volume
				}
			}
		}
		out = append(out, st)
	}
	return out
}

// mergeSnapshot merges the withdrawn snapshot i's layers away (ADR-0155): for each disk, the
// layer above the snapshot's frozen volume is committed into it, by an active commit and a
// pivot when it is the disk's top, a plain commit otherwise; then its file is deleted, and the
// record goes last. A stopped domain is started paused for the commits (libvirt commits only
// in a running QEMU) and destroyed after. Every step reads the live chain first, so a pass
// that died anywhere resumes; a chain that does not hold the recorded layers is refused.
func mergeSnapshot(ctx context.Context, c *libvirt.Client, pool libvirt.StoragePool, m *infrav1.LibvirtMachine,
	dom libvirt.Domain, snaps []infrav1.LibvirtMachineSnapshotStatus, i int, write snapshotRecordWriter) error {
	st := &snaps[i]
	if st.Phase != infrav1.SnapshotDeleting {
		st.Phase, st.Message = infrav1.SnapshotDeleting, ""
		if err := write(ctx, snaps, nil); err != nil {
			return fmt.Errorf("recording snapshot %s as deleting: %w", st.Name, err)
		}
	}
	state, _, err := c.DomainState(ctx, dom)
	if err != nil {
		return fmt.Errorf("deleting snapshot %s: reading the domain's state: %w", st.Name, err)
	}
	started := false
	if !isRunning(state) {
		if _, err := c.DomainCreate(ctx, dom, domainStartPaused); err != nil {
			return fmt.Errorf("deleting snapshot %s: starting the stopped domain paused for the merge: %w", st.Name, err)
		}
		started = true
	}
	for _, l := range st.Layers {
		if err := mergeLayer(ctx, c, pool, dom, st.Name, l); err != nil {
			return err
		}
	}
	// A paused domain of a machine asked off is one a pass that died mid-merge started.
	if started || state == libvirt.DomainPaused && m.Spec.DesiredPowerState == banlieuev1.PoweredOff {
		if err := c.DomainDestroy(libvirt.WithCallTimeout(ctx, destroyTimeout), dom); err != nil && !libvirt.IsNotFound(err) {
			return fmt.Errorf("deleting snapshot %s: stopping the domain started for the merge: %w", st.Name, err)
		}
	}
	if err := write(ctx, afterMerge(snaps, i), nil); err != nil {
		return fmt.Errorf("removing merged snapshot %s from status: %w", st.Name, err)
	}
	return nil
}

// mergeLayer merges one disk's layer l.Top into l.Volume and deletes l.Top's file.
func mergeLayer(ctx context.Context, c *libvirt.Client, pool libvirt.StoragePool, dom libvirt.Domain, snap string,
	l infrav1.SnapshotLayer) error {
	deadline := time.Now().Add(mergeWait)
	started := false
	for {
		xml, err := c.DomainXMLDesc(ctx, dom, 0)
		if err != nil {
			return fmt.Errorf("deleting snapshot %s: reading the live definition: %w", snap, err)
		}
		var def libvirtxml.Domain
		if err := def.Unmarshal(xml); err != nil {
			return fmt.Errorf("deleting snapshot %s: reading the live definition: %w", snap, err)
		}
		where, ch, k := placeLayer(diskChains(&def), l)
		switch where {
		case mergeRefused:
			return fmt.Errorf("deleting snapshot %s: the domain's chain of disk %s does not hold layer %s over %s; nothing was merged",
				snap, l.Disk, l.Top, l.Volume)
		case mergeDone:
			if err := deleteLayer(ctx, c, pool, l.Top); err != nil {
				return fmt.Errorf("deleting snapshot %s: deleting merged layer %s: %w", snap, l.Top, err)
			}
			return nil
		}
		job, err := c.DomainGetBlockJobInfo(ctx, dom, ch.target)
		if err != nil {
			return fmt.Errorf("deleting snapshot %s: reading the block job of %s: %w", snap, ch.target, err)
		}
		switch {
		case job.Found && where == mergeActive && job.Cur == job.End:
			// An empty top mirrors nothing: its job reads 0 of 0, which Ready does not count, and
			// libvirt refuses a pivot before QEMU calls the job ready: asked again until then.
			if err := c.DomainBlockJobAbort(ctx, dom, ch.target, libvirt.BlockJobAbortPivot); err != nil {
				var refused *libvirt.Error
				if !errors.As(err, &refused) || time.Now().After(deadline) {
					return fmt.Errorf("deleting snapshot %s: pivoting %s onto %s: %w", snap, ch.target, l.Volume, err)
				}
			}
		case job.Found:
			// A commit under way (ours, from this pass or one before): wait for it.
		case started && where == mergeInner:
			// The job ended since it started and the chain is read again at once.
		default:
			flags, base, top := libvirt.BlockCommitActive|libvirt.BlockCommitShallow, "", ""
			if where == mergeInner {
				flags, base, top = 0, ch.files[k+1], ch.files[k]
			}
			if err := c.DomainBlockCommit(ctx, dom, ch.target, base, top, 0, flags); err != nil {
				return fmt.Errorf("deleting snapshot %s: committing %s into %s: %w", snap, l.Top, l.Volume, err)
			}
			started = true
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("deleting snapshot %s: the merge of %s into %s is still running; looking again shortly", snap, l.Top, l.Volume)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}
