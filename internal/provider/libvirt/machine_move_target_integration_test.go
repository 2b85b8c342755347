package libvirt

import (
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "banlieue.io/banlieue/api/infrastructure/v1alpha1"
	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
	"banlieue.io/banlieue/internal/provider/libvirt/hostconn"
	"banlieue.io/banlieue/internal/testenv"
	"banlieue.io/banlieue/internal/testenv/labhost"
	"banlieue.io/banlieue/pkg/libvirt"
)

// TestMoveTargetAgainstLabHost runs the target's side of a live move (MoveTargetReconciler for
// Provider "lab-b", watching through its own cache selected by spec.migration.targetProvider.name)
// against the lab libvirtd and a real API server. The source's side is played by hand (its
// status.migration), so what the target makes and removes is seen alone: the volumes recorded
// before they are made, the OS disk an empty overlay of the disk's size over the target's base,
// the seed rendered from the machine's user-data with the domain's UUID; released when the move
// failed; a name already taken on the target refused and left as it is; adopted after the
// handover.
func TestMoveTargetAgainstLabHost(t *testing.T) {
	ctx, ps := startLabSuite(t, func(mgr ctrl.Manager, conns *hostconn.Connections) error {
		return (&MoveTargetReconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Connections: conns,
			ProviderName: "lab-b", ProviderNamespace: testNamespace}).SetupWithManager(mgr)
	})
	s := &machineSuite{providerSuite: ps, pool: "movesrc-" + testenv.RunID(), bootName: "tiny.raw"}
	s.createPool(ctx, t)
	target := &machineSuite{providerSuite: ps, pool: "movedst-" + testenv.RunID(), bootName: "tiny.raw"}
	target.createPool(ctx, t)
	for _, p := range []struct{ name, pool string }{{"lab", s.pool}, {"lab-b", target.pool}} {
		pr := s.guideProvider(p.name)
		pr.Spec.Capabilities = banlieuev1.ProviderCapabilities{StorageClasses: []banlieuev1.StorageClassMapping{
			{Name: "lab", Target: map[string]string{targetPool: p.pool}}}}
		if err := s.env.Client.Create(ctx, pr); err != nil {
			t.Fatal(err)
		}
	}

	m := s.machine(testNamespace, "mover")
	userData := "#cloud-config\nhostname: mover\n"
	s.createWithUserData(ctx, t, m, userData)
	domainUUID := uuid.NewString()
	m.Status = infrav1.LibvirtMachineStatus{DomainUUID: domainUUID, BootVolume: s.bootName, Volumes: machineVolumes(&m.Spec),
		DiskSizes: []infrav1.DiskSize{{Name: "os", SizeGiB: 2}}}
	if err := s.env.Client.Status().Update(ctx, m); err != nil {
		t.Fatal(err)
	}
	key := client.ObjectKeyFromObject(m)
	osVol, seed := "banlieue-system-mover-os.qcow2", "banlieue-system-mover-cidata.iso"

	ask := func(name string) {
		t.Helper()
		var cur infrav1.LibvirtMachine
		if err := s.env.Client.Get(ctx, key, &cur); err != nil {
			t.Fatal(err)
		}
		cur.Spec.Migration = &infrav1.LibvirtMachineMigration{MigrationName: name, TargetProvider: infrav1.ProviderReference{Name: "lab-b"},
			TargetPool: target.pool}
		if err := s.env.Client.Update(ctx, &cur); err != nil {
			t.Fatal(err)
		}
	}
	// report plays the source's provider: its status.migration for the request.
	report := func(name string, phase infrav1.LibvirtMachineMigrationPhase) {
		t.Helper()
		var cur infrav1.LibvirtMachine
		if err := s.env.Client.Get(ctx, key, &cur); err != nil {
			t.Fatal(err)
		}
		cur.Status.Migration = &infrav1.LibvirtMachineMigrationStatus{MigrationName: name, Phase: phase}
		if err := s.env.Client.Status().Update(ctx, &cur); err != nil {
			t.Fatal(err)
		}
	}
	record := func(ok func(*infrav1.LibvirtMachineMigrationTargetStatus) bool) *infrav1.LibvirtMachine {
		t.Helper()
		return s.waitMachine(ctx, t, key, 90*time.Second, func(m *infrav1.LibvirtMachine) bool { return ok(m.Status.MigrationTarget) })
	}
	phase := func(name string, p infrav1.LibvirtMachineMigrationTargetPhase) func(*infrav1.LibvirtMachineMigrationTargetStatus) bool {
		return func(r *infrav1.LibvirtMachineMigrationTargetStatus) bool {
			return r != nil && r.MigrationName == name && r.Phase == p
		}
	}
	gone := func(r *infrav1.LibvirtMachineMigrationTargetStatus) bool { return r == nil }
	volumes := func(want ...string) {
		t.Helper()
		if got := labhost.VolumeNames(ctx, t, s.host, target.pool); !slices.Equal(got, want) {
			t.Errorf("target pool holds %v, want %v", got, want)
		}
	}

	t.Run("prepared from the machine alone, then released when the move failed", func(t *testing.T) {
		ask("mv-1")
		got := record(phase("mv-1", infrav1.MachineMigrationTargetPrepared))
		rec := got.Status.MigrationTarget
		if rec.Pool != target.pool || rec.Provider.Name != "lab-b" || !slices.Equal(rec.Volumes, []string{osVol, seed}) {
			t.Errorf("record %+v: want lab-b's pool and the machine's two volumes", rec)
		}
		// What the source needs to run the move, and nothing it would read from the target host.
		// The endpoint as the provider dials it: the port written out when the Provider's omits it.
		ep, err := libvirt.ParseEndpoint(s.lab.Endpoint)
		if err != nil {
			t.Fatal(err)
		}
		if rec.URI != ep.String() || rec.Address != "127.0.0.1" || filepath.Base(rec.PoolPath) != target.pool {
			t.Errorf("record uri %q address %q poolPath %q: want the target Provider's endpoint, its host and the pool's directory",
				rec.URI, rec.Address, rec.PoolPath)
		}
		// The source Provider's status is untouched by the target's writes.
		if got.Status.DomainUUID != domainUUID || !slices.Equal(got.Status.Volumes, machineVolumes(&m.Spec)) {
			t.Errorf("the source's status changed: %+v", got.Status)
		}
		volumes(seed, osVol, "tiny.raw")
		out, err := exec.Command("qemu-img", "info", "--output=json", filepath.Join(s.lab.Dir, "pools", target.pool, osVol)).CombinedOutput()
		if err != nil {
			t.Fatalf("qemu-img info: %v: %s", err, out)
		}
		if !strings.Contains(string(out), `"virtual-size": 2147483648`) || !strings.Contains(string(out), "/"+target.pool+"/tiny.raw") {
			t.Errorf("the target's OS disk: want an overlay of the grown size over the target's own base, got %s", out)
		}
		pool, err := s.host.StoragePoolLookupByName(ctx, target.pool)
		if err != nil {
			t.Fatal(err)
		}
		vol, err := s.host.StorageVolLookupByName(ctx, pool, seed)
		if err != nil {
			t.Fatal(err)
		}
		meta, user := s.readSeed(ctx, t, vol)
		if want := "instance-id: " + domainUUID + "\nlocal-hostname: banlieue-system-mover\n"; meta != want || user != userData {
			t.Errorf("the target's seed: meta-data %q user-data %q, want %q and the machine's user-data", meta, user, want)
		}

		report("mv-1", infrav1.MachineMigrationFailed)
		record(gone)
		volumes("tiny.raw")
	})

	t.Run("a volume name taken on the target is refused and left alone", func(t *testing.T) {
		pool, err := s.host.StoragePoolLookupByName(ctx, target.pool)
		if err != nil {
			t.Fatal(err)
		}
		xml, err := renderVolume(volumeSpec{name: osVol, capacity: 1 << 20, format: formatRaw})
		if err != nil {
			t.Fatal(err)
		}
		stray, err := s.host.StorageVolCreateXML(ctx, pool, xml, 0)
		if err != nil {
			t.Fatal(err)
		}
		ask("mv-2")
		got := record(phase("mv-2", infrav1.MachineMigrationTargetFailed))
		if r := got.Status.MigrationTarget; r.Reason != reasonTargetVolumeExists || len(r.Volumes) != 0 || !strings.Contains(r.Message, osVol) {
			t.Errorf("record %+v: want %s naming %s, no volume recorded", r, reasonTargetVolumeExists, osVol)
		}
		report("mv-2", infrav1.MachineMigrationFailed)
		record(gone)
		volumes(osVol, "tiny.raw")
		if err := s.host.StorageVolDelete(ctx, stray); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("after the handover the prepared volumes are the machine's", func(t *testing.T) {
		ask("mv-3")
		record(phase("mv-3", infrav1.MachineMigrationTargetPrepared))
		report("mv-3", infrav1.MachineMigrationSucceeded)
		// The controller's handover, in one update (the CEL rule on providerRef).
		testenv.Eventually(t, 30*time.Second, "the handover", func() error {
			var cur infrav1.LibvirtMachine
			if err := s.env.Client.Get(ctx, key, &cur); err != nil {
				return err
			}
			cur.Spec.Migration = nil
			cur.Spec.ProviderRef = &infrav1.ProviderReference{Name: "lab-b"}
			cur.Spec.Pool = target.pool
			return s.env.Client.Update(ctx, &cur)
		})
		got := record(gone)
		if got.Spec.ProviderRef.Name != "lab-b" {
			t.Errorf("providerRef %+v after the handover", got.Spec.ProviderRef)
		}
		volumes(seed, osVol, "tiny.raw")
	})

	// The machine goes without a provider to tear it down: its finalizer was never set.
	var cur infrav1.LibvirtMachine
	if err := s.env.Client.Get(ctx, key, &cur); err == nil {
		_ = s.env.Client.Delete(ctx, &cur)
	}
}
