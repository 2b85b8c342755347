package libvirt

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"libvirt.org/go/libvirtxml"

	infrav1 "banlieue.io/banlieue/api/infrastructure/v1alpha1"
	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
	"banlieue.io/banlieue/pkg/libvirt"
)

// Snapshots (ADR-0155): each disk of a snapshot gets a new qcow2 layer over its current top,
// and the old top, frozen beneath it, is the snapshot. The machine's status is the one record
// of the layers (libvirt keeps none: NO_METADATA), written before anything is made on the host,
// and every step looks at the host before it acts, so a pass that died anywhere resumes.

// layerVolume names the layer a snapshot of uid puts over the disk whose first volume is
// diskVol (<disk volume>-<uid>, keeping the .qcow2 suffix the pool's format is read from).
func layerVolume(diskVol, uid string) string {
	return strings.TrimSuffix(diskVol, ".qcow2") + "-" + uid + ".qcow2"
}

// snapshotHolds says whether a snapshot's layers are in the disks' chains: taken, or being
// merged away. Pure.
func snapshotHolds(p infrav1.LibvirtSnapshotPhase) bool {
	return p == infrav1.SnapshotTaken || p == infrav1.SnapshotDeleting
}

// diskTops names each disk's top volume by the record: the disk's own volume, or the top of the
// newest snapshot that holds a layer of it. The domain's definition must name these, or the
// writes since the newest snapshot would fall out of the chain. Pure.
func diskTops(s *infrav1.LibvirtMachineSpec, snaps []infrav1.LibvirtMachineSnapshotStatus) []string {
	tops := make([]string, len(s.Disks))
	for i, d := range s.Disks {
		tops[i] = diskVolume(s.DomainName, d.Name)
		for _, snap := range snaps {
			if !snapshotHolds(snap.Phase) {
				continue
			}
			for _, l := range snap.Layers {
				if l.Disk == d.Name {
					tops[i] = l.Top
				}
			}
		}
	}
	return tops
}

// hasSnapshotRecord says whether the machine asks for or records any snapshot or restore: only
// then does a pass read that record from the API server. Pure.
func hasSnapshotRecord(m *infrav1.LibvirtMachine) bool {
	return len(m.Spec.Snapshots) > 0 || len(m.Status.Snapshots) > 0 || m.Spec.Restore != nil || m.Status.Restore != nil
}

// snapshotStep is the one thing a pass does about snapshots, decided by planSnapshots.
type snapshotStep int

const (
	snapshotNothing snapshotStep = iota
	// snapshotRecord names a requested snapshot's layers in status.
	snapshotRecord
	// snapshotTake makes the recorded layers and switches the disks onto them.
	snapshotTake
	// snapshotForget drops the record of a withdrawn snapshot that holds no layer in the chain.
	snapshotForget
	// snapshotMerge merges a withdrawn snapshot's layer away.
	snapshotMerge
)

// snapshotPlan is the step and the snapshot it is about: an index in status for take, forget
// and merge, in spec for record.
type snapshotPlan struct {
	step  snapshotStep
	index int
}

// planSnapshots decides a pass's step from the request and the record, oldest first: a
// withdrawn snapshot that holds no layer in the chain (failed, or recorded and never switched
// onto) is forgotten first; a recorded snapshot is finished before another is recorded, so the
// chain grows one layer at a time in the order the snapshots were asked for; a withdrawn
// snapshot in the chain is merged last, so a merge the provider cannot do blocks no new
// snapshot. Pure.
func planSnapshots(spec []infrav1.LibvirtMachineSnapshot, status []infrav1.LibvirtMachineSnapshotStatus) snapshotPlan {
	requested := func(name string) bool {
		return slices.ContainsFunc(spec, func(r infrav1.LibvirtMachineSnapshot) bool { return r.Name == name })
	}
	for i, st := range status {
		if !requested(st.Name) && !snapshotHolds(st.Phase) {
			return snapshotPlan{step: snapshotForget, index: i}
		}
	}
	for i, st := range status {
		if st.Phase == infrav1.SnapshotRecorded {
			return snapshotPlan{step: snapshotTake, index: i}
		}
	}
	for i, r := range spec {
		if !slices.ContainsFunc(status, func(st infrav1.LibvirtMachineSnapshotStatus) bool { return st.Name == r.Name }) {
			return snapshotPlan{step: snapshotRecord, index: i}
		}
	}
	for i, st := range status {
		if !requested(st.Name) {
			return snapshotPlan{step: snapshotMerge, index: i}
		}
	}
	return snapshotPlan{step: snapshotNothing}
}

// recordedLayers names the layers a snapshot of uid puts over tops, one per disk. Pure.
func recordedLayers(s *infrav1.LibvirtMachineSpec, tops []string, uid string) []infrav1.SnapshotLayer {
	layers := make([]infrav1.SnapshotLayer, len(s.Disks))
	for i, d := range s.Disks {
		layers[i] = infrav1.SnapshotLayer{Disk: d.Name, Volume: tops[i], Top: layerVolume(diskVolume(s.DomainName, d.Name), uid)}
	}
	return layers
}

// snapshotRecordWriter writes status.snapshots and adds names to status.volumes in one status
// write, before the host changes; the machine in memory keeps the record for the pass.
type snapshotRecordWriter func(ctx context.Context, snaps []infrav1.LibvirtMachineSnapshotStatus, volumes []string) error

// convergeSnapshots takes the steps planSnapshots decides, one after the other, on the machine's
// existing domain (a domain not defined yet has no snapshots to take: the next pass takes
// them), each written through before the next. A stopped domain is switched by this pass's
// definition, which names the new tops.
//
// A merge runs alone, in a pass that took no other step: a snapshot taken while the domain is
// off is in the definition only once this pass has defined it, and the merge reads the chain
// from the running domain. pending says a step is left for a pass soon.
func convergeSnapshots(ctx context.Context, c *libvirt.Client, pool libvirt.StoragePool, m *infrav1.LibvirtMachine,
	dom libvirt.Domain, write snapshotRecordWriter) (pending bool, err error) {
	// Each snapshot is at most recorded, then taken or forgotten: the bound is never reached
	// unless the record does not move, and then the next pass looks again.
	for steps := range 2*len(m.Spec.Snapshots) + len(m.Status.Snapshots) + 1 {
		plan := planSnapshots(m.Spec.Snapshots, m.Status.Snapshots)
		switch {
		case plan.step == snapshotNothing:
			return false, nil
		case plan.step == snapshotMerge && steps > 0:
			return true, nil
		}
		if err := snapshotOnce(ctx, c, pool, m, dom, plan, write); err != nil {
			return false, err
		}
		if plan.step == snapshotMerge {
			return planSnapshots(m.Spec.Snapshots, m.Status.Snapshots).step != snapshotNothing, nil
		}
	}
	return true, nil
}

// snapshotOnce takes one step of the plan.
func snapshotOnce(ctx context.Context, c *libvirt.Client, pool libvirt.StoragePool, m *infrav1.LibvirtMachine,
	dom libvirt.Domain, plan snapshotPlan, write snapshotRecordWriter) error {
	snaps := slices.Clone(m.Status.Snapshots)
	switch plan.step {
	case snapshotRecord:
		req := m.Spec.Snapshots[plan.index]
		layers := recordedLayers(&m.Spec, diskTops(&m.Spec, snaps), req.UID)
		var names []string
		for _, l := range layers {
			if err := layerNameFree(ctx, c, pool, m, l.Top); err != nil {
				return err
			}
			names = append(names, l.Top)
		}
		snaps = append(snaps, infrav1.LibvirtMachineSnapshotStatus{Name: req.Name, Phase: infrav1.SnapshotRecorded, Layers: layers})
		if err := write(ctx, snaps, names); err != nil {
			return fmt.Errorf("recording the layers of snapshot %s before creating them: %w", req.Name, err)
		}
		return nil
	case snapshotTake:
		return takeSnapshot(ctx, c, pool, m, dom, snaps, plan.index, write)
	case snapshotForget:
		st := snaps[plan.index]
		if st.Phase == infrav1.SnapshotRecorded {
			// A pass may have died between the live switch and its record: a layer a
			// definition names is in the chain, and is merged, never deleted.
			named, err := layersNamed(ctx, c, dom, st.Layers)
			if err != nil {
				return fmt.Errorf("withdrawn snapshot %s: %w", st.Name, err)
			}
			if named {
				snaps[plan.index].Phase, snaps[plan.index].TakenAt = infrav1.SnapshotTaken, ptrNow()
				snaps[plan.index].Consistency = banlieuev1.CrashConsistent
				return write(ctx, snaps, nil)
			}
		}
		// Nothing of it is in a chain: its layers, if made, are empty files no definition names.
		for _, l := range st.Layers {
			if err := deleteLayer(ctx, c, pool, l.Top); err != nil {
				return fmt.Errorf("deleting layer %s of withdrawn snapshot %s: %w", l.Top, st.Name, err)
			}
		}
		snaps = slices.Delete(snaps, plan.index, plan.index+1)
		if err := write(ctx, snaps, nil); err != nil {
			return fmt.Errorf("removing withdrawn snapshot %s from status: %w", st.Name, err)
		}
		return nil
	case snapshotMerge:
		return mergeSnapshot(ctx, c, pool, m, dom, snaps, plan.index, write)
	}
	return nil
}

// layerNameFree refuses a layer name a volume already holds that the machine did not record.
func layerNameFree(ctx context.Context, c *libvirt.Client, pool libvirt.StoragePool, m *infrav1.LibvirtMachine, name string) error {
	if err := checkVolumeName(name); err != nil {
		return err
	}
	if slices.Contains(m.Status.Volumes, name) {
		return nil
	}
	_, err := c.StorageVolLookupByName(ctx, pool, name)
	switch {
	case libvirt.IsNotFound(err):
		return nil
	case err != nil:
		return fmt.Errorf("looking snapshot layer %q up: %w", name, err)
	}
	return volumeConflict(name, m.Spec.Pool)
}

func deleteLayer(ctx context.Context, c *libvirt.Client, pool libvirt.StoragePool, name string) error {
	vol, err := c.StorageVolLookupByName(ctx, pool, name)
	if libvirt.IsNotFound(err) {
		return nil
	} else if err != nil {
		return err
	}
	if err := c.StorageVolDelete(ctx, vol); err != nil && !libvirt.IsNotFound(err) {
		return err
	}
	return nil
}

// takeSnapshot makes the recorded snapshot's layers (those missing) over the disks' tops and
// switches the disks onto them: live through DOMAIN_SNAPSHOT_CREATE_XML when the domain runs,
// else by marking it taken, so this pass's definition names the new tops.
func takeSnapshot(ctx context.Context, c *libvirt.Client, pool libvirt.StoragePool, m *infrav1.LibvirtMachine,
	dom libvirt.Domain, snaps []infrav1.LibvirtMachineSnapshotStatus, i int, write snapshotRecordWriter) error {
	st := &snaps[i]
	if len(st.Layers) != len(m.Spec.Disks) || slices.ContainsFunc(st.Layers, func(l infrav1.SnapshotLayer) bool {
		return !slices.ContainsFunc(m.Spec.Disks, func(d infrav1.LibvirtDisk) bool { return d.Name == l.Disk })
	}) {
		// The disks changed between the record and the take: the layers no longer fit.
		return failSnapshot(ctx, c, pool, dom, snaps, i, "the machine's disks changed before the snapshot was taken", write)
	}
	paths := make([]string, len(st.Layers))
	for j, l := range st.Layers {
		below, err := c.StorageVolLookupByName(ctx, pool, l.Volume)
		if err != nil {
			return fmt.Errorf("snapshot %s: looking the disk's top %s up: %w", st.Name, l.Volume, err)
		}
		vol, err := c.StorageVolLookupByName(ctx, pool, l.Top)
		if libvirt.IsNotFound(err) {
			info, err := c.StorageVolGetInfo(ctx, below)
			if err != nil {
				return fmt.Errorf("snapshot %s: reading the size of %s: %w", st.Name, l.Volume, err)
			}
			xml, err := renderVolume(volumeSpec{name: l.Top, capacity: info.Capacity, format: formatQCOW2,
				backingPath: below.Key, backingFormat: formatQCOW2})
			if err != nil {
				return err
			}
			if vol, err = c.StorageVolCreateXML(ctx, pool, xml, 0); err != nil {
				var refused *libvirt.Error
				if errors.As(err, &refused) {
					return failSnapshot(ctx, c, pool, dom, snaps, i, fmt.Sprintf("creating layer %s: %v", l.Top, err), write)
				}
				return fmt.Errorf("snapshot %s: creating layer %s: %w", st.Name, l.Top, err)
			}
		} else if err != nil {
			return fmt.Errorf("snapshot %s: looking layer %s up: %w", st.Name, l.Top, err)
		}
		paths[j] = vol.Key
	}
	state, _, err := c.DomainState(ctx, dom)
	if err != nil {
		return fmt.Errorf("snapshot %s: reading the domain's state: %w", st.Name, err)
	}
	st.Consistency = banlieuev1.CrashConsistent
	st.Message = ""
	if isRunning(state) {
		if err := switchLive(ctx, c, dom, st, paths); err != nil {
			var refused *libvirt.Error
			if errors.As(err, &refused) {
				return failSnapshot(ctx, c, pool, dom, snaps, i, err.Error(), write)
			}
			return fmt.Errorf("snapshot %s: %w", st.Name, err)
		}
	}
	st.Phase = infrav1.SnapshotTaken
	st.TakenAt = ptrNow()
	if err := write(ctx, snaps, nil); err != nil {
		return fmt.Errorf("recording snapshot %s as taken: %w", st.Name, err)
	}
	return nil
}

// switchLive puts the running domain's disks onto the layers at paths, unless the live
// definition already names them all (a pass that died after the switch). It tries with the
// guest's filesystems frozen first, and without when the agent cannot freeze them.
func switchLive(ctx context.Context, c *libvirt.Client, dom libvirt.Domain, st *infrav1.LibvirtMachineSnapshotStatus,
	paths []string) error {
	xml, err := c.DomainXMLDesc(ctx, dom, 0)
	if err != nil {
		return fmt.Errorf("reading the live definition: %w", err)
	}
	var def libvirtxml.Domain
	if err := def.Unmarshal(xml); err != nil {
		return fmt.Errorf("reading the live definition: %w", err)
	}
	disks, switched := snapshotDisks(&def, st.Layers, paths)
	if switched {
		return nil
	}
	if len(disks) == 0 {
		return errors.New("the live domain has no disk to snapshot")
	}
	body, err := libvirt.DiskOnlySnapshotXML(st.Name, disks)
	if err != nil {
		return err
	}
	flags := libvirt.SnapshotDiskOnly | libvirt.SnapshotAtomic | libvirt.SnapshotNoMetadata | libvirt.SnapshotReuseExt
	_, err = c.DomainSnapshotCreateXML(ctx, dom, body, flags|libvirt.SnapshotQuiesce)
	if errors.Is(err, libvirt.ErrGuestAgentUnavailable) {
		st.Message = "taken without freezing the guest's filesystems: " + err.Error()
		_, err = c.DomainSnapshotCreateXML(ctx, dom, body, flags)
	} else if err == nil {
		st.Consistency = banlieuev1.ApplicationConsistent
	}
	if err != nil {
		return fmt.Errorf("taking the disk-only snapshot: %w", err)
	}
	return nil
}

// snapshotDisks lists the live domain's disks for DiskOnlySnapshotXML: each disk whose source
// is a layer's volume gets that layer's new file, every other one (the seed, the installer) is
// left out; switched says every layer is already a disk's source. Pure.
func snapshotDisks(def *libvirtxml.Domain, layers []infrav1.SnapshotLayer, paths []string) ([]libvirt.SnapshotDisk, bool) {
	var out []libvirt.SnapshotDisk
	if def.Devices == nil {
		return nil, false
	}
	onTop := 0
	for _, d := range def.Devices.Disks {
		if d.Target == nil {
			continue
		}
		src := ""
		if d.Source != nil && d.Source.File != nil {
			src = d.Source.File.File
		}
		sd := libvirt.SnapshotDisk{Target: d.Target.Dev, Skip: true}
		for j, l := range layers {
			switch {
			case src == paths[j]:
				onTop++
			case src != "" && pathNames(src, l.Volume) && d.Device != "cdrom":
				sd = libvirt.SnapshotDisk{Target: d.Target.Dev, File: paths[j]}
			}
		}
		out = append(out, sd)
	}
	return out, onTop == len(layers)
}

// pathNames says whether a host path is the volume's file in its pool (a dir pool's key is
// its path, so the name is the path's last element).
func pathNames(path, volume string) bool {
	return path == volume || strings.HasSuffix(path, "/"+volume)
}

// failSnapshot reports a snapshot that could not be taken and deletes the layers it made: no
// definition names them (the switch is atomic, and it was refused).
func failSnapshot(ctx context.Context, c *libvirt.Client, pool libvirt.StoragePool, dom libvirt.Domain, snaps []infrav1.LibvirtMachineSnapshotStatus,
	i int, msg string, write snapshotRecordWriter) error {
	st := &snaps[i]
	if named, err := layersNamed(ctx, c, dom, st.Layers); err != nil || named {
		// Never delete a layer a definition names: it holds the guest's writes.
		return fmt.Errorf("snapshot %s failed (%s), and its layers are in the domain's chain (%v); refusing to delete them", st.Name, msg, err)
	}
	for _, l := range st.Layers {
		if err := deleteLayer(ctx, c, pool, l.Top); err != nil {
			return fmt.Errorf("snapshot %s failed (%s); deleting layer %s: %w", st.Name, msg, l.Top, err)
		}
	}
	st.Phase, st.Message = infrav1.SnapshotFailed, truncate(msg, 1024)
	if err := write(ctx, snaps, nil); err != nil {
		return fmt.Errorf("recording snapshot %s as failed: %w", st.Name, err)
	}
	return nil
}

// layersNamed says whether the domain's live or persistent definition names any of the layers'
// new tops as a disk's source.
func layersNamed(ctx context.Context, c *libvirt.Client, dom libvirt.Domain, layers []infrav1.SnapshotLayer) (bool, error) {
	for _, flags := range []libvirt.DomainXMLFlags{0, libvirt.DomainXMLInactive} {
		xml, err := c.DomainXMLDesc(ctx, dom, flags)
		if err != nil {
			return false, fmt.Errorf("reading the domain's definition: %w", err)
		}
		var def libvirtxml.Domain
		if err := def.Unmarshal(xml); err != nil {
			return false, fmt.Errorf("reading the domain's definition: %w", err)
		}
		for _, f := range diskFiles(&def) {
			if slices.ContainsFunc(layers, func(l infrav1.SnapshotLayer) bool { return pathNames(f, l.Top) }) {
				return true, nil
			}
		}
	}
	return false, nil
}

// topPaths replaces each disk's path with its top layer's, as the record names it. A top the
// pool no longer has is refused: a definition over an older layer would hide the writes since.
func topPaths(ctx context.Context, c *libvirt.Client, pool libvirt.StoragePool, m *infrav1.LibvirtMachine,
	paths []string, found map[string]libvirt.StorageVol) ([]string, map[string]libvirt.StorageVol, error) {
	tops := diskTops(&m.Spec, m.Status.Snapshots)
	out := slices.Clone(paths)
	byDisk := make(map[string]libvirt.StorageVol, len(found))
	for k, v := range found {
		byDisk[k] = v
	}
	for i, d := range m.Spec.Disks {
		base := diskVolume(m.Spec.DomainName, d.Name)
		if tops[i] == base {
			continue
		}
		vol, err := c.StorageVolLookupByName(ctx, pool, tops[i])
		if err != nil {
			return nil, nil, fmt.Errorf("looking the top layer %s of spec.disks[%d] up (status.snapshots names it): %w", tops[i], i, err)
		}
		out[i] = vol.Key
		if _, ok := byDisk[base]; ok {
			// Growth resizes the top: the layers beneath keep the size they were frozen at.
			byDisk[base] = vol
		}
	}
	return out, byDisk, nil
}

func ptrNow() *metav1.Time { t := metav1.Now(); return &t }

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}

// snapshotRequeue is when a pass that left a snapshot step for the next looks again.
const snapshotRequeue = time.Second
