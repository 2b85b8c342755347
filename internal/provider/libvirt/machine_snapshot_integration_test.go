package libvirt

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/util/retry"
	"libvirt.org/go/libvirtxml"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "banlieue.io/banlieue/api/infrastructure/v1alpha1"
	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
	"banlieue.io/banlieue/internal/ssa"
	"banlieue.io/banlieue/internal/testenv"
	"banlieue.io/banlieue/internal/testenv/labhost"
	"banlieue.io/banlieue/pkg/libvirt"
)

// testSnapshots takes a machine's snapshots and merges them away, as the controller asks
// through spec.snapshots: one of the running domain (switched live), one of the stopped domain
// (switched by its definition), the older deleted while the domain is off (an inner commit in a
// domain started paused, then stopped again), the newer while it runs (an active commit and a
// pivot); the data written into each layer is in the disk after. A restore of the running
// machine drops what was written since the snapshot. The machine deleted with a snapshot leaves
// no volume behind.
func (s *machineSuite) testSnapshots(ctx context.Context, t *testing.T) {
	m := s.machine(testNamespace, "snap")
	s.env.Create(ctx, t, m)
	key := client.ObjectKeyFromObject(m)
	deleted := false
	t.Cleanup(func() {
		if !deleted {
			s.deleteAndWait(context.Background(), t, m)
		}
	})
	s.waitMachine(ctx, t, key, 60*time.Second, machineReady)
	dir := filepath.Join(s.lab.Dir, "pools", s.pool)
	osVol := diskVolume(m.Spec.DomainName, "os")
	layer := func(uid string) string { return layerVolume(osVol, uid) }
	update := func(change func(*infrav1.LibvirtMachine)) {
		t.Helper()
		if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			var cur infrav1.LibvirtMachine
			if err := s.env.Client.Get(ctx, key, &cur); err != nil {
				return err
			}
			change(&cur)
			return s.env.Client.Update(ctx, &cur)
		}); err != nil {
			t.Fatal(err)
		}
	}
	snapshots := func(names ...string) func(*infrav1.LibvirtMachine) {
		return func(m *infrav1.LibvirtMachine) {
			m.Spec.Snapshots = nil
			for _, n := range names {
				m.Spec.Snapshots = append(m.Spec.Snapshots, infrav1.LibvirtMachineSnapshot{Name: n, UID: "uid-" + n})
			}
		}
	}
	recorded := func(want ...string) func(*infrav1.LibvirtMachine) bool {
		return func(m *infrav1.LibvirtMachine) bool {
			var got []string
			for _, st := range m.Status.Snapshots {
				if st.Phase != infrav1.SnapshotTaken {
					return false
				}
				got = append(got, st.Name)
			}
			return slices.Equal(got, want)
		}
	}
	power := func(p banlieuev1.PowerState, ok func(*infrav1.LibvirtMachine) bool) {
		t.Helper()
		update(func(m *infrav1.LibvirtMachine) {
			m.Spec.DesiredPowerState, m.Spec.PowerOffMode = p, banlieuev1.PowerOffHard
		})
		s.waitMachine(ctx, t, key, 60*time.Second, ok)
	}
	off := func(m *infrav1.LibvirtMachine) bool {
		return m.Status.ObservedPowerState == banlieuev1.PoweredOff && m.Status.ObservedGeneration == m.Generation
	}
	dom, err := s.host.DomainLookupByName(ctx, m.Spec.DomainName)
	if err != nil {
		t.Fatal(err)
	}
	// chain is vda's layers, top first, by volume name, from the live or the persistent
	// definition.
	chain := func(flags libvirt.DomainXMLFlags) []string {
		t.Helper()
		xml, err := s.host.DomainXMLDesc(ctx, dom, flags)
		if err != nil {
			t.Fatal(err)
		}
		var def libvirtxml.Domain
		if err := def.Unmarshal(xml); err != nil {
			t.Fatal(err)
		}
		for _, ch := range diskChains(&def) {
			if ch.target == "vda" {
				names := make([]string, len(ch.files))
				for i, f := range ch.files {
					names[i] = filepath.Base(f)
				}
				return names
			}
		}
		t.Fatalf("no vda in %s", xml)
		return nil
	}
	// persistentTop waits for the persistent definition's top of vda to be want: a snapshot or a
	// merge is recorded, then a later step of the pass redefines the domain over the new top.
	persistentTop := func(what, want string) {
		t.Helper()
		testenv.Eventually(t, 30*time.Second, what, func() error {
			c := chain(libvirt.DomainXMLInactive)
			return testenv.Unmet(len(c) > 0 && c[0] == want, fmt.Sprintf("vda's persistent chain %v, want %s on top", c, want))
		})
	}
	qemuIO := func(file, cmd string) {
		t.Helper()
		args := []string{"-f", "qcow2", "-c", cmd, filepath.Join(dir, file)}
		if strings.HasPrefix(cmd, "read") {
			args = append([]string{"-U", "-r"}, args...)
		}
		out, err := exec.CommandContext(ctx, "qemu-io", args...).CombinedOutput()
		if err != nil || strings.Contains(string(out), "fail") {
			t.Fatalf("qemu-io %s %q: %v\n%s", file, cmd, err, out)
		}
	}

	// Running: switched live, crash-consistent (the tiny guest runs no agent).
	start := time.Now()
	update(snapshots("s1"))
	got := s.waitMachine(ctx, t, key, 60*time.Second, recorded("s1"))
	t.Logf("snapshot of the running domain taken %v after the request", time.Since(start).Round(time.Millisecond))
	st := got.Status.Snapshots[0]
	if st.Consistency != banlieuev1.CrashConsistent || st.TakenAt == nil ||
		!slices.Equal(st.Layers, []infrav1.SnapshotLayer{{Disk: "os", Volume: osVol, Top: layer("uid-s1")}}) {
		t.Errorf("snapshot record %+v", st)
	}
	if !slices.Contains(got.Status.Volumes, layer("uid-s1")) {
		t.Errorf("status.volumes %v does not record the layer", got.Status.Volumes)
	}
	if c := chain(0); len(c) < 2 || !slices.Equal(c[:2], []string{layer("uid-s1"), osVol}) {
		t.Errorf("vda's live chain %v, want the layer over the disk", c)
	}
	// The persistent definition names the top alone; the backing chain is in the files.
	persistentTop("the running domain's persistent top: s1's layer", layer("uid-s1"))

	// Stopped: written, then switched by the definition.
	power(banlieuev1.PoweredOff, off)
	qemuIO(layer("uid-s1"), "write -P 0xa1 0 64k")
	update(snapshots("s1", "s2"))
	s.waitMachine(ctx, t, key, 60*time.Second, recorded("s1", "s2"))
	persistentTop("the stopped domain's top: s2's layer", layer("uid-s2"))
	qemuIO(layer("uid-s2"), "write -P 0xb2 1M 64k")

	// The older deleted while off: an inner commit, the domain stopped again after.
	update(snapshots("s2"))
	got = s.waitMachine(ctx, t, key, 60*time.Second, recorded("s2"))
	if l := got.Status.Snapshots[0].Layers; len(l) != 1 || l[0].Volume != osVol || l[0].Top != layer("uid-s2") {
		t.Errorf("s2's layers after s1's merge %+v, want its top over the disk", l)
	}
	if state, _, err := s.host.DomainState(ctx, dom); err != nil || state != libvirt.DomainShutOff {
		t.Errorf("domain state %v (%v) after the merge, want shut off", state, err)
	}
	persistentTop("the top after s1's merge: s2's layer", layer("uid-s2"))
	if vols := s.volumes(ctx, t); strings.Contains(vols, "uid-s1") {
		t.Errorf("s1's merged layer left in the pool: %s", vols)
	}
	// Read through s2's layer: s1's writes are in the disk beneath it now.
	qemuIO(layer("uid-s2"), "read -P 0xa1 0 64k")
	qemuIO(layer("uid-s2"), "read -P 0xb2 1M 64k")

	// The newer deleted while running: an active commit and a pivot.
	power(banlieuev1.PoweredOn, machineReady)
	update(snapshots())
	s.waitMachine(ctx, t, key, 60*time.Second, recorded())
	if c := chain(0); c[0] != osVol {
		t.Errorf("live chain after s2's merge %v, want the disk on top", c)
	}
	power(banlieuev1.PoweredOff, off)
	qemuIO(osVol, "read -P 0xa1 0 64k")
	qemuIO(osVol, "read -P 0xb2 1M 64k")
	if vols := s.volumes(ctx, t); strings.Contains(vols, "uid-") {
		t.Errorf("merged layers left in the pool: %s", vols)
	}

	// Restored while running: what was written since the snapshot is gone, what was before
	// stays, and the domain runs again.
	update(snapshots("s3"))
	s.waitMachine(ctx, t, key, 60*time.Second, recorded("s3"))
	qemuIO(layer("uid-s3"), "write -P 0xc3 2M 64k")
	power(banlieuev1.PoweredOn, machineReady)
	update(func(m *infrav1.LibvirtMachine) {
		m.Spec.Restore = &infrav1.LibvirtMachineRestore{RestoreName: "r1", SnapshotName: "s3"}
	})
	s.waitMachine(ctx, t, key, 60*time.Second, func(m *infrav1.LibvirtMachine) bool {
		return m.Status.Restore != nil && m.Status.Restore.Phase == infrav1.MachineRestoreSucceeded && machineReady(m)
	})
	power(banlieuev1.PoweredOff, off)
	qemuIO(layer("uid-s3"), "read -P 0 2M 64k")
	qemuIO(layer("uid-s3"), "read -P 0xa1 0 64k")

	// Deleted with a snapshot: nothing of the machine stays.
	deleted = true
	s.deleteAndWait(ctx, t, m)
	for _, v := range labhost.VolumeNames(ctx, t, s.host, s.pool) {
		if strings.HasPrefix(v, m.Spec.DomainName) {
			t.Errorf("volume %s left after the machine's deletion", v)
		}
	}
}

// testSnapshotResumed: a provider that died after the live switch and before it recorded the
// snapshot as taken (the record says Recorded, the running domain is on the new layer already)
// converges to the snapshot taken, without switching the disk a second time and without
// deleting the layer the domain writes to; withdrawn, the snapshot's empty top is merged.
func (s *machineSuite) testSnapshotResumed(ctx context.Context, t *testing.T) {
	m := s.machine(testNamespace, "snapcrash")
	s.env.Create(ctx, t, m)
	t.Cleanup(func() { s.deleteAndWait(context.Background(), t, m) })
	key := client.ObjectKeyFromObject(m)
	s.waitMachine(ctx, t, key, 60*time.Second, machineReady)
	osVol := diskVolume(m.Spec.DomainName, "os")
	top := layerVolume(osVol, "uid-c1")

	// What the dead pass did on the host: the layer made, the disk switched onto it.
	pool, err := s.host.StoragePoolLookupByName(ctx, s.pool)
	if err != nil {
		t.Fatal(err)
	}
	below, err := s.host.StorageVolLookupByName(ctx, pool, osVol)
	if err != nil {
		t.Fatal(err)
	}
	xml, err := renderVolume(volumeSpec{name: top, capacity: 1 << 30, format: formatQCOW2, backingPath: below.Key, backingFormat: formatQCOW2})
	if err != nil {
		t.Fatal(err)
	}
	vol, err := s.host.StorageVolCreateXML(ctx, pool, xml, 0)
	if err != nil {
		t.Fatal(err)
	}
	dom, err := s.host.DomainLookupByName(ctx, m.Spec.DomainName)
	if err != nil {
		t.Fatal(err)
	}
	snapXML, err := libvirt.DiskOnlySnapshotXML("c1", []libvirt.SnapshotDisk{{Target: "vda", File: vol.Key}, {Target: "sda", Skip: true}})
	if err != nil {
		t.Fatal(err)
	}
	flags := libvirt.SnapshotDiskOnly | libvirt.SnapshotAtomic | libvirt.SnapshotNoMetadata | libvirt.SnapshotReuseExt
	if _, err := s.host.DomainSnapshotCreateXML(ctx, dom, snapXML, flags); err != nil {
		t.Fatal(err)
	}
	// What it recorded before, as the provider writes it: the layer, then the request it served.
	var cur infrav1.LibvirtMachine
	if err := s.env.Client.Get(ctx, key, &cur); err != nil {
		t.Fatal(err)
	}
	st := *cur.Status.DeepCopy()
	st.Volumes = append(st.Volumes, top)
	st.Snapshots = []infrav1.LibvirtMachineSnapshotStatus{{Name: "c1", Phase: infrav1.SnapshotRecorded,
		Layers: []infrav1.SnapshotLayer{{Disk: "os", Volume: osVol, Top: top}}}}
	if err := ssa.ApplyStatus(ctx, s.env.Client, &cur, &st, banlieuev1.FieldManagerProviderLibvirt); err != nil {
		t.Fatal(err)
	}
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var cur infrav1.LibvirtMachine
		if err := s.env.Client.Get(ctx, key, &cur); err != nil {
			return err
		}
		cur.Spec.Snapshots = []infrav1.LibvirtMachineSnapshot{{Name: "c1", UID: "uid-c1"}}
		return s.env.Client.Update(ctx, &cur)
	}); err != nil {
		t.Fatal(err)
	}
	got := s.waitMachine(ctx, t, key, 60*time.Second, func(m *infrav1.LibvirtMachine) bool {
		return len(m.Status.Snapshots) == 1 && m.Status.Snapshots[0].Phase == infrav1.SnapshotTaken && machineReady(m)
	})
	if !slices.Contains(got.Status.Volumes, top) {
		t.Errorf("status.volumes %v lost the layer", got.Status.Volumes)
	}
	// The live definition switched with the snapshot; the persistent one is redefined over the
	// layer later in the pass that records it Taken, so it is waited for.
	for _, flags := range []libvirt.DomainXMLFlags{0, libvirt.DomainXMLInactive} {
		testenv.Eventually(t, 30*time.Second, fmt.Sprintf("vda's chain (flags %d) with the layer once, over the disk", flags), func() error {
			xml, err := s.host.DomainXMLDesc(ctx, dom, flags)
			if err != nil {
				return err
			}
			var def libvirtxml.Domain
			if err := def.Unmarshal(xml); err != nil {
				return err
			}
			ch := diskChains(&def)[0]
			return testenv.Unmet(filepath.Base(ch.files[0]) == top && (flags != 0 || len(ch.files) >= 2 && filepath.Base(ch.files[1]) == osVol),
				fmt.Sprintf("chain %v", ch.files))
		})
	}
	if _, err := s.host.StorageVolLookupByName(ctx, pool, top); err != nil {
		t.Errorf("the layer the domain writes to: %v", err)
	}

	// Withdrawn, its layer (empty: the tiny guest writes nothing) is merged by an active commit.
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var cur infrav1.LibvirtMachine
		if err := s.env.Client.Get(ctx, key, &cur); err != nil {
			return err
		}
		cur.Spec.Snapshots = nil
		return s.env.Client.Update(ctx, &cur)
	}); err != nil {
		t.Fatal(err)
	}
	s.waitMachine(ctx, t, key, 60*time.Second, func(m *infrav1.LibvirtMachine) bool {
		return len(m.Status.Snapshots) == 0 && machineReady(m)
	})
	xml, err = s.host.DomainXMLDesc(ctx, dom, 0)
	if err != nil {
		t.Fatal(err)
	}
	var def libvirtxml.Domain
	if err := def.Unmarshal(xml); err != nil {
		t.Fatal(err)
	}
	if ch := diskChains(&def)[0]; filepath.Base(ch.files[0]) != osVol {
		t.Errorf("vda's live chain after the merge %v, want the disk on top", ch.files)
	}
	if _, err := s.host.StorageVolLookupByName(ctx, pool, top); !libvirt.IsNotFound(err) {
		t.Errorf("the merged layer: %v, want it deleted", err)
	}
}
