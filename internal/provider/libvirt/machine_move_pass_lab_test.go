package libvirt

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
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "banlieue.io/banlieue/api/infrastructure/v1alpha1"
	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
	"banlieue.io/banlieue/internal/provider/libvirt/hostconn"
	"banlieue.io/banlieue/internal/testenv"
	"banlieue.io/banlieue/pkg/libvirt"
)

// TestLiveMoveThroughTheProviders moves a running LibvirtMachine between the two libvirtds of
// hack/migration-lab.sh through the provider's controllers alone, on a real API server: the
// machine pass of the source Provider and the target reconciler of the target Provider (one
// process serving both, as they would in two pods: each talks only to its own host). The
// controller's part is played by hand: spec.migration asked, then the handover update once the
// source reports Succeeded. The domain runs on the target alone under the same UUID, the source
// keeps nothing, the timings are reported, the target's provider adopts the domain (Ready, the
// same UUID: not recreated), and the machine moves back the same way.
func TestLiveMoveThroughTheProviders(t *testing.T) {
	l := needMoveLab(t)
	testenv.SetLogger(t)
	env := testenv.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	mgr := env.NewManager(t)
	conns := hostconn.NewConnections()
	t.Cleanup(conns.Close)
	if err := (&MachineReconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Connections: conns, Resync: 5 * time.Second}).SetupWithManager(mgr); err != nil {
		t.Fatal(err)
	}
	if err := (&MoveTargetReconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Connections: conns}).SetupWithManager(mgr); err != nil {
		t.Fatal(err)
	}
	testenv.StartManager(t, mgr)

	const ns = "move-lab"
	labA := testenv.LibvirtLab{Dir: l.Dir, Endpoint: l.A, PKI: filepath.Join(l.Dir, "pki")}
	env.CreateLabNamespace(ctx, t, labA, ns, "move-creds", "move-ca")

	var suffix [4]byte
	_, _ = rand.Read(suffix[:])
	name := "mv-" + hex.EncodeToString(suffix[:])
	hosts := []labHost{l.labPool(ctx, t, "a", l.A, name+"-a"), l.labPool(ctx, t, "b", l.B, name+"-b")}
	base := filepath.Join(t.TempDir(), moveBase)
	if out, err := exec.Command("qemu-img", "create", "-q", "-f", "qcow2", base, fmt.Sprint(moveDiskSize)).CombinedOutput(); err != nil {
		t.Fatalf("qemu-img: %v: %s", err, out)
	}
	providers := []string{"lab-a", "lab-b"}
	img := &banlieuev1.VMImage{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: banlieuev1.VMImageSpec{OSFamily: "linux", OSDistribution: "tiny", OSVersion: "1", Architecture: "amd64",
			Sources: []banlieuev1.ImageSource{{ProviderClass: "libvirt", Kind: banlieuev1.SourceBackingFile, Ref: moveBase}}}}
	env.Create(ctx, t, img)
	for i, h := range hosts {
		if out, err := exec.Command("cp", base, l.HostPath(h.name, h.end.poolPath+"/"+moveBase)).CombinedOutput(); err != nil {
			t.Fatalf("cp: %v: %s", err, out)
		}
		if err := h.end.c.StoragePoolRefresh(ctx, h.end.pool); err != nil {
			t.Fatal(err)
		}
		uri := []string{l.A, l.B}[i]
		p := testenv.LibvirtLab{Endpoint: uri}.Provider(ns, providers[i], "move-creds", "move-ca", banlieuev1.ProviderCapabilities{
			StorageClasses: []banlieuev1.StorageClassMapping{{Name: "lab", Target: map[string]string{targetPool: h.end.pool.Name}}}})
		env.Create(ctx, t, p)
		img.Status.PerProvider = append(img.Status.PerProvider, banlieuev1.ProviderImageStatus{ProviderName: providers[i], ProviderNamespace: ns,
			Ready: true, Reason: banlieuev1.ReasonReconciled, ResolvedRef: moveBase})
	}
	if err := env.Client.Status().Update(ctx, img); err != nil {
		t.Fatal(err)
	}
	domName := ns + "-" + name
	for _, h := range hosts {
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			if d, err := h.end.c.DomainLookupByName(ctx, domName); err == nil {
				_ = h.end.c.DomainDestroy(ctx, d)
				_ = h.end.c.DomainUndefine(ctx, d, libvirt.UndefineNVRAM|libvirt.UndefineTPM)
			}
		})
	}

	m := &infrav1.LibvirtMachine{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: infrav1.LibvirtMachineSpec{ProviderRef: &infrav1.ProviderReference{Name: "lab-a"}, Pool: hosts[0].end.pool.Name,
			DomainName: domName, BootSource: infrav1.BootSource{Kind: infrav1.BootBackingVolume, Volume: moveBase},
			VCPUs: 1, MemoryMiB: 128, Firmware: banlieuev1.FirmwareBIOS, Disks: []infrav1.LibvirtDisk{{Name: "os", SizeGiB: 1}}}}
	env.Create(ctx, t, m)
	key := client.ObjectKeyFromObject(m)
	wait := func(what string, timeout time.Duration, ok func(*infrav1.LibvirtMachine) bool) *infrav1.LibvirtMachine {
		t.Helper()
		var got infrav1.LibvirtMachine
		testenv.Eventually(t, timeout, what, func() error {
			err := env.Client.Get(ctx, key, &got)
			return testenv.Unmet(err == nil && ok(&got), fmt.Sprintf("spec.migration %+v status.migration %+v migrationTarget %+v conditions %+v (%v)",
				got.Spec.Migration, got.Status.Migration, got.Status.MigrationTarget, got.Status.Conditions, err))
		})
		return &got
	}
	first := wait("the machine running on lab-a", 3*time.Minute, machineReady)
	uuid := first.Status.DomainUUID

	for i, step := range []struct{ from, to int }{{0, 1}, {1, 0}} {
		from, to := hosts[step.from], hosts[step.to]
		migration := fmt.Sprintf("move-%d", i+1)
		testenv.Eventually(t, 30*time.Second, "asking "+migration, func() error {
			var cur infrav1.LibvirtMachine
			if err := env.Client.Get(ctx, key, &cur); err != nil {
				return err
			}
			cur.Spec.Migration = &infrav1.LibvirtMachineMigration{MigrationName: migration,
				TargetProvider: infrav1.ProviderReference{Name: providers[step.to]}, TargetPool: to.end.pool.Name}
			return env.Client.Update(ctx, &cur)
		})
		moved := wait(migration+" Succeeded", 8*time.Minute, func(m *infrav1.LibvirtMachine) bool {
			r := m.Status.Migration
			return r != nil && r.MigrationName == migration && (r.Phase == infrav1.MachineMigrationSucceeded || r.Phase == infrav1.MachineMigrationFailed)
		})
		if r := moved.Status.Migration; r.Phase != infrav1.MachineMigrationSucceeded || r.TotalMilliseconds == nil || *r.TotalMilliseconds <= 0 ||
			r.DowntimeMilliseconds == nil {
			t.Fatalf("%s: report %+v, want Succeeded with its timings", migration, r)
		}
		checkRunsOnly(ctx, t, to, from, libvirt.Domain{Name: domName})
		if d, err := to.end.c.DomainLookupByName(ctx, domName); err != nil || d.UUID.String() != uuid {
			t.Fatalf("%s: the domain on %s: %v, UUID %s, want %s", migration, to.name, err, d.UUID, uuid)
		}
		if got := poolVolumes(ctx, t, from); !slices.Equal(got, []string{moveBase}) {
			t.Errorf("%s: the source pool holds %v, want the base alone", migration, got)
		}

		// The controller's handover, in one update.
		testenv.Eventually(t, 30*time.Second, "the handover of "+migration, func() error {
			var cur infrav1.LibvirtMachine
			if err := env.Client.Get(ctx, key, &cur); err != nil {
				return err
			}
			cur.Spec.Migration = nil
			cur.Spec.ProviderRef = &infrav1.ProviderReference{Name: providers[step.to]}
			cur.Spec.Pool = to.end.pool.Name
			return env.Client.Update(ctx, &cur)
		})
		after := wait("the machine adopted on "+providers[step.to], 3*time.Minute, func(m *infrav1.LibvirtMachine) bool {
			return machineReady(m) && m.Status.MigrationTarget == nil && m.Spec.ProviderID == providerID(providers[step.to], uuid)
		})
		if after.Status.DomainUUID != uuid {
			t.Errorf("%s: domain UUID %s after the handover, want %s: the domain was recreated", migration, after.Status.DomainUUID, uuid)
		}
		checkRunsOnly(ctx, t, to, from, libvirt.Domain{Name: domName})
	}

	if err := env.Client.Delete(ctx, m); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 2*time.Minute, "the machine gone", func() error {
		var cur infrav1.LibvirtMachine
		return testenv.Unmet(client.IgnoreNotFound(env.Client.Get(ctx, key, &cur)) == nil && cur.Name == "", "still there")
	})
}
