package libvirt

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"libvirt.org/go/libvirtxml"

	infrav1 "banlieue.io/banlieue/api/infrastructure/v1alpha1"
	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
	"banlieue.io/banlieue/internal/testenv/labhost"
	"banlieue.io/banlieue/pkg/libvirt"
)

// moveLab is the two hosts of hack/migration-lab.sh, with the lab script that runs commands in
// a host's mount namespace.
type moveLab struct {
	labhost.MigrationLab
	script string
}

func needMoveLab(t *testing.T) moveLab {
	t.Helper()
	return moveLab{MigrationLab: labhost.NeedMigrationLab(t), script: filepath.Join("..", "..", "..", "hack", "migration-lab.sh")}
}

// exec runs a command in host's mount namespace, where its pool paths are what its libvirtd sees.
func (l moveLab) exec(t *testing.T, host string, args ...string) string {
	t.Helper()
	out, err := exec.Command(l.script, append([]string{"exec", host, l.Dir}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("host %s: %v: %v\n%s", host, args, err, out)
	}
	return string(out)
}

type labHost struct {
	name string
	end  moveEnd
	uri  string
}

// labPool creates a transient dir pool of its own on host h, removed with everything in it.
func (l moveLab) labPool(ctx context.Context, t *testing.T, h, uri, pool string) labHost {
	t.Helper()
	c, p, dir := l.Pool(ctx, t, h, uri, pool)
	return labHost{name: h, end: moveEnd{c: c, pool: p, poolPath: dir}, uri: uri}
}

func poolVolumes(ctx context.Context, t *testing.T, h labHost) []string {
	t.Helper()
	vols, err := h.end.c.StoragePoolListAllVolumes(ctx, h.end.pool)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, v := range vols {
		names = append(names, v.Name)
	}
	slices.Sort(names)
	return names
}

const (
	moveDiskSize = 64 << 20
	moveBase     = "base-0123abcd.qcow2"
)

// movingMachine is a running domain on host a of the lab, made as the provider makes a
// machine, with host b's pool ready to receive it.
type movingMachine struct {
	l           moveLab
	a, b        labHost
	dom         libvirt.Domain
	plan        movePlan
	machineVols []string
	seedBytes   []byte
	owner       func(provider string) Owner
}

// startMovingMachine defines and starts the machine on a. Its OS disk is an overlay over a
// content-addressed base present on both hosts; the overlay holds 1 MiB of 0xcd at 2 MiB and
// the data disk 40 MiB of 0xee, written before it starts, so that a capped copy lasts long
// enough to be aborted or interrupted.
func startMovingMachine(ctx context.Context, t *testing.T) *movingMachine {
	t.Helper()
	l := needMoveLab(t)
	var suffix [4]byte
	_, _ = rand.Read(suffix[:])
	name := "move-" + hex.EncodeToString(suffix[:])
	a := l.labPool(ctx, t, "a", l.A, name+"-a")
	b := l.labPool(ctx, t, "b", l.B, name+"-b")
	base := filepath.Join(t.TempDir(), moveBase)
	run := func(args ...string) {
		if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
			t.Fatalf("%v: %v\n%s", args, err, out)
		}
	}
	run("qemu-img", "create", "-q", "-f", "qcow2", base, fmt.Sprint(moveDiskSize))
	run("qemu-io", "-f", "qcow2", "-c", fmt.Sprintf("write -P 0x42 0 %d", moveDiskSize), base)
	for _, h := range []labHost{a, b} {
		run("cp", base, l.HostPath(h.name, h.end.poolPath+"/"+moveBase))
		if err := h.end.c.StoragePoolRefresh(ctx, h.end.pool); err != nil {
			t.Fatal(err)
		}
	}

	// The machine as the provider makes it: volumes named after the domain, the OS disk an
	// overlay over the base, the seed an ISO volume.
	domName := name
	osDisk, dataDisk, seed := diskVolume(domName, "os"), diskVolume(domName, "data"), seedVolume(domName)
	for _, v := range []volumeSpec{
		{name: osDisk, capacity: moveDiskSize, format: formatQCOW2, backingPath: a.end.poolPath + "/" + moveBase, backingFormat: formatQCOW2},
		{name: dataDisk, capacity: moveDiskSize, format: formatQCOW2},
	} {
		xml, err := renderVolume(v)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := a.end.c.StorageVolCreateXML(ctx, a.end.pool, xml, 0); err != nil {
			t.Fatal(err)
		}
	}
	seedBytes := make([]byte, 64<<10)
	_, _ = rand.Read(seedBytes)
	xml, _ := renderVolume(volumeSpec{name: seed, capacity: uint64(len(seedBytes)), format: formatRaw})
	sv, err := a.end.c.StorageVolCreateXML(ctx, a.end.pool, xml, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.end.c.StorageVolUpload(ctx, sv, bytes.NewReader(seedBytes), int64(len(seedBytes)), nil); err != nil {
		t.Fatal(err)
	}
	l.exec(t, "a", "qemu-io", "-f", "qcow2", "-c", "write -P 0xcd 2M 1M", a.end.poolPath+"/"+osDisk)
	l.exec(t, "a", "qemu-io", "-f", "qcow2", "-c", "write -P 0xee 0 40M", a.end.poolPath+"/"+dataDisk)

	owner := func(provider string) Owner {
		return Owner{UID: "uid-" + name, Namespace: "ns", Name: "web", Provider: provider}
	}
	spec := &infrav1.LibvirtMachineSpec{DomainName: domName, VCPUs: 1, MemoryMiB: 256, Pool: a.end.poolPath, MachineType: "q35",
		Firmware: banlieuev1.FirmwareEFI, TPMEnabled: true, ConsoleLog: banlieuev1.ConsoleLogNone,
		BootSource: infrav1.BootSource{Kind: infrav1.BootBackingVolume, Volume: moveBase},
		Disks:      []infrav1.LibvirtDisk{{Name: "os"}, {Name: "data"}}}
	def, err := renderDomain(domainInputs{spec: spec, owner: owner("lab-a"), domainType: "qemu", uuid: uuid.NewString(),
		diskPaths: []string{a.end.poolPath + "/" + osDisk, a.end.poolPath + "/" + dataDisk}, seed: a.end.poolPath + "/" + seed})
	if err != nil {
		t.Fatal(err)
	}
	dom, err := a.end.c.DomainDefineXML(ctx, def, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range []labHost{a, b} {
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			if d, err := h.end.c.DomainLookupByName(ctx, domName); err == nil {
				_ = h.end.c.DomainDestroy(ctx, d)
				_ = h.end.c.DomainUndefine(ctx, d, libvirt.UndefineNVRAM|libvirt.UndefineTPM)
			}
		})
	}
	// OVMF and swtpm under software emulation: on a loaded machine the start has taken more
	// than the client's 30 s, and how fast QEMU starts is no promise of the move's.
	if dom, err = a.end.c.DomainCreate(libvirt.WithCallTimeout(ctx, 3*time.Minute), dom, 0); err != nil {
		t.Fatal(err)
	}
	plan := movePlan{Domain: domName, Disks: []string{osDisk, dataDisk}, Seed: seed, MaxDowntime: 500 * time.Millisecond}
	machineVols := []string{moveBase, seed, dataDisk, osDisk}
	slices.Sort(machineVols)
	return &movingMachine{l: l, a: a, b: b, dom: dom, plan: plan, machineVols: machineVols, seedBytes: seedBytes, owner: owner}
}

// TestLiveMoveBetweenHosts moves a running EFI + vTPM domain, defined as the provider renders
// it (an overlay over a content-addressed base, a data disk, the seed), from host a to b and
// back with moveDomain: each time the domain runs on the destination alone under its UUID, its
// ownership record names the target Provider, what was written in its disks before is read
// there, the seed is the same bytes, downtime and total time are measured, and the source keeps
// nothing (no definition, volume, NVRAM or swtpm state). Then a move to a pool without the base
// is refused (BaseImageMissing) and a move is aborted midway (Aborted): each time the domain
// runs on a alone and the target keeps nothing.
func TestLiveMoveBetweenHosts(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	m := startMovingMachine(ctx, t)
	l, a, b, dom, plan, machineVols, seedBytes, owner := m.l, m.a, m.b, m.dom, m.plan, m.machineVols, m.seedBytes, m.owner
	osDisk, dataDisk, seed, name := plan.Disks[0], plan.Disks[1], plan.Seed, plan.Domain
	for _, step := range []struct {
		from, to labHost
		provider string
	}{{a, b, "lab-b"}, {b, a, "lab-a"}} {
		plan.Owner = owner(step.provider)
		began := time.Now()
		res, err := moveDomain(ctx, step.from.end, moveTarget{moveEnd: step.to.end, uri: step.to.uri, address: "127.0.0.1"}, dom, plan, nil)
		if err != nil {
			t.Fatalf("%s→%s: %v", step.from.name, step.to.name, err)
		}
		t.Logf("%s→%s: %v in all, job %v, downtime %v", step.from.name, step.to.name, time.Since(began).Round(time.Millisecond), res.Total, res.Downtime)
		if res.Domain.UUID != dom.UUID || res.Total <= 0 || res.Downtime <= 0 {
			t.Errorf("%s→%s: moved domain %s, total %v, downtime %v; want UUID %s and both measured",
				step.from.name, step.to.name, res.Domain.UUID, res.Total, res.Downtime, dom.UUID)
		}
		dom = res.Domain
		checkMoved(ctx, t, l, step.from, step.to, dom, step.provider)
		if got := poolVolumes(ctx, t, step.to); !slices.Equal(got, machineVols) {
			t.Errorf("%s: pool holds %v, want %v", step.to.name, got, machineVols)
		}
		if got := poolVolumes(ctx, t, step.from); !slices.Equal(got, []string{moveBase}) {
			t.Errorf("%s (source): pool holds %v, want the base alone", step.from.name, got)
		}
		if out := l.exec(t, step.to.name, "qemu-io", "-r", "-U", "-f", "qcow2", "-c", "read -P 0xcd 2M 1M", "-c", "read -P 0x42 4M 1M",
			step.to.end.poolPath+"/"+osDisk); strings.Contains(out, "failed") {
			t.Errorf("%s: the overlay does not read what was written before the move:\n%s", step.to.name, out)
		}
		sv, err := step.to.end.c.StorageVolLookupByName(ctx, step.to.end.pool, seed)
		if err != nil {
			t.Fatal(err)
		}
		var got bytes.Buffer
		if _, err := step.to.end.c.StorageVolDownload(ctx, sv, &got, nil); err != nil || !bytes.Equal(got.Bytes(), seedBytes) {
			t.Errorf("%s: the seed differs from the source's (%v)", step.to.name, err)
		}
	}

	// Refused: a target pool without the base. Nothing is created there, the domain runs on a.
	nobase := l.labPool(ctx, t, "b", l.B, name+"-nobase")
	plan.Owner = owner("lab-b")
	_, err := moveDomain(ctx, a.end, moveTarget{moveEnd: nobase.end, uri: l.B, address: "127.0.0.1"}, dom, plan, nil)
	var me *moveError
	if !errors.As(err, &me) || me.Step != stepPrepareTarget || me.Reason != reasonBaseImageMissing || !strings.Contains(err.Error(), moveBase) {
		t.Fatalf("a move to a pool without the base: %v, want %s at %s naming %s", err, reasonBaseImageMissing, stepPrepareTarget, moveBase)
	}
	if got := poolVolumes(ctx, t, nobase); len(got) != 0 {
		t.Errorf("the refused target's pool holds %v", got)
	}
	checkRunsOnly(ctx, t, a, b, dom)

	// Aborted midway: the copy capped at 1 MiB/s, aborted once it has copied something.
	plan.Bandwidth = 1
	abort := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		_, err := moveDomain(ctx, a.end, moveTarget{moveEnd: b.end, uri: l.B, address: "127.0.0.1"}, dom, plan, abort)
		done <- err
	}()
	for {
		select {
		case err := <-done:
			t.Fatalf("the capped move ended before it could be aborted: %v", err)
		case <-time.After(100 * time.Millisecond):
		}
		st, err := a.end.c.DomainGetJobStats(ctx, dom, 0)
		if err != nil {
			t.Fatal(err)
		}
		if (st.Type == libvirt.JobBounded || st.Type == libvirt.JobUnbounded) && st.DataProcessed > 0 {
			break
		}
	}
	close(abort)
	err = <-done
	if !errors.As(err, &me) || me.Step != stepMigrate || me.Reason != reasonMoveAborted {
		t.Fatalf("the aborted move: %v, want %s at %s", err, reasonMoveAborted, stepMigrate)
	}
	checkRunsOnly(ctx, t, a, b, dom)
	if got := poolVolumes(ctx, t, b); !slices.Equal(got, []string{moveBase}) {
		t.Errorf("b after the aborted move: pool holds %v, want the base alone", got)
	}
	// libvirt ends the incoming domain on b but keeps the NVRAM it made for it: moveDomain removes it.
	for _, p := range []string{"/var/lib/libvirt/qemu/nvram/" + dom.Name + "_VARS.fd", "/var/lib/libvirt/swtpm/" + dom.UUID.String()} {
		if _, err := os.Stat(l.HostPath("b", p)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("b after the aborted move keeps %s (%v)", p, err)
		}
	}
	if out := l.exec(t, "a", "qemu-io", "-r", "-U", "-f", "qcow2", "-c", "read -P 0xee 0 40M", a.end.poolPath+"/"+dataDisk); strings.Contains(out, "failed") {
		t.Errorf("a's data disk after the aborted move:\n%s", out)
	}
}

// checkMoved checks dom runs on to, migrated there, its record naming provider, with its NVRAM
// and swtpm state, and that from has no domain, NVRAM or swtpm state of it.
func checkMoved(ctx context.Context, t *testing.T, l moveLab, from, to labHost, dom libvirt.Domain, provider string) {
	t.Helper()
	checkRunsOnly(ctx, t, to, from, dom)
	xml, err := to.end.c.DomainXMLDesc(ctx, dom, libvirt.DomainXMLInactive)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(xml, from.end.poolPath) {
		t.Errorf("%s: the persistent definition names the source's pool:\n%s", to.name, xml)
	}
	var def libvirtxml.Domain
	if err := def.Unmarshal(xml); err != nil {
		t.Fatal(err)
	}
	if got, ok := DomainOwner(&def); !ok || got.Provider != provider {
		t.Errorf("%s: ownership record %+v (%v), want Provider %s", to.name, got, ok, provider)
	}
	nvram := func(h labHost) string { return l.HostPath(h.name, "/var/lib/libvirt/qemu/nvram/"+dom.Name+"_VARS.fd") }
	swtpm := func(h labHost) string { return l.HostPath(h.name, "/var/lib/libvirt/swtpm/"+dom.UUID.String()) }
	for _, p := range []string{nvram(to), swtpm(to)} {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("%s: %v", to.name, err)
		}
	}
	for _, p := range []string{nvram(from), swtpm(from)} {
		if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s (source) keeps %s (%v)", from.name, p, err)
		}
	}
}

// checkRunsOnly checks dom runs on h and other has no domain of its name, running or defined.
func checkRunsOnly(ctx context.Context, t *testing.T, h, other labHost, dom libvirt.Domain) {
	t.Helper()
	d, err := h.end.c.DomainLookupByName(ctx, dom.Name)
	if err != nil {
		t.Fatalf("host %s: %v", h.name, err)
	}
	if state, _, err := h.end.c.DomainState(ctx, d); err != nil || state != libvirt.DomainRunning {
		t.Fatalf("host %s: domain %s (%v), want running", h.name, state, err)
	}
	if _, err := other.end.c.DomainLookupByName(ctx, dom.Name); !libvirt.IsNotFound(err) {
		t.Fatalf("host %s still has domain %s (%v)", other.name, dom.Name, err)
	}
}

// moveChildEnv carries, to the child process of TestLiveMoveConvergesAfterProviderKilled, the
// move it runs until it is killed: "poolA poolB domain disk,disk seed bandwidth".
const moveChildEnv = "BANLIEUE_TEST_MOVE_CHILD"

// TestLiveMoveConvergesAfterProviderKilled kills the process running a move (SIGKILL) while the
// source's libvirtd copies, and converges with convergeMove as a restarted provider would: once
// with the copy left to finish (peer-to-peer, it does, without its client), once aborted by the
// restarted provider (a cancel or timeout found on restart). Each time the domain then runs on
// exactly one host, the expected one, and the other keeps nothing of it (no definition,
// volume, NVRAM or swtpm state).
func TestLiveMoveConvergesAfterProviderKilled(t *testing.T) {
	if args := strings.Fields(os.Getenv(moveChildEnv)); len(args) == 6 {
		moveChild(t, args)
		return
	}
	for _, tc := range []struct {
		name      string
		bandwidth int
		abort     bool
		want      moveOutcome
	}{
		{"the copy finishes without its client", 4, false, moveDone},
		{"the restarted provider aborts the copy", 1, true, moveStayed},
	} {
		t.Run(tc.name, func(t *testing.T) { killMidCopy(t, tc.bandwidth, tc.abort, tc.want) })
	}
}

func killMidCopy(t *testing.T, bandwidth int, abort bool, want moveOutcome) {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	m := startMovingMachine(ctx, t)
	a, b := m.a, m.b
	child := exec.Command(os.Args[0], "-test.run=^TestLiveMoveConvergesAfterProviderKilled$", "-test.v")
	child.Env = append(os.Environ(), fmt.Sprintf("%s=%s %s %s %s %s %d", moveChildEnv, filepath.Base(a.end.poolPath), filepath.Base(b.end.poolPath),
		m.dom.Name, strings.Join(m.plan.Disks, ","), m.plan.Seed, bandwidth))
	var out bytes.Buffer
	child.Stdout, child.Stderr = &out, &out
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- child.Wait() }()
	for deadline := time.Now().Add(3 * time.Minute); ; {
		select {
		case err := <-exited:
			t.Fatalf("the child ended before it was killed: %v\n%s", err, out.String())
		case <-time.After(100 * time.Millisecond):
		}
		if st, err := a.end.c.DomainGetJobStats(ctx, m.dom, 0); err == nil && (st.Type == libvirt.JobBounded || st.Type == libvirt.JobUnbounded) && st.DataProcessed > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no migration job on a after 3 minutes:\n%s", out.String())
		}
	}
	if err := child.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := <-exited; err == nil {
		t.Fatal("the killed child exited 0")
	}
	if abort {
		if err := a.end.c.DomainAbortJob(ctx, m.dom); err != nil {
			t.Fatalf("aborting the orphaned copy: %v", err)
		}
	}

	// A restarted provider finds the hosts as they are: converged once no job runs.
	created := append(slices.Clone(m.plan.Disks), m.plan.Seed)
	plan := m.plan
	plan.Owner = m.owner("lab-b")
	var outcome moveOutcome
	testDeadline := time.Now().Add(5 * time.Minute)
	for {
		var err error
		outcome, err = convergeMove(ctx, a.end, moveTarget{moveEnd: b.end, uri: m.l.B, address: "127.0.0.1"}, m.dom, plan, created)
		if err == nil && outcome != moveUnderWay {
			break
		}
		if time.Now().After(testDeadline) {
			t.Fatalf("not converged after 5 minutes: outcome %v, %v", outcome, err)
		}
		time.Sleep(time.Second)
	}
	if outcome != want {
		t.Fatalf("outcome %v, want %v", outcome, want)
	}
	runs, other := a, b
	if outcome == moveDone {
		runs, other = b, a
	}
	checkRunsOnly(ctx, t, runs, other, m.dom)
	if got := poolVolumes(ctx, t, runs); !slices.Equal(got, m.machineVols) {
		t.Errorf("%s: pool holds %v, want %v", runs.name, got, m.machineVols)
	}
	if got := poolVolumes(ctx, t, other); !slices.Equal(got, []string{moveBase}) {
		t.Errorf("%s: pool holds %v, want the base alone", other.name, got)
	}
	for _, p := range []string{"/var/lib/libvirt/qemu/nvram/" + m.dom.Name + "_VARS.fd", "/var/lib/libvirt/swtpm/" + m.dom.UUID.String()} {
		if _, err := os.Stat(m.l.HostPath(other.name, p)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s keeps %s (%v)", other.name, p, err)
		}
	}
	if out := m.l.exec(t, runs.name, "qemu-io", "-r", "-U", "-f", "qcow2", "-c", "read -P 0xcd 2M 1M", runs.end.poolPath+"/"+m.plan.Disks[0]); strings.Contains(out, "failed") {
		t.Errorf("%s: the overlay does not read what was written before:\n%s", runs.name, out)
	}
}

// moveChild is the provider killed mid-move: TestLiveMoveConvergesAfterProviderKilled run
// again as a child process, with moveChildEnv, which its parent kills while it copies.
func moveChild(t *testing.T, args []string) {
	l := needMoveLab(t)
	ctx := context.Background()
	end := func(uri, pool string) moveEnd {
		c := l.Dial(t, uri)
		p, err := c.StoragePoolLookupByName(ctx, pool)
		if err != nil {
			t.Fatal(err)
		}
		return moveEnd{c: c, pool: p, poolPath: "/var/lib/libvirt/images/" + pool}
	}
	a, b := end(l.A, args[0]), end(l.B, args[1])
	dom, err := a.c.DomainLookupByName(ctx, args[2])
	if err != nil {
		t.Fatal(err)
	}
	bandwidth, err := strconv.ParseUint(args[5], 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	plan := movePlan{Domain: args[2], Disks: strings.Split(args[3], ","), Seed: args[4], Bandwidth: bandwidth,
		Owner: Owner{UID: "uid-" + args[2], Namespace: "ns", Name: "web", Provider: "lab-b"}}
	_, err = moveDomain(ctx, a, moveTarget{moveEnd: b, uri: l.B, address: "127.0.0.1"}, dom, plan, nil)
	t.Fatalf("the move returned before the child was killed: %v", err)
}
