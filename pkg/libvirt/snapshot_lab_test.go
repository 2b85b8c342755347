package libvirt

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"
)

// TestSnapshotCommitAndRestore runs the life of a snapshot on host a of the migration lab: a
// running domain with no OS (SeaBIOS finds nothing to boot) over a qcow2 overlay on a base, its
// disk written through QEMU's own qemu-io as a guest would.
//
//   - The freeze, and a QUIESCE snapshot, of a guest whose agent channel nobody answers fail
//     with ErrGuestAgentUnavailable, and the quiesced snapshot switches no layer.
//   - An external disk-only snapshot puts a new empty top layer (made beforehand in the pool,
//     REUSE_EXT) over the overlay while the domain runs; no suspend event is seen.
//   - Restore: with a second pattern written after the snapshot, the domain is stopped, the
//     layer written after the snapshot deleted, a new empty top made over the snapshot's layer
//     and the domain redefined over it and started: the first pattern is there, the second is
//     not, and the snapshot's layer is unchanged, so it can be restored again.
//   - Delete: a second snapshot, a third pattern, then an active block commit of the top layer
//     into its backing (shallow), first cancelled once ready (nothing changes), then started
//     again from a connection that closes at once and pivoted from another: the chain is one
//     layer shorter, the third pattern in it, and once the merged layer's volume is deleted
//     the pool holds nothing else.
func TestSnapshotCommitAndRestore(t *testing.T) {
	l := needMigrationLab(t)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	a, dom := startSnapshotDomain(ctx, t, l, 0)
	name, pool := dom.Name, a.pool
	var err error
	const (
		patternA, offA, nA = 0xa1, 1 << 20, 1 << 20 // before the snapshot
		patternB, offB, nB = 0xb2, 1 << 20, 512 << 10
		patternC, offC, nC = 0xc3, 8 << 20, 1 << 20 // before the commit
	)
	writeGuestDisk(ctx, t, a, dom, patternA, offA, nA)

	// The guest has an agent channel and no agent behind it.
	began := time.Now()
	_, err = a.c.DomainFSFreeze(ctx, dom, nil)
	var agent *AgentError
	if !errors.Is(err, ErrGuestAgentUnavailable) || !errors.As(err, &agent) {
		t.Fatalf("freeze without an agent: %v, want ErrGuestAgentUnavailable", err)
	}
	t.Logf("freeze refused in %v: code %d, %q", time.Since(began).Round(time.Millisecond), agent.Err.Code, agent.Err.Message)
	s1 := a.dir + "/s1.qcow2"
	createLayer(ctx, t, a, "s1.qcow2", a.dir+"/overlay.qcow2")
	xml1, err := DiskOnlySnapshotXML("s1", []SnapshotDisk{{Target: "vda", File: s1}})
	if err != nil {
		t.Fatal(err)
	}
	const flags = SnapshotDiskOnly | SnapshotAtomic | SnapshotNoMetadata | SnapshotReuseExt
	if _, err := a.c.DomainSnapshotCreateXML(ctx, dom, xml1, flags|SnapshotQuiesce); !errors.Is(err, ErrGuestAgentUnavailable) {
		t.Fatalf("quiesced snapshot without an agent: %v, want ErrGuestAgentUnavailable", err)
	}
	checkTop(ctx, t, a, dom, a.dir+"/overlay.qcow2", s1)

	// Crash-consistent snapshot of the running domain.
	took := snapshotRunning(ctx, t, a, dom, xml1, flags)
	checkTop(ctx, t, a, dom, s1, "")
	t.Logf("snapshot s1: %v", took)
	writeGuestDisk(ctx, t, a, dom, patternB, offB, nB)
	view := layerView(t, l, a, s1)
	checkPattern(t, "s1 after the second write", view, offB, nB, patternB)
	checkPattern(t, "s1 after the second write", view, offB+nB, nA-nB, patternA)
	snapLayer := layerView(t, l, a, a.dir+"/overlay.qcow2")
	checkPattern(t, "the snapshot's layer", snapLayer, offA, nA, patternA)
	snapSum := fileSum(t, l, name, "overlay.qcow2")

	// Restore to s1: stopped, the layer written since deleted, a new empty top over the
	// snapshot's layer, redefined, started.
	began = time.Now()
	if err := a.c.DomainDestroy(ctx, dom); err != nil {
		t.Fatal(err)
	}
	destroyed := time.Since(began)
	inactive, err := a.c.DomainXMLDesc(ctx, dom, DomainXMLInactive)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(inactive, s1) {
		t.Fatalf("the persistent definition does not name the snapshot's top layer %s:\n%s", s1, inactive)
	}
	deleteVolume(ctx, t, a, "s1.qcow2")
	r1 := a.dir + "/r1.qcow2"
	createLayer(ctx, t, a, "r1.qcow2", a.dir+"/overlay.qcow2")
	// banlieue renders a domain's XML from the machine: the same name and UUID, over the new top.
	if dom, err = a.c.DomainDefineXML(ctx, snapshotDomainXML(name, dom.UUID, r1), 0); err != nil {
		t.Fatal(err)
	}
	startBegan := time.Now()
	if dom, err = a.c.DomainCreate(ctx, dom, 0); err != nil {
		t.Fatal(err)
	}
	t.Logf("restore to s1: %v (destroy %v, start %v)", time.Since(began).Round(time.Millisecond),
		destroyed.Round(time.Millisecond), time.Since(startBegan).Round(time.Millisecond))
	checkTop(ctx, t, a, dom, r1, s1)
	view = layerView(t, l, a, r1)
	checkPattern(t, "restored", view, offA, nA, patternA)
	checkPattern(t, "restored", view, 0, offA, migBaseByte)
	if got := fileSum(t, l, name, "overlay.qcow2"); got != snapSum {
		t.Error("the snapshot's layer changed when the restored domain started")
	}

	// Delete a snapshot: s2 over r1, a third pattern, r1 merged with s2 by an active commit.
	s2 := a.dir + "/s2.qcow2"
	createLayer(ctx, t, a, "s2.qcow2", r1)
	xml2, err := DiskOnlySnapshotXML("s2", []SnapshotDisk{{Target: "vda", File: s2}})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("snapshot s2: %v", snapshotRunning(ctx, t, a, dom, xml2, flags))
	writeGuestDisk(ctx, t, a, dom, patternC, offC, nC)
	// A commit cancelled once ready (a deletion that timed out, or a provider that gave up)
	// leaves the disk on its top layer and the guest's view whole: it can simply start again.
	if err := a.c.DomainBlockCommit(ctx, dom, "vda", "", "", 0, BlockCommitActive|BlockCommitShallow); err != nil {
		t.Fatalf("block commit: %v", err)
	}
	waitBlockJobReady(ctx, t, a, dom)
	if err := a.c.DomainBlockJobAbort(ctx, dom, "vda", 0); err != nil {
		t.Fatalf("cancelling the commit: %v", err)
	}
	if info, err := a.c.DomainGetBlockJobInfo(ctx, dom, "vda"); err != nil || info.Found {
		t.Fatalf("after the cancel: job %+v %v, want none", info, err)
	}
	checkTop(ctx, t, a, dom, s2, "")
	view = layerView(t, l, a, s2)
	checkPattern(t, "after the cancelled commit", view, offC, nC, patternC)
	checkPattern(t, "after the cancelled commit", view, offA, nA, patternA)
	// Started again from a connection that then closes, as by a provider killed mid-deletion:
	// the job belongs to the domain, and the next connection finds it and pivots it.
	began = time.Now()
	gone := l.dial(t, l.a)
	if err := gone.DomainBlockCommit(ctx, dom, "vda", "", "", 0, BlockCommitActive|BlockCommitShallow); err != nil {
		t.Fatalf("block commit: %v", err)
	}
	gone.Close()
	ready := waitBlockJobReady(ctx, t, a, dom)
	readyAfter := time.Since(began)
	if ready.Type != BlockJobActiveCommit {
		t.Errorf("job type %d, want active commit (4)", ready.Type)
	}
	pivotBegan := time.Now()
	if err := a.c.DomainBlockJobAbort(ctx, dom, "vda", BlockJobAbortPivot); err != nil {
		t.Fatalf("pivot: %v", err)
	}
	t.Logf("delete s2: commit ready after %v (%d/%d), pivot %v", readyAfter.Round(time.Millisecond), ready.Cur, ready.End, time.Since(pivotBegan).Round(time.Millisecond))
	if info, err := a.c.DomainGetBlockJobInfo(ctx, dom, "vda"); err != nil || info.Found {
		t.Fatalf("after the pivot: job %+v %v, want none", info, err)
	}
	checkTop(ctx, t, a, dom, r1, s2)
	deleteVolume(ctx, t, a, "s2.qcow2")
	view = layerView(t, l, a, r1)
	checkPattern(t, "after the commit", view, offC, nC, patternC)
	checkPattern(t, "after the commit", view, offA, nA, patternA)
	if state, _, err := a.c.DomainState(ctx, dom); err != nil || state != DomainRunning {
		t.Fatalf("after the commit: %s %v, want running", state, err)
	}
	vols, err := a.c.StoragePoolListAllVolumes(ctx, pool)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, v := range vols {
		names = append(names, v.Name)
	}
	sort.Strings(names)
	if strings.Join(names, " ") != "base.qcow2 overlay.qcow2 r1.qcow2" {
		t.Fatalf("the pool holds %v, want base.qcow2 overlay.qcow2 r1.qcow2", names)
	}
	entries, err := os.ReadDir(filepath.Join(l.dir, "host-a", "state", "lib", "images", name))
	if err != nil || len(entries) != 3 {
		t.Fatalf("the pool's directory holds %d files (%v), want 3", len(entries), err)
	}
}

// startSnapshotDomain makes, on host a, a pool named after a new domain holding a base image and
// the domain's overlay over it, and starts the domain over the overlay with flags (1:
// VIR_DOMAIN_START_PAUSED). The test's cleanup removes all of it.
func startSnapshotDomain(ctx context.Context, t *testing.T, l migrationLab, flags uint32) (*migrationHost, Domain) {
	t.Helper()
	name := labName("snap-")
	a := &migrationHost{name: "a", c: l.dial(t, l.a), dir: "/var/lib/libvirt/images/" + name}
	base := filepath.Join(t.TempDir(), "base.qcow2")
	run(t, "qemu-img", "create", "-q", "-f", "qcow2", base, fmt.Sprint(migDiskSize))
	run(t, "qemu-io", "-f", "qcow2", "-c", fmt.Sprintf("write -P %#x 0 %d", migBaseByte, migDiskSize), base)
	pool, err := a.c.StoragePoolCreateXML(ctx, fmt.Sprintf(`<pool type='dir'><name>%s</name><target><path>%s</path></target></pool>`, name, a.dir), 1)
	if err != nil {
		t.Fatalf("pool: %v", err)
	}
	a.pool = pool
	t.Cleanup(func() { cleanupMigrationHost(t, l, a, name) })
	run(t, "cp", base, filepath.Join(l.dir, "host-a", "state", "lib", "images", name, "base.qcow2"))
	if err := a.c.StoragePoolRefresh(ctx, pool); err != nil {
		t.Fatal(err)
	}
	createOverlay(ctx, t, a)
	dom, err := a.c.DomainDefineXML(ctx, snapshotDomainXML(name, UUID{}, a.dir+"/overlay.qcow2"), 0)
	if err != nil {
		t.Fatal(err)
	}
	if dom, err = a.c.DomainCreate(ctx, dom, flags); err != nil {
		t.Fatal(err)
	}
	return a, dom
}

// snapshotDomainXML is migrationDomainXML's domain over top, with a guest agent channel that
// nothing in the guest answers; a zero uuid lets libvirt choose one.
func snapshotDomainXML(name string, uuid UUID, top string) string {
	id := ""
	if uuid != (UUID{}) {
		id = "<uuid>" + uuid.String() + "</uuid>"
	}
	return fmt.Sprintf(`<domain type='qemu'>
  <name>%s</name>%s
  <memory unit='MiB'>64</memory>
  <vcpu>1</vcpu>
  <os><type arch='x86_64' machine='pc'>hvm</type><boot dev='hd'/></os>
  <devices>
    <emulator>/usr/bin/qemu-system-x86_64</emulator>
    <disk type='file' device='disk'>
      <driver name='qemu' type='qcow2'/>
      <source file='%s'/>
      <target dev='vda' bus='virtio'/>
    </disk>
    <channel type='unix'><target type='virtio' name='org.qemu.guest_agent.0'/></channel>
  </devices>
</domain>`, name, id, top)
}

// createLayer makes an empty qcow2 volume name in h's pool over backing: a snapshot's new top,
// made by the pool as banlieue makes volumes, before libvirt switches to it (REUSE_EXT).
func createLayer(ctx context.Context, t *testing.T, h *migrationHost, name, backing string) {
	t.Helper()
	_, err := h.c.StorageVolCreateXML(ctx, h.pool, fmt.Sprintf(`<volume type='file'><name>%s</name>`+
		`<capacity>%d</capacity><target><format type='qcow2'/></target>`+
		`<backingStore><path>%s</path><format type='qcow2'/></backingStore></volume>`, name, migDiskSize, backing), 0)
	if err != nil {
		t.Fatalf("layer %s: %v", name, err)
	}
}

func deleteVolume(ctx context.Context, t *testing.T, h *migrationHost, name string) {
	t.Helper()
	v, err := h.c.StorageVolLookupByName(ctx, h.pool, name)
	if err == nil {
		err = h.c.StorageVolDelete(ctx, v)
	}
	if err != nil {
		t.Fatalf("deleting %s: %v", name, err)
	}
}

// snapshotRunning takes the snapshot of the running dom and returns the call's time; the guest
// must not have been paused: no suspend event, and running after.
func snapshotRunning(ctx context.Context, t *testing.T, h *migrationHost, dom Domain, xml string, flags SnapshotCreateFlags) time.Duration {
	t.Helper()
	sub, err := h.c.SubscribeDomainEvents(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sub.Close(ctx) }()
	began := time.Now()
	snap, err := h.c.DomainSnapshotCreateXML(ctx, dom, xml, flags)
	took := time.Since(began)
	if err != nil {
		t.Fatalf("snapshot: %v", err)
	}
	if snap.Domain.UUID != dom.UUID {
		t.Errorf("snapshot %+v of another domain", snap)
	}
	if state, _, err := h.c.DomainState(ctx, dom); err != nil || state != DomainRunning {
		t.Fatalf("after the snapshot: %s %v, want running", state, err)
	}
	// Events are sent in order on the connection: one from the snapshot precedes the reply to
	// a later call. A second's grace covers a slow daemon.
	deadline := time.After(time.Second)
	for {
		select {
		case ev := <-sub.Events():
			if ev.Domain.Name == dom.Name && ev.ID == DomainEventIDLifecycle && ev.Type == DomainEventSuspended {
				t.Fatalf("the guest was paused by the disk-only snapshot: %s", ev)
			}
		case <-deadline:
			return took.Round(time.Millisecond)
		}
	}
}

// checkTop checks the live XML's vda has top as its source, and names not nowhere.
func checkTop(ctx context.Context, t *testing.T, h *migrationHost, dom Domain, top, not string) {
	t.Helper()
	live, err := h.c.DomainXMLDesc(ctx, dom, 0)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(live, "<source file='"+top+"'") || not != "" && strings.Contains(live, not) {
		t.Fatalf("the live XML's top layer is not %s alone (without %s):\n%s", top, not, live)
	}
}

// waitBlockJobReady polls vda's job until it has mirrored everything (2 minutes at most).
func waitBlockJobReady(ctx context.Context, t *testing.T, h *migrationHost, dom Domain) BlockJobInfo {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		info, err := h.c.DomainGetBlockJobInfo(ctx, dom, "vda")
		if err != nil {
			t.Fatal(err)
		}
		if !info.Found {
			t.Fatal("the commit job is gone before it was pivoted")
		}
		if info.Ready() {
			return info
		}
		if time.Now().After(deadline) {
			t.Fatalf("the commit job is not ready after 2 minutes: %+v", info)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// layerView is the disk as seen from layer file down its backing chain, read on h while QEMU
// may hold it (-U).
func layerView(t *testing.T, l migrationLab, h *migrationHost, file string) []byte {
	t.Helper()
	out := filepath.Join(t.TempDir(), "view.raw")
	l.exec(t, h.name, "qemu-img", "convert", "-U", "-f", "qcow2", "-O", "raw", file, out)
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) != migDiskSize {
		t.Fatalf("the view of %s has %d bytes, want %d", file, len(b), migDiskSize)
	}
	return b
}

func checkPattern(t *testing.T, what string, view []byte, off, n int, pattern byte) {
	t.Helper()
	if !bytes.Equal(view[off:off+n], bytes.Repeat([]byte{pattern}, n)) {
		t.Fatalf("%s: %d bytes at %d are not %#x (first %#x)", what, n, off, pattern, view[off])
	}
}

// fileSum is the sha256 of a file of the test's pool on host a, read from outside.
func fileSum(t *testing.T, l migrationLab, pool, name string) [32]byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(l.dir, "host-a", "state", "lib", "images", pool, name))
	if err != nil {
		t.Fatal(err)
	}
	return sha256.Sum256(b)
}

// TestSnapshotDeleteInnerLayerPaused deletes a snapshot that is not the newest, on a domain
// started paused, as a stopped VM's domain is for a commit (libvirt commits only in a running
// QEMU; no guest code runs). The chain base ← overlay ← s1 ← s2: deleting the snapshot whose
// frozen layer is overlay commits s1 into overlay, a job that ends by itself; libvirt makes s2's
// backing overlay, and once s1's volume is deleted every pattern is still in the chain.
func TestSnapshotDeleteInnerLayerPaused(t *testing.T) {
	l := needMigrationLab(t)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	a, dom := startSnapshotDomain(ctx, t, l, 1) // VIR_DOMAIN_START_PAUSED
	overlay, s1, s2 := a.dir+"/overlay.qcow2", a.dir+"/s1.qcow2", a.dir+"/s2.qcow2"
	const flags = SnapshotDiskOnly | SnapshotAtomic | SnapshotNoMetadata | SnapshotReuseExt
	writeGuestDisk(ctx, t, a, dom, 0xa1, 1<<20, 1<<20)
	for _, layer := range []struct{ name, file, backing string }{{"s1", s1, overlay}, {"s2", s2, s1}} {
		createLayer(ctx, t, a, layer.name+".qcow2", layer.backing)
		xml, err := DiskOnlySnapshotXML(layer.name, []SnapshotDisk{{Target: "vda", File: layer.file}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := a.c.DomainSnapshotCreateXML(ctx, dom, xml, flags); err != nil {
			t.Fatalf("snapshot %s of the paused domain: %v", layer.name, err)
		}
		if layer.name == "s1" {
			writeGuestDisk(ctx, t, a, dom, 0xb2, 4<<20, 1<<20)
		}
	}
	writeGuestDisk(ctx, t, a, dom, 0xc3, 8<<20, 1<<20)
	checkTop(ctx, t, a, dom, s2, "")

	began := time.Now()
	if err := a.c.DomainBlockCommit(ctx, dom, "vda", overlay, s1, 0, 0); err != nil {
		t.Fatalf("commit of s1 into overlay: %v", err)
	}
	var info BlockJobInfo
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(100 * time.Millisecond) {
		var err error
		if info, err = a.c.DomainGetBlockJobInfo(ctx, dom, "vda"); err != nil {
			t.Fatal(err)
		}
		if !info.Found {
			break
		}
		if info.Type != BlockJobCommit {
			t.Fatalf("job type %d, want commit (3)", info.Type)
		}
		if time.Now().After(deadline) {
			t.Fatalf("the commit job still runs after 2 minutes: %+v", info)
		}
	}
	t.Logf("inner commit of s1 into overlay: %v", time.Since(began).Round(time.Millisecond))
	checkTop(ctx, t, a, dom, s2, s1)
	deleteVolume(ctx, t, a, "s1.qcow2")
	view := layerView(t, l, a, s2)
	checkPattern(t, "s2 after the commit", view, 1<<20, 1<<20, 0xa1)
	checkPattern(t, "s2 after the commit", view, 4<<20, 1<<20, 0xb2)
	checkPattern(t, "s2 after the commit", view, 8<<20, 1<<20, 0xc3)
	view = layerView(t, l, a, overlay)
	checkPattern(t, "overlay after the commit", view, 4<<20, 1<<20, 0xb2)
	checkPattern(t, "overlay after the commit", view, 8<<20, 1<<20, migBaseByte)
	if state, _, err := a.c.DomainState(ctx, dom); err != nil || state != DomainPaused {
		t.Fatalf("after the commit: %s %v, want paused", state, err)
	}
}

// TestFSFreezeWithoutAgentChannel: a domain with no agent channel at all (libvirt 9.0:
// VIR_ERR_ARGUMENT_UNSUPPORTED, "QEMU guest agent is not configured") is ErrGuestAgentUnavailable
// too, for the freeze and a quiesced snapshot.
func TestFSFreezeWithoutAgentChannel(t *testing.T) {
	l := needMigrationLab(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c := l.dial(t, l.a)
	name := labName("snap-noagent-")
	dom, err := c.DomainDefineXML(ctx, fmt.Sprintf(`<domain type='qemu'><name>%s</name><memory unit='MiB'>64</memory><vcpu>1</vcpu>`+
		`<os><type arch='x86_64' machine='pc'>hvm</type></os><devices><emulator>/usr/bin/qemu-system-x86_64</emulator></devices></domain>`, name), 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_ = c.DomainDestroy(ctx, dom)
		_ = c.DomainUndefine(ctx, dom, 0)
	})
	if dom, err = c.DomainCreate(ctx, dom, 0); err != nil {
		t.Fatal(err)
	}
	_, err = c.DomainFSFreeze(ctx, dom, nil)
	var agent *AgentError
	if !errors.As(err, &agent) || agent.Err.Code != ErrArgumentUnsupported || !errors.Is(err, ErrGuestAgentUnavailable) {
		t.Fatalf("freeze without an agent channel: %v, want ErrGuestAgentUnavailable with code %d", err, ErrArgumentUnsupported)
	}
	if _, err := c.DomainFSThaw(ctx, dom, nil); !errors.Is(err, ErrGuestAgentUnavailable) {
		t.Fatalf("thaw without an agent channel: %v, want ErrGuestAgentUnavailable", err)
	}
}
