package libvirt

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"

	infrav1 "banlieue.io/banlieue/api/infrastructure/v1alpha1"
	"banlieue.io/banlieue/pkg/libvirt"
)

// diskCheck is one disk of the machine whose size the host must be asked about: it exists and
// its spec size is above the size status.diskSizes records for it (or none is recorded).
type diskCheck struct {
	index int
	name  string // the disk's name in spec.disks
	want  int32  // spec.disks[index].sizeGiB
}

// disksToCheck plans a pass's disk growth from the record alone, so a machine whose disks are
// all at their recorded size costs the host no call. exists says whether a disk's volume
// existed before this pass: one created now has its spec size already. Pure.
func disksToCheck(disks []infrav1.LibvirtDisk, recorded []infrav1.DiskSize, exists func(name string) bool) []diskCheck {
	var out []diskCheck
	for i, d := range disks {
		if !exists(d.Name) {
			continue
		}
		if j := slices.IndexFunc(recorded, func(r infrav1.DiskSize) bool { return r.Name == d.Name }); j >= 0 && recorded[j].SizeGiB >= d.SizeGiB {
			continue
		}
		out = append(out, diskCheck{index: i, name: d.Name, want: d.SizeGiB})
	}
	return out
}

// diskSizesAfter is status.diskSizes after a pass: every disk of the spec at its spec size,
// except those the host refused to grow (refused, by name), which keep their recorded size.
// Disks no longer in the spec leave the record. Pure.
func diskSizesAfter(disks []infrav1.LibvirtDisk, recorded []infrav1.DiskSize, refused map[string]bool) []infrav1.DiskSize {
	out := make([]infrav1.DiskSize, 0, len(disks))
	for _, d := range disks {
		if refused[d.Name] {
			if j := slices.IndexFunc(recorded, func(r infrav1.DiskSize) bool { return r.Name == d.Name }); j >= 0 {
				out = append(out, recorded[j])
			}
			continue
		}
		out = append(out, infrav1.DiskSize{Name: d.Name, SizeGiB: d.SizeGiB})
	}
	return out
}

// refusalStands returns the DisksGrown refusal recorded for the machine's current spec: it
// stands until the spec changes, since asking the host again on every pass would only be
// refused again. Pure.
func refusalStands(m *infrav1.LibvirtMachine) (string, bool) {
	prev := meta.FindStatusCondition(m.Status.Conditions, infrav1.ConditionDisksGrown)
	if prev != nil && prev.Reason == infrav1.ReasonDiskGrowUnsupported && prev.ObservedGeneration == m.Generation {
		return prev.Message, true
	}
	return "", false
}

// growOutcome is what growDisks did: the record to write, and the refusals of a host that
// cannot grow a disk (the DisksGrown condition's message), empty when there were none.
type growOutcome struct {
	sizes   []infrav1.DiskSize
	refusal string
}

// growDisks grows each existing disk of the machine whose spec size is above its size on the
// host. A running domain's disk grows live through QEMU (DOMAIN_BLOCK_RESIZE), which also grows
// the image; an off domain's volume grows through the pool (STORAGE_VOL_RESIZE, sparse). Each
// looks at the size first, so a pass that died after the resize and before the record only
// records it. A disk is named by its volume's path, which the running domain knows it by
// whatever its target letter. Only volumes claimVolumes proved the machine's (found) are
// touched, and never made smaller.
func growDisks(ctx context.Context, c *libvirt.Client, m *infrav1.LibvirtMachine, found map[string]libvirt.StorageVol,
	dom libvirt.Domain, running bool) (growOutcome, error) {
	s := &m.Spec
	checks := disksToCheck(s.Disks, m.Status.DiskSizes, func(name string) bool {
		_, ok := found[diskVolume(s.DomainName, name)]
		return ok
	})
	if msg, ok := refusalStands(m); ok {
		return growOutcome{sizes: m.Status.DiskSizes, refusal: msg}, nil
	}
	refused := map[string]bool{}
	var refusals []string
	for _, d := range checks {
		vol := found[diskVolume(s.DomainName, d.name)]
		err := growDisk(ctx, c, vol, dom, running, uint64(d.want)<<30)
		if libvirt.IsUnsupported(err) {
			refused[d.name] = true
			refusals = append(refusals, fmt.Sprintf("spec.disks[%d] (%s): %v", d.index, d.name, err))
			continue
		}
		if err != nil {
			return growOutcome{}, fmt.Errorf("growing spec.disks[%d] (volume %s) to %d GiB: %w", d.index, vol.Name, d.want, err)
		}
	}
	out := growOutcome{sizes: diskSizesAfter(s.Disks, m.Status.DiskSizes, refused)}
	if len(refusals) > 0 {
		out.refusal = "the host cannot grow " + strings.Join(refusals, "; ") + "; the disk keeps its size"
	}
	return out, nil
}

// notAttached says libvirtd refused a disk call because the running domain has no disk of that
// path.
func notAttached(err error) bool {
	var e *libvirt.Error
	return errors.As(err, &e) && e.Code == libvirt.ErrInvalidArg
}

// growDisk makes vol at least size bytes, live through the domain while it runs.
func growDisk(ctx context.Context, c *libvirt.Client, vol libvirt.StorageVol, dom libvirt.Domain, running bool, size uint64) error {
	if running {
		info, err := c.DomainGetBlockInfo(ctx, dom, vol.Key)
		switch {
		case notAttached(err):
			// A disk added to the definition while the domain runs is attached at its next
			// boot: QEMU does not hold it, and the pool grows it.
		case err != nil:
			return err
		case info.Capacity >= size:
			return nil
		default:
			return c.DomainBlockResize(ctx, dom, vol.Key, size, libvirt.BlockResizeBytes)
		}
	}
	info, err := c.StorageVolGetInfo(ctx, vol)
	if err != nil {
		return err
	}
	if info.Capacity >= size {
		return nil
	}
	return c.StorageVolResize(ctx, vol, size, 0)
}
