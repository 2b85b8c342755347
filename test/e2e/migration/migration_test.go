// Package migration holds the live migration's end-to-end tests: banlieue-controller and the
// libvirt provider's controllers for two Providers, on a real API server and the two libvirtds of
// hack/migration-lab.sh (docs/testing.md, "Two hosts for live migration").
package migration

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
	"banlieue.io/banlieue/internal/testenv"
	"banlieue.io/banlieue/internal/testenv/labhost"
	"banlieue.io/banlieue/pkg/libvirt"
)

const (
	// moveDiskSize is the VM's disk: small, since only its overlay travels.
	moveDiskSize = 64 << 20
	// moveBase is the VM's base image, present on both hosts under the same name.
	moveBase = "base-0123abcd.qcow2"
)

// labHost is one host of the lab with a pool of this test's own.
type labHost struct {
	name     string
	c        *libvirt.Client
	pool     libvirt.StoragePool
	poolPath string
}

func labPool(ctx context.Context, t *testing.T, l labhost.MigrationLab, h, uri, pool string) labHost {
	t.Helper()
	c, p, dir := l.Pool(ctx, t, h, uri, pool)
	return labHost{name: h, c: c, pool: p, poolPath: dir}
}

func poolVolumes(ctx context.Context, t *testing.T, h labHost) []string {
	t.Helper()
	vols, err := h.c.StoragePoolListAllVolumes(ctx, h.pool)
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

// checkRunsOnly checks dom runs on h and other has no domain of its name, running or defined.
func checkRunsOnly(ctx context.Context, t *testing.T, h, other labHost, dom libvirt.Domain) {
	t.Helper()
	d, err := h.c.DomainLookupByName(ctx, dom.Name)
	if err != nil {
		t.Fatalf("host %s: %v", h.name, err)
	}
	if state, _, err := h.c.DomainState(ctx, d); err != nil || state != libvirt.DomainRunning {
		t.Fatalf("host %s: domain %s (%v), want running", h.name, state, err)
	}
	if _, err := other.c.DomainLookupByName(ctx, dom.Name); !libvirt.IsNotFound(err) {
		t.Fatalf("host %s still has domain %s (%v)", other.name, dom.Name, err)
	}
}

// TestLiveMigrationEndToEnd runs the whole chain on a real API server and the two libvirtds of
// hack/migration-lab.sh: banlieue-controller, and the libvirt provider's Provider, machine and
// move-target controllers for both Providers. A running VM (migrationPolicy live) is moved by a
// VirtualMachineMigration: it ends Succeeded with its timings, one domain on the target under
// the same UUID (never recreated), nothing left on the source, the machine's providerRef on
// the target; then a second migration moves it back; then a drain of the Provider it runs on
// ends Drained, the VM moved live.
func TestLiveMigrationEndToEnd(t *testing.T) {
	ctx, ch := startChain(t, "chain-lab", nil)
	env := ch.env
	vm := ch.tinyVM(ctx, t)
	first := ch.machine(ctx, t)
	for i := range 2 {
		_, vm = ch.move(ctx, t, vm, i+1, moveBase)
	}

	// A drain of the Provider the VM runs on moves it live. A merge patch, not Get/Update: the
	// providers write the Provider's status all along, so an update carrying the
	// resourceVersion read would conflict.
	from := vm.Status.Scheduled.ProviderName
	var p banlieuev1.Provider
	testenv.Patch(ctx, t, env.Client, client.ObjectKey{Namespace: ch.ns, Name: from}, &p, func(p *banlieuev1.Provider) {
		p.Spec.Unschedulable, p.Spec.Drain = true, &banlieuev1.ProviderDrain{}
	})
	testenv.Eventually(t, 10*time.Minute, "the drain of "+from+" Drained", func() error {
		err := env.Client.Get(ctx, client.ObjectKey{Namespace: ch.ns, Name: from}, &p)
		return testenv.Unmet(err == nil && p.Status.Drain != nil && p.Status.Drain.Phase == banlieuev1.DrainDrained, fmt.Sprintf("%+v (%v)", p.Status.Drain, err))
	})
	if m := ch.machine(ctx, t); m.UID != first.UID || m.Status.DomainUUID != first.Status.DomainUUID || m.Spec.ProviderRef.Name != other[from] {
		t.Fatalf("after the drain: machine %s on %s with domain %s, want %s on %s with %s", m.UID, m.Spec.ProviderRef.Name, m.Status.DomainUUID,
			first.UID, other[from], first.Status.DomainUUID)
	}
	checkRunsOnly(ctx, t, ch.hosts[other[from]], ch.hosts[from], ch.domain())
}

// tinyVM starts the chain's VM: a blank base image on both hosts under the same name, recorded
// as present on both Providers, a small BIOS class and a VirtualMachine under migrationPolicy
// live, running on one of them.
func (ch *chain) tinyVM(ctx context.Context, t *testing.T) *banlieuev1.VirtualMachine {
	t.Helper()
	env, name := ch.env, ch.name
	base := filepath.Join(t.TempDir(), moveBase)
	if out, err := exec.Command("qemu-img", "create", "-q", "-f", "qcow2", base, fmt.Sprint(moveDiskSize)).CombinedOutput(); err != nil {
		t.Fatalf("qemu-img: %v: %s", err, out)
	}
	img := &banlieuev1.VMImage{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: banlieuev1.VMImageSpec{OSFamily: "linux", OSDistribution: "tiny", OSVersion: "1", Architecture: "amd64",
			Sources:  []banlieuev1.ImageSource{{ProviderClass: "libvirt", Kind: banlieuev1.SourceBackingFile, Ref: moveBase}},
			Template: &banlieuev1.VMImageTemplate{InstallMode: banlieuev1.InstallImmediate}}}
	env.Create(ctx, t, img)
	for _, p := range []string{"lab-a", "lab-b"} {
		h := ch.hosts[p]
		if out, err := exec.Command("cp", base, ch.lab.HostPath(h.name, h.poolPath+"/"+moveBase)).CombinedOutput(); err != nil {
			t.Fatalf("cp: %v: %s", err, out)
		}
		if err := h.c.StoragePoolRefresh(ctx, h.pool); err != nil {
			t.Fatal(err)
		}
		ch.provider(ctx, t, p, banlieuev1.ProviderCapabilities{
			StorageClasses: []banlieuev1.StorageClassMapping{{Name: "lab", Target: map[string]string{"pool": h.pool.Name}}}})
	}
	ch.imageOnHosts(ctx, t, moveBase)
	env.Create(ctx, t, &banlieuev1.VMClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: banlieuev1.VMClassSpec{
		Firmware: banlieuev1.FirmwareBIOS,
		Hardware: banlieuev1.ClassHardware{CPUs: 1, MemoryMiB: 128, Disks: []banlieuev1.ClassDisk{{Name: "os", SizeGiB: 1, StorageClass: "lab"}}}}})
	env.Create(ctx, t, &banlieuev1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ch.ns},
		Spec: banlieuev1.VirtualMachineSpec{ClassRef: banlieuev1.LocalObjectReference{Name: name}, ImageRef: banlieuev1.LocalObjectReference{Name: name},
			DesiredPowerState: banlieuev1.PoweredOn, MigrationPolicy: "live"}})
	return ch.ready(ctx, t, "the VM running")
}

// TestLiveMoveConvergesAfterControllerRestart stops banlieue-controller during live moves, once
// while the target is prepared and once while the domain migrates, and starts a new one a few
// seconds later while the providers go on: each move still ends Succeeded, the machine handed
// over (the same machine and domain UUID), the domain running on the target alone and nothing
// but the base left in the source's pool (docs/adr/0154-live-migration-peer-to-peer-over-tls.md,
// "Crash recovery"). The providers' side of it is TestLiveMoveConvergesAfterProviderKilled.
func TestLiveMoveConvergesAfterControllerRestart(t *testing.T) {
	ctx, ch := startChain(t, "chain-restart", nil)
	vm := ch.tinyVM(ctx, t)
	for i, at := range []banlieuev1.MigrationPhase{banlieuev1.MigrationPreparingTarget, banlieuev1.MigrationMigrating} {
		_, vm = ch.moveWith(ctx, t, vm, i+1, moveBase, func(mv string) {
			var m banlieuev1.VirtualMachineMigration
			testenv.Eventually(t, 2*time.Minute, mv+" "+string(at)+" or later", func() error {
				err := ch.env.Client.Get(ctx, client.ObjectKey{Namespace: ch.ns, Name: mv}, &m)
				return testenv.Unmet(err == nil && (m.Status.Phase == at || phaseAfter(m.Status.Phase, at)), fmt.Sprintf("phase %q (%v)", m.Status.Phase, err))
			})
			if err := ch.stopController(); err != nil {
				t.Errorf("stopping banlieue-controller: %v", err)
			}
			t.Logf("%s: banlieue-controller stopped in phase %s (waited for %s)", mv, m.Status.Phase, at)
			time.Sleep(3 * time.Second) // the providers go on alone
			ch.restartController(t)
		})
	}
}

// phaseAfter is whether phase p comes after at on a migration's way to Succeeded.
func phaseAfter(p, at banlieuev1.MigrationPhase) bool {
	order := []banlieuev1.MigrationPhase{banlieuev1.MigrationPending, banlieuev1.MigrationPreparingTarget,
		banlieuev1.MigrationMigrating, banlieuev1.MigrationSucceeded}
	return slices.Index(order, p) > slices.Index(order, at)
}
