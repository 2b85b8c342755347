//go:build bench

// Command migrate compares a live move made the way banlieue's provider makes it (pkg/libvirt's
// DOMAIN_MIGRATE_PERFORM3_PARAMS, peer-to-peer over TLS, the overlay alone copied by NBD) with
// the same move made by `virsh migrate --live --p2p --tls --copy-storage-inc`, on the two
// libvirtds of hack/migration-lab.sh, in the same run.
//
//	hack/migration-lab.sh start /var/tmp/banlieue-migration && . /var/tmp/banlieue-migration/env
//	go run -tags bench ./bench/migrate [-rounds 4] [-memory 128] [-data 32]
//
// One guest without an OS (SeaBIOS idles) of -memory MiB, its qcow2 overlay holding -data MiB
// over a base present on both hosts, moves back and forth; the two tools take turns in each
// direction. For each move: the wall time of the call (or of the virsh process), and the time and
// downtime of the destination's completed job. Both ask libvirt the same: the same destination
// definitions (the pool path mapped), the same streams' address, the same default max downtime.
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"libvirt.org/go/libvirtxml"

	"banlieue.io/banlieue/bench/internal/program"
	"banlieue.io/banlieue/pkg/libvirt"
)

// moveFlags are the provider's (internal/provider/libvirt, moveFlags) but for UNDEFINE_SOURCE,
// which virsh's --undefinesource matches here: the bench leaves the source clean the same way for
// both tools.
const moveFlags = libvirt.MigrateLive | libvirt.MigratePeer2Peer | libvirt.MigratePersistDest | libvirt.MigrateUndefineSource |
	libvirt.MigrateNonSharedInc | libvirt.MigrateTLS | libvirt.MigrateAbortOnError

type host struct {
	name, uri string // uri as the other host's libvirtd dials it (its own default certificates)
	c         *libvirt.Client
	dir       string // the pool's path inside the host
	pool      libvirt.StoragePool
}

type move struct {
	tool, from, to        string
	wall, total, downtime time.Duration
}

func main() {
	lab := flag.String("lab", os.Getenv("BANLIEUE_MIGRATION_LAB"), "the migration lab's directory (hack/migration-lab.sh)")
	rounds := flag.Int("rounds", 4, "rounds; each moves the guest with each tool, the tools taking turns in each direction")
	memory := flag.Int("memory", 128, "the guest's memory in MiB")
	data := flag.Int("data", 32, "MiB written in the guest's overlay before it starts, copied by every move")
	flag.Parse()
	if *lab == "" {
		program.Fatal(fmt.Errorf("no lab: pass -lab or source the migration lab's env"))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	b, err := setUp(ctx, *lab, *memory, *data)
	if err != nil && b != nil {
		b.cleanUp()
	}
	program.Fatal(err)
	program.OnSignal(b.cleanUp)
	defer b.cleanUp()
	program.Fatal(b.run(ctx, *rounds))
}

type bench struct {
	lab, name string
	a, b      *host
	dom       libvirt.Domain
	memory    int
}

func setUp(ctx context.Context, lab string, memory, data int) (*bench, error) {
	creds, err := libvirt.ReadPKIDir(filepath.Join(lab, "pki"))
	if err != nil {
		return nil, err
	}
	var suffix [4]byte
	_, _ = rand.Read(suffix[:])
	bn := &bench{lab: lab, name: "mbench-" + hex.EncodeToString(suffix[:]), memory: memory}
	for i, uri := range []string{os.Getenv("BANLIEUE_MIGRATION_A"), os.Getenv("BANLIEUE_MIGRATION_B")} {
		if uri == "" {
			return nil, fmt.Errorf("BANLIEUE_MIGRATION_A and _B are not set: source the migration lab's env")
		}
		ep, err := libvirt.ParseEndpoint(uri)
		if err != nil {
			return nil, err
		}
		c, err := libvirt.Dialer{Endpoint: ep, Credentials: creds}.Dial(ctx)
		if err != nil {
			return nil, fmt.Errorf("dialing %s: %w", uri, err)
		}
		h := &host{name: []string{"a", "b"}[i], uri: uri, c: c}
		h.dir = "/var/lib/libvirt/images/" + bn.name + "-" + h.name
		// VIR_STORAGE_POOL_CREATE_WITH_BUILD: a transient pool, its directory made.
		if h.pool, err = c.StoragePoolCreateXML(ctx, fmt.Sprintf(`<pool type='dir'><name>%s</name><target><path>%s</path></target></pool>`,
			bn.name, h.dir), 1); err != nil {
			return nil, fmt.Errorf("host %s: pool: %w", h.name, err)
		}
		if i == 0 {
			bn.a = h
		} else {
			bn.b = h
		}
	}
	// The base, the same bytes on both hosts, as banlieue's content-addressed images are.
	tmp, err := os.MkdirTemp("", "mbench")
	if err != nil {
		return bn, err
	}
	defer func() { _ = os.RemoveAll(tmp) }()
	base := filepath.Join(tmp, "base.qcow2")
	if err := run("qemu-img", "create", "-q", "-f", "qcow2", base, "256M"); err != nil {
		return bn, err
	}
	for _, h := range []*host{bn.a, bn.b} {
		if err := run("cp", base, bn.hostPath(h, "base.qcow2")); err != nil {
			return bn, err
		}
		if err := h.c.StoragePoolRefresh(ctx, h.pool); err != nil {
			return bn, err
		}
	}
	if err := bn.createOverlay(ctx, bn.a); err != nil {
		return bn, err
	}
	// Written through the host's own view, where the overlay's backing path resolves.
	if err := run(filepath.Join("hack", "migration-lab.sh"), "exec", "a", lab, "qemu-io", "-f", "qcow2",
		"-c", fmt.Sprintf("write -P 0xab 0 %dM", data), bn.a.dir+"/overlay.qcow2"); err != nil {
		return bn, err
	}
	xml, err := bn.domainXML(bn.a.dir)
	if err != nil {
		return bn, err
	}
	dom, err := bn.a.c.DomainDefineXML(ctx, xml, 0)
	if err != nil {
		return bn, err
	}
	if bn.dom, err = bn.a.c.DomainCreate(ctx, dom, 0); err != nil {
		return bn, err
	}
	return bn, nil
}

// hostPath is where file of h's pool is on this machine's filesystem.
func (bn *bench) hostPath(h *host, file string) string {
	return filepath.Join(bn.lab, "host-"+h.name, "state", "lib", "images", filepath.Base(h.dir), file)
}

// domainXML is the guest: one vCPU, SeaBIOS, its overlay in dir as its only disk.
func (bn *bench) domainXML(dir string) (string, error) {
	dom := libvirtxml.Domain{Type: "qemu", Name: bn.name,
		Memory: &libvirtxml.DomainMemory{Value: uint(bn.memory), Unit: "MiB"},
		VCPU:   &libvirtxml.DomainVCPU{Value: 1},
		OS: &libvirtxml.DomainOS{Type: &libvirtxml.DomainOSType{Arch: "x86_64", Machine: "pc", Type: "hvm"},
			BootDevices: []libvirtxml.DomainBootDevice{{Dev: "hd"}}},
		Devices: &libvirtxml.DomainDeviceList{Emulator: "/usr/bin/qemu-system-x86_64",
			Disks: []libvirtxml.DomainDisk{{Device: "disk",
				Driver: &libvirtxml.DomainDiskDriver{Name: "qemu", Type: "qcow2"},
				Source: &libvirtxml.DomainDiskSource{File: &libvirtxml.DomainDiskSourceFile{File: dir + "/overlay.qcow2"}},
				Target: &libvirtxml.DomainDiskTarget{Dev: "vda", Bus: "virtio"}}}}}
	return dom.Marshal()
}

// createOverlay makes the empty overlay over the base that NON_SHARED_INC copies onto, as the
// target's provider does before a move.
func (bn *bench) createOverlay(ctx context.Context, h *host) error {
	_, err := h.c.StorageVolCreateXML(ctx, h.pool, fmt.Sprintf(`<volume type='file'><name>overlay.qcow2</name>`+
		`<capacity>%d</capacity><target><format type='qcow2'/></target>`+
		`<backingStore><path>%s/base.qcow2</path><format type='qcow2'/></backingStore></volume>`, 256<<20, h.dir), 0)
	if err != nil {
		return fmt.Errorf("host %s: overlay: %w", h.name, err)
	}
	return nil
}

func (bn *bench) deleteOverlay(ctx context.Context, h *host) error {
	v, err := h.c.StorageVolLookupByName(ctx, h.pool, "overlay.qcow2")
	if err == nil {
		err = h.c.StorageVolDelete(ctx, v)
	}
	if err != nil {
		return fmt.Errorf("host %s: deleting the overlay: %w", h.name, err)
	}
	return nil
}

func (bn *bench) run(ctx context.Context, rounds int) error {
	var moves []move
	from, to := bn.a, bn.b
	fmt.Printf("%-8s %-5s %10s %10s %10s\n", "tool", "move", "wall", "job", "downtime")
	for r := range rounds {
		// Each tool moves once per round; who goes first alternates, so each tool moves in both
		// directions as often as the other.
		tools := []string{"banlieue", "virsh"}
		if r%2 == 1 {
			slices.Reverse(tools)
		}
		for _, tool := range tools {
			m, err := bn.move(ctx, tool, from, to)
			if err != nil {
				return err
			}
			fmt.Printf("%-8s %s→%s  %10v %10v %10v\n", m.tool, m.from, m.to, m.wall.Round(time.Millisecond), m.total, m.downtime)
			moves = append(moves, m)
			from, to = to, from
		}
	}
	fmt.Println()
	fmt.Printf("%-8s %12s %12s %14s\n", "tool", "median wall", "median job", "median downtime")
	med := map[string][3]time.Duration{}
	for _, tool := range []string{"banlieue", "virsh"} {
		var wall, total, down []time.Duration
		for _, m := range moves {
			if m.tool == tool {
				wall, total, down = append(wall, m.wall), append(total, m.total), append(down, m.downtime)
			}
		}
		med[tool] = [3]time.Duration{median(wall), median(total), median(down)}
		fmt.Printf("%-8s %12v %12v %14v\n", tool, med[tool][0].Round(time.Millisecond), med[tool][1], med[tool][2])
	}
	ratio := func(i int) string {
		if med["virsh"][i] == 0 {
			return "n/a"
		}
		return fmt.Sprintf("%.2f", float64(med["banlieue"][i])/float64(med["virsh"][i]))
	}
	fmt.Printf("\nbanlieue/virsh: wall %s, job %s, downtime %s (below 1: banlieue's is shorter)\n", ratio(0), ratio(1), ratio(2))
	return nil
}

// move moves the guest from one host to the other with tool, and measures it.
func (bn *bench) move(ctx context.Context, tool string, from, to *host) (move, error) {
	m := move{tool: tool, from: from.name, to: to.name}
	if err := bn.createOverlay(ctx, to); err != nil {
		return m, err
	}
	live, err := from.c.DomainXMLDesc(ctx, bn.dom, libvirt.DomainXMLMigratable)
	if err != nil {
		return m, err
	}
	persistent, err := from.c.DomainXMLDesc(ctx, bn.dom, libvirt.DomainXMLMigratable|libvirt.DomainXMLInactive)
	if err != nil {
		return m, err
	}
	destLive := strings.ReplaceAll(live, from.dir+"/", to.dir+"/")
	destPersistent := strings.ReplaceAll(persistent, from.dir+"/", to.dir+"/")
	began := time.Now()
	switch tool {
	case "banlieue":
		params := libvirt.MigrateParams{URI: "tcp://127.0.0.1", ListenAddress: "127.0.0.1", MigrateDisks: []string{"vda"},
			DestXML: destLive, PersistXML: destPersistent}
		err = from.c.DomainMigratePerform3Params(libvirt.WithCallTimeout(ctx, 10*time.Minute), bn.dom, to.uri, params.Typed(), moveFlags)
	default:
		err = bn.virshMigrate(ctx, from, to, destLive, destPersistent)
	}
	m.wall = time.Since(began)
	if err != nil {
		return m, fmt.Errorf("%s %s→%s: %w", tool, from.name, to.name, err)
	}
	dom, err := to.c.DomainLookupByName(ctx, bn.name)
	if err != nil {
		return m, err
	}
	bn.dom = dom
	st, err := to.c.DomainGetJobStats(ctx, dom, libvirt.JobStatsCompleted)
	if err != nil {
		return m, fmt.Errorf("the destination's completed job: %w", err)
	}
	m.total, m.downtime = st.TimeElapsed, st.Downtime
	return m, bn.deleteOverlay(ctx, from)
}

// virshMigrate is the operator's command for the same move.
func (bn *bench) virshMigrate(ctx context.Context, from, to *host, destLive, destPersistent string) error {
	dir, err := os.MkdirTemp("", "mbench")
	if err != nil {
		return err
	}
	defer func() { _ = os.RemoveAll(dir) }()
	liveFile, persistentFile := filepath.Join(dir, "live.xml"), filepath.Join(dir, "persistent.xml")
	if err := os.WriteFile(liveFile, []byte(destLive), 0o600); err != nil {
		return err
	}
	if err := os.WriteFile(persistentFile, []byte(destPersistent), 0o600); err != nil {
		return err
	}
	conn := from.uri + "?pkipath=" + filepath.Join(bn.lab, "pki")
	cmd := exec.CommandContext(ctx, "virsh", "-q", "-c", conn, "migrate", "--live", "--p2p", "--tls", "--persistent", "--undefinesource",
		"--copy-storage-inc", "--abort-on-error", "--migrate-disks", "vda", "--migrateuri", "tcp://127.0.0.1", "--listen-address", "127.0.0.1",
		"--xml", liveFile, "--persistent-xml", persistentFile, bn.name, to.uri)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("virsh migrate: %w: %s", err, out)
	}
	return nil
}

// cleanUp removes the guest and the pools: the transient pools go with their volumes deleted.
func (bn *bench) cleanUp() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, h := range []*host{bn.a, bn.b} {
		if h == nil {
			continue
		}
		if d, err := h.c.DomainLookupByName(ctx, bn.name); err == nil {
			_ = h.c.DomainDestroy(ctx, d)
			_ = h.c.DomainUndefine(ctx, d, 0)
		}
		if vols, err := h.c.StoragePoolListAllVolumes(ctx, h.pool); err == nil {
			for _, v := range vols {
				_ = h.c.StorageVolDelete(ctx, v)
			}
		}
		_ = h.c.StoragePoolDestroy(ctx, h.pool)
		_ = os.Remove(bn.hostPath(h, ""))
		_ = h.c.Close()
	}
}

func median(d []time.Duration) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}

func run(name string, args ...string) error {
	if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
		return fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, out)
	}
	return nil
}
