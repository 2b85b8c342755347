// Package migration holds the live migration's end-to-end test: banlieue-controller and the
// libvirt provider's controllers for two Providers, on a real API server and the two libvirtds of
// hack/migration-lab.sh (docs/testing.md, "Two hosts for live migration").
package migration

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "banlieue.io/banlieue/api/infrastructure/v1alpha1"
	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
	"banlieue.io/banlieue/internal/controller"
	providerlibvirt "banlieue.io/banlieue/internal/provider/libvirt"
	"banlieue.io/banlieue/internal/provider/libvirt/hostconn"
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
	l := labhost.NeedMigrationLab(t)
	testenv.SetLogger(t)
	env := testenv.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	mgr := env.NewManager(t)
	conns := hostconn.NewConnections()
	t.Cleanup(conns.Close)
	if err := controller.Setup(mgr, controller.Options{}); err != nil {
		t.Fatal(err)
	}
	for _, setup := range []interface{ SetupWithManager(ctrl.Manager) error }{
		&providerlibvirt.ProviderReconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Connections: conns, Resync: 5 * time.Second},
		&providerlibvirt.MachineReconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Connections: conns, Resync: 5 * time.Second},
		&providerlibvirt.MoveTargetReconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Connections: conns},
	} {
		if err := setup.SetupWithManager(mgr); err != nil {
			t.Fatal(err)
		}
	}
	testenv.StartManager(t, mgr)

	const ns = "chain-lab"
	env.CreateLabNamespace(ctx, t, testenv.LibvirtLab{Dir: l.Dir, Endpoint: l.A, PKI: filepath.Join(l.Dir, "pki")}, ns, "chain-creds", "chain-ca")
	var suffix [4]byte
	_, _ = rand.Read(suffix[:])
	name := "vm-" + hex.EncodeToString(suffix[:])
	hosts := map[string]labHost{"lab-a": labPool(ctx, t, l, "a", l.A, name+"-a"), "lab-b": labPool(ctx, t, l, "b", l.B, name+"-b")}
	uris := map[string]string{"lab-a": l.A, "lab-b": l.B}
	base := filepath.Join(t.TempDir(), moveBase)
	if out, err := exec.Command("qemu-img", "create", "-q", "-f", "qcow2", base, fmt.Sprint(moveDiskSize)).CombinedOutput(); err != nil {
		t.Fatalf("qemu-img: %v: %s", err, out)
	}
	img := &banlieuev1.VMImage{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: banlieuev1.VMImageSpec{OSFamily: "linux", OSDistribution: "tiny", OSVersion: "1", Architecture: "amd64",
			Sources:  []banlieuev1.ImageSource{{ProviderClass: "libvirt", Kind: banlieuev1.SourceBackingFile, Ref: moveBase}},
			Template: &banlieuev1.VMImageTemplate{InstallMode: banlieuev1.InstallImmediate}}}
	env.Create(ctx, t, img)
	domName := ns + "-" + name
	for _, p := range []string{"lab-a", "lab-b"} {
		h := hosts[p]
		if out, err := exec.Command("cp", base, l.HostPath(h.name, h.poolPath+"/"+moveBase)).CombinedOutput(); err != nil {
			t.Fatalf("cp: %v: %s", err, out)
		}
		if err := h.c.StoragePoolRefresh(ctx, h.pool); err != nil {
			t.Fatal(err)
		}
		env.Create(ctx, t, testenv.LibvirtLab{Endpoint: uris[p]}.Provider(ns, p, "chain-creds", "chain-ca", banlieuev1.ProviderCapabilities{
			StorageClasses: []banlieuev1.StorageClassMapping{{Name: "lab", Target: map[string]string{"pool": h.pool.Name}}}}))
		img.Status.PerProvider = append(img.Status.PerProvider, banlieuev1.ProviderImageStatus{ProviderName: p, ProviderNamespace: ns,
			Ready: true, Reason: banlieuev1.ReasonReconciled, ResolvedRef: moveBase})
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			if d, err := h.c.DomainLookupByName(ctx, domName); err == nil {
				_ = h.c.DomainDestroy(ctx, d)
				_ = h.c.DomainUndefine(ctx, d, libvirt.UndefineNVRAM|libvirt.UndefineTPM)
			}
		})
	}
	if err := env.Client.Status().Update(ctx, img); err != nil {
		t.Fatal(err)
	}
	env.Create(ctx, t, &banlieuev1.VMClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: banlieuev1.VMClassSpec{
		Firmware: banlieuev1.FirmwareBIOS,
		Hardware: banlieuev1.ClassHardware{CPUs: 1, MemoryMiB: 128, Disks: []banlieuev1.ClassDisk{{Name: "os", SizeGiB: 1, StorageClass: "lab"}}}}})
	env.Create(ctx, t, &banlieuev1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: banlieuev1.VirtualMachineSpec{ClassRef: banlieuev1.LocalObjectReference{Name: name}, ImageRef: banlieuev1.LocalObjectReference{Name: name},
			DesiredPowerState: banlieuev1.PoweredOn, MigrationPolicy: "live"}})

	key := client.ObjectKey{Namespace: ns, Name: name}
	ready := func(what string) *banlieuev1.VirtualMachine {
		t.Helper()
		var vm banlieuev1.VirtualMachine
		testenv.Eventually(t, 4*time.Minute, what, func() error {
			err := env.Client.Get(ctx, key, &vm)
			return testenv.Unmet(err == nil && vm.Status.Phase == banlieuev1.VMPhaseReady && vm.Status.ObservedPowerState == banlieuev1.PoweredOn,
				fmt.Sprintf("phase %s power %s scheduled %+v conditions %+v (%v)", vm.Status.Phase, vm.Status.ObservedPowerState, vm.Status.Scheduled, vm.Status.Conditions, err))
		})
		return &vm
	}
	machineOf := func() *infrav1.LibvirtMachine {
		t.Helper()
		var m infrav1.LibvirtMachine
		if err := env.Client.Get(ctx, key, &m); err != nil {
			t.Fatal(err)
		}
		return &m
	}
	vm := ready("the VM running")
	first := machineOf()
	uuid := first.Status.DomainUUID
	other := map[string]string{"lab-a": "lab-b", "lab-b": "lab-a"}

	for i := range 2 {
		from := vm.Status.Scheduled.ProviderName
		to := other[from]
		mv := fmt.Sprintf("%s-move-%d", name, i+1)
		env.Create(ctx, t, &banlieuev1.VirtualMachineMigration{ObjectMeta: metav1.ObjectMeta{Name: mv, Namespace: ns},
			Spec: banlieuev1.VirtualMachineMigrationSpec{VMName: name, TargetProvider: &banlieuev1.MigrationProviderReference{Name: to},
				TimeoutSeconds: ptr.To[int32](900)}})
		var m banlieuev1.VirtualMachineMigration
		testenv.Eventually(t, 10*time.Minute, mv+" final", func() error {
			err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: mv}, &m)
			return testenv.Unmet(err == nil && m.Status.Phase.Final(), fmt.Sprintf("%+v (%v)", m.Status, err))
		})
		if m.Status.Phase != banlieuev1.MigrationSucceeded || ptr.Deref(m.Status.TotalMilliseconds, 0) <= 0 || m.Status.DowntimeMilliseconds == nil {
			t.Fatalf("%s: %+v, want Succeeded with its timings", mv, m.Status)
		}
		t.Logf("%s: %s to %s in %d ms, downtime %d ms", mv, from, to, *m.Status.TotalMilliseconds, *m.Status.DowntimeMilliseconds)
		vm = ready(mv + ": the VM running on " + to)
		testenv.Eventually(t, 2*time.Minute, mv+": the machine on "+to, func() error {
			m := machineOf()
			return testenv.Unmet(m.Spec.ProviderRef.Name == to && m.Spec.Migration == nil && m.Status.MigrationTarget == nil &&
				vm.Status.Scheduled.ProviderName == to, fmt.Sprintf("providerRef %+v, request %+v, record %+v, VM on %s",
				m.Spec.ProviderRef, m.Spec.Migration, m.Status.MigrationTarget, vm.Status.Scheduled.ProviderName))
		})
		if m := machineOf(); m.UID != first.UID || m.Status.DomainUUID != uuid {
			t.Fatalf("%s: machine %s with domain %s, want %s with %s: recreated", mv, m.UID, m.Status.DomainUUID, first.UID, uuid)
		}
		checkRunsOnly(ctx, t, hosts[to], hosts[from], libvirt.Domain{Name: domName})
		if got := poolVolumes(ctx, t, hosts[from]); !slices.Equal(got, []string{moveBase}) {
			t.Errorf("%s: %s's pool holds %v, want the base alone", mv, from, got)
		}
	}

	// A drain of the Provider the VM runs on moves it live.
	// A merge patch, not Get/Update: the providers write the Provider's status all along, so an
	// update carrying the resourceVersion read would conflict.
	from := vm.Status.Scheduled.ProviderName
	var p banlieuev1.Provider
	testenv.Patch(ctx, t, env.Client, client.ObjectKey{Namespace: ns, Name: from}, &p, func(p *banlieuev1.Provider) {
		p.Spec.Unschedulable, p.Spec.Drain = true, &banlieuev1.ProviderDrain{}
	})
	testenv.Eventually(t, 10*time.Minute, "the drain of "+from+" Drained", func() error {
		err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: from}, &p)
		return testenv.Unmet(err == nil && p.Status.Drain != nil && p.Status.Drain.Phase == banlieuev1.DrainDrained, fmt.Sprintf("%+v (%v)", p.Status.Drain, err))
	})
	if m := machineOf(); m.UID != first.UID || m.Status.DomainUUID != uuid || m.Spec.ProviderRef.Name != other[from] {
		t.Fatalf("after the drain: machine %s on %s with domain %s, want %s on %s with %s", m.UID, m.Spec.ProviderRef.Name, m.Status.DomainUUID, first.UID, other[from], uuid)
	}
	checkRunsOnly(ctx, t, hosts[other[from]], hosts[from], libvirt.Domain{Name: domName})
}
