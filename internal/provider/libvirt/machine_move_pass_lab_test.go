package libvirt

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "banlieue.io/banlieue/api/infrastructure/v1alpha1"
	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
	"banlieue.io/banlieue/internal/provider/libvirt/hostconn"
	"banlieue.io/banlieue/internal/testenv"
	"banlieue.io/banlieue/internal/testenv/labhost"
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
	l, env, ctx, conns := moveTestSetUp(t, 15*time.Minute)
	startMoveControllers(t, env, conns, true, true)

	pm := newProvidersMove(ctx, t, l, env, "move-lab")
	first := pm.wait(ctx, t, "the machine running on lab-a", 3*time.Minute, machineReady)
	uuid := first.Status.DomainUUID

	for i, step := range []struct{ from, to int }{{0, 1}, {1, 0}} {
		migration := fmt.Sprintf("move-%d", i+1)
		pm.ask(ctx, t, migration, step.to)
		moved := pm.wait(ctx, t, migration+" Succeeded", 8*time.Minute, func(m *infrav1.LibvirtMachine) bool {
			r := m.Status.Migration
			return r != nil && r.MigrationName == migration && (r.Phase == infrav1.MachineMigrationSucceeded || r.Phase == infrav1.MachineMigrationFailed)
		})
		if r := moved.Status.Migration; r.Phase != infrav1.MachineMigrationSucceeded || r.TotalMilliseconds == nil || *r.TotalMilliseconds <= 0 ||
			r.DowntimeMilliseconds == nil {
			t.Fatalf("%s: report %+v, want Succeeded with its timings", migration, r)
		}
		pm.checkMoved(ctx, t, migration, step.from, step.to, uuid)
		pm.handOver(ctx, t, migration, step.to, uuid)
	}
	pm.delete(ctx, t)
}

// TestLiveMoveResumedFromTheTarget is a source provider restarted after the peer-to-peer copy
// it started ended without it (the lab showed libvirtd finishing it when the client is gone,
// TestLiveMoveConvergesAfterProviderKilled): its host alone shows a domain defined and not
// running, which could be a guest lost on both. The target's provider reports the domain
// running on its host (status.migrationTarget.phase Received); the restarted source then
// cleans its host and reports Succeeded, and the handover follows. The copy is run here by the
// test, as the killed provider's libvirtd would finish it.
func TestLiveMoveResumedFromTheTarget(t *testing.T) {
	l, env, ctx, conns := moveTestSetUp(t, 15*time.Minute)
	stopFirst := startMoveControllers(t, env, conns, true, false)
	startMoveControllers(t, env, conns, false, true)

	pm := newProvidersMove(ctx, t, l, env, "move-resume")
	first := pm.wait(ctx, t, "the machine running on lab-a", 3*time.Minute, machineReady)
	uuid := first.Status.DomainUUID
	// The source's provider is gone before the move begins; its part is played by the test.
	if err := stopFirst(); err != nil {
		t.Fatal(err)
	}
	const migration = "move-resumed"
	pm.ask(ctx, t, migration, 1)
	prepared := pm.wait(ctx, t, "the target prepared", 3*time.Minute, func(m *infrav1.LibvirtMachine) bool {
		r := m.Status.MigrationTarget
		return r != nil && r.MigrationName == migration && r.Phase == infrav1.MachineMigrationTargetPrepared
	})
	prepared.Status.Migration = &infrav1.LibvirtMachineMigrationStatus{MigrationName: migration, Phase: infrav1.MachineMigrationMigrating}
	if err := env.Client.Status().Update(ctx, prepared); err != nil {
		t.Fatal(err)
	}
	a := pm.hosts[0]
	dom, err := a.end.c.DomainLookupByName(ctx, pm.domName)
	if err != nil {
		t.Fatal(err)
	}
	var providerA, providerB banlieuev1.Provider
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: pm.ns, Name: pm.providers[0]}, &providerA); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: pm.ns, Name: pm.providers[1]}, &providerB); err != nil {
		t.Fatal(err)
	}
	plan, err := movePlanOf(prepared, &providerA, &providerB)
	if err != nil {
		t.Fatal(err)
	}
	rec := prepared.Status.MigrationTarget
	params, err := migrationParams(ctx, a.end, rec.PoolPath, rec.Address, dom, plan)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := migrate(ctx, a.end, dom, rec.URI, params, nil); err != nil {
		t.Fatalf("the copy: %v", err)
	}
	if _, err := a.end.c.DomainLookupByName(ctx, pm.domName); err != nil {
		t.Fatalf("the source should keep its definition until it is cleaned: %v", err)
	}

	// Unclear from the source alone until the target reports; then done.
	pm.wait(ctx, t, "the target reporting the domain Received", 2*time.Minute, func(m *infrav1.LibvirtMachine) bool {
		r := m.Status.MigrationTarget
		return r != nil && r.MigrationName == migration && r.Phase == infrav1.MachineMigrationTargetReceived
	})
	startMoveControllers(t, env, conns, true, false)
	moved := pm.wait(ctx, t, migration+" Succeeded", 3*time.Minute, func(m *infrav1.LibvirtMachine) bool {
		r := m.Status.Migration
		return r != nil && r.MigrationName == migration && r.Phase != infrav1.MachineMigrationMigrating
	})
	if r := moved.Status.Migration; r.Phase != infrav1.MachineMigrationSucceeded {
		t.Fatalf("report %+v, want Succeeded", r)
	}
	pm.checkMoved(ctx, t, migration, 0, 1, uuid)
	pm.handOver(ctx, t, migration, 1, uuid)
	pm.delete(ctx, t)
}

// TestLiveMoveUnclearTouchesNothing is a source provider restarted mid-move that finds the
// domain running on neither host as far as it can tell: defined and shut off on the source, no
// job, and the target's record not Received. It reports the move under way with a message that
// says so, and neither deletes the source's volumes nor starts the domain again.
func TestLiveMoveUnclearTouchesNothing(t *testing.T) {
	l, env, ctx, conns := moveTestSetUp(t, 10*time.Minute)
	stop := startMoveControllers(t, env, conns, true, false)

	pm := newProvidersMove(ctx, t, l, env, "move-unclear")
	pm.wait(ctx, t, "the machine running on lab-a", 3*time.Minute, machineReady)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	a := pm.hosts[0]
	dom, err := a.end.c.DomainLookupByName(ctx, pm.domName)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.end.c.DomainDestroy(ctx, dom); err != nil {
		t.Fatal(err)
	}
	volumes := poolVolumes(ctx, t, a)
	const migration = "move-unclear"
	pm.ask(ctx, t, migration, 1)
	var cur infrav1.LibvirtMachine
	if err := env.Client.Get(ctx, pm.key, &cur); err != nil {
		t.Fatal(err)
	}
	cur.Status.Migration = &infrav1.LibvirtMachineMigrationStatus{MigrationName: migration, Phase: infrav1.MachineMigrationMigrating}
	cur.Status.MigrationTarget = &infrav1.LibvirtMachineMigrationTargetStatus{MigrationName: migration,
		Provider: infrav1.ProviderReference{Name: pm.providers[1]}, Pool: pm.hosts[1].end.pool.Name, Phase: infrav1.MachineMigrationTargetPrepared}
	if err := env.Client.Status().Update(ctx, &cur); err != nil {
		t.Fatal(err)
	}

	startMoveControllers(t, env, conns, true, false)
	got := pm.wait(ctx, t, "the report saying where the domain is not", 2*time.Minute, func(m *infrav1.LibvirtMachine) bool {
		r := m.Status.Migration
		return r != nil && r.MigrationName == migration && r.Message != ""
	})
	if r := got.Status.Migration; r.Phase != infrav1.MachineMigrationMigrating || !strings.Contains(r.Message, "does not run on the source") {
		t.Errorf("report %+v, want Migrating with a message that says the domain runs on neither host", r)
	}
	// Several passes later (Resync 5 s), still nothing touched.
	time.Sleep(12 * time.Second)
	if state, _, err := a.end.c.DomainState(ctx, dom); err != nil || state == libvirt.DomainRunning {
		t.Errorf("the source's domain: state %v, %v; want it left shut off", state, err)
	}
	if got := poolVolumes(ctx, t, a); !slices.Equal(got, volumes) {
		t.Errorf("the source pool holds %v, want %v as before", got, volumes)
	}
	pm.delete(ctx, t)
}

// moveTestSetUp is how each test of moves through the providers begins: the migration lab, an
// API server, a deadline and the hosts' connections.
func moveTestSetUp(t *testing.T, timeout time.Duration) (moveLab, *testenv.Env, context.Context, *hostconn.Connections) {
	t.Helper()
	l := needMoveLab(t)
	testenv.SetLogger(t)
	env := testenv.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	t.Cleanup(cancel)
	conns := hostconn.NewConnections()
	t.Cleanup(conns.Close)
	return l, env, ctx, conns
}

// startMoveControllers starts a manager of the provider's machine pass (machines) and of the
// target's side of moves (targets), serving every Provider, as a restarted provider would.
func startMoveControllers(t *testing.T, env *testenv.Env, conns *hostconn.Connections, machines, targets bool) (stop func() error) {
	t.Helper()
	mgr := env.NewManager(t)
	if machines {
		if err := (&MachineReconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Connections: conns, Resync: 5 * time.Second}).SetupWithManager(mgr); err != nil {
			t.Fatal(err)
		}
	}
	if targets {
		if err := (&MoveTargetReconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Connections: conns}).SetupWithManager(mgr); err != nil {
			t.Fatal(err)
		}
	}
	return testenv.StartManager(t, mgr)
}

// providersMove is a LibvirtMachine of a tiny guest made on host a of the migration lab,
// served by Providers lab-a and lab-b (hosts a and b) of its namespace.
type providersMove struct {
	env       *testenv.Env
	ns        string
	hosts     []labHost
	providers []string
	domName   string
	key       client.ObjectKey
}

// newProvidersMove makes the Providers, their pools and base image on both hosts, and the
// machine on lab-a; the caller's reconcilers make its domain.
func newProvidersMove(ctx context.Context, t *testing.T, l moveLab, env *testenv.Env, ns string) *providersMove {
	t.Helper()
	labA := testenv.LibvirtLab{Dir: l.Dir, Endpoint: l.A, PKI: filepath.Join(l.Dir, "pki")}
	env.CreateLabNamespace(ctx, t, labA, ns, "move-creds", "move-ca")

	var suffix [4]byte
	_, _ = rand.Read(suffix[:])
	name := "mv-" + hex.EncodeToString(suffix[:])
	pm := &providersMove{env: env, ns: ns, providers: []string{"lab-a", "lab-b"}, domName: ns + "-" + name,
		hosts: []labHost{l.labPool(ctx, t, "a", l.A, name+"-a"), l.labPool(ctx, t, "b", l.B, name+"-b")}}
	// Its NIC has a static address and no macAddress: the target's seed must name the MAC the
	// domain really has. The bridge of host a's network is on the machine's one network stack,
	// which both hosts share.
	nat := labhost.NATNetwork{Name: "mvnet-" + hex.EncodeToString(suffix[:]), Bridge: "mvn" + hex.EncodeToString(suffix[:]), Subnet: "198.18.68."}
	labhost.StartNATNetwork(t, labA, nat)
	base := filepath.Join(t.TempDir(), moveBase)
	if out, err := exec.Command("qemu-img", "create", "-q", "-f", "qcow2", base, fmt.Sprint(moveDiskSize)).CombinedOutput(); err != nil {
		t.Fatalf("qemu-img: %v: %s", err, out)
	}
	img := &banlieuev1.VMImage{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: banlieuev1.VMImageSpec{OSFamily: "linux", OSDistribution: "tiny", OSVersion: "1", Architecture: "amd64",
			Sources: []banlieuev1.ImageSource{{ProviderClass: "libvirt", Kind: banlieuev1.SourceBackingFile, Ref: moveBase}}}}
	env.Create(ctx, t, img)
	for i, h := range pm.hosts {
		if out, err := exec.Command("cp", base, l.HostPath(h.name, h.end.poolPath+"/"+moveBase)).CombinedOutput(); err != nil {
			t.Fatalf("cp: %v: %s", err, out)
		}
		if err := h.end.c.StoragePoolRefresh(ctx, h.end.pool); err != nil {
			t.Fatal(err)
		}
		uri := []string{l.A, l.B}[i]
		p := testenv.LibvirtLab{Endpoint: uri}.Provider(ns, pm.providers[i], "move-creds", "move-ca", banlieuev1.ProviderCapabilities{
			StorageClasses: []banlieuev1.StorageClassMapping{{Name: "lab", Target: map[string]string{targetPool: h.end.pool.Name}}},
			NetworkClasses: []banlieuev1.NetworkClassMapping{{Name: "nat", Target: map[string]string{targetBridge: nat.Bridge}}}})
		env.Create(ctx, t, p)
		img.Status.PerProvider = append(img.Status.PerProvider, banlieuev1.ProviderImageStatus{ProviderName: pm.providers[i], ProviderNamespace: ns,
			Ready: true, Reason: banlieuev1.ReasonReconciled, ResolvedRef: moveBase})
	}
	if err := env.Client.Status().Update(ctx, img); err != nil {
		t.Fatal(err)
	}
	for _, h := range pm.hosts {
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			if d, err := h.end.c.DomainLookupByName(ctx, pm.domName); err == nil {
				_ = h.end.c.DomainDestroy(ctx, d)
				_ = h.end.c.DomainUndefine(ctx, d, libvirt.UndefineNVRAM|libvirt.UndefineTPM)
			}
		})
	}

	m := &infrav1.LibvirtMachine{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: infrav1.LibvirtMachineSpec{ProviderRef: &infrav1.ProviderReference{Name: pm.providers[0]}, Pool: pm.hosts[0].end.pool.Name,
			DomainName: pm.domName, BootSource: infrav1.BootSource{Kind: infrav1.BootBackingVolume, Volume: moveBase},
			VCPUs: 1, MemoryMiB: 128, Firmware: banlieuev1.FirmwareBIOS, Disks: []infrav1.LibvirtDisk{{Name: "os", SizeGiB: 1}},
			Network: []infrav1.LibvirtNetworkInterface{{Name: "nic0", Source: infrav1.NetworkSource{Kind: infrav1.SourceBridge, Name: nat.Bridge},
				IPAM: banlieuev1.IpamSpec{Static: &banlieuev1.StaticIpamConfig{Address: nat.Subnet + "10", Prefix: 24, Gateway: nat.Gateway()}}}}}}
	env.Create(ctx, t, m)
	pm.key = client.ObjectKeyFromObject(m)
	return pm
}

// wait returns the machine once ok holds of it, failing the test after timeout.
func (pm *providersMove) wait(ctx context.Context, t *testing.T, what string, timeout time.Duration, ok func(*infrav1.LibvirtMachine) bool) *infrav1.LibvirtMachine {
	t.Helper()
	var got infrav1.LibvirtMachine
	testenv.Eventually(t, timeout, what, func() error {
		err := pm.env.Client.Get(ctx, pm.key, &got)
		return testenv.Unmet(err == nil && ok(&got), fmt.Sprintf("spec.migration %+v status.migration %+v migrationTarget %+v conditions %+v (%v)",
			got.Spec.Migration, got.Status.Migration, got.Status.MigrationTarget, got.Status.Conditions, err))
	})
	return &got
}

// ask asks the controller's way for the machine to move live to Provider providers[to].
func (pm *providersMove) ask(ctx context.Context, t *testing.T, migration string, to int) {
	t.Helper()
	testenv.Eventually(t, 30*time.Second, "asking "+migration, func() error {
		var cur infrav1.LibvirtMachine
		if err := pm.env.Client.Get(ctx, pm.key, &cur); err != nil {
			return err
		}
		cur.Spec.Migration = &infrav1.LibvirtMachineMigration{MigrationName: migration,
			TargetProvider: infrav1.ProviderReference{Name: pm.providers[to]}, TargetPool: pm.hosts[to].end.pool.Name}
		return pm.env.Client.Update(ctx, &cur)
	})
}

// checkMoved checks a move reported Succeeded left the domain of the same UUID on hosts[to]
// alone and nothing of the machine in the source's pool.
func (pm *providersMove) checkMoved(ctx context.Context, t *testing.T, migration string, from, to int, uuid string) {
	t.Helper()
	checkRunsOnly(ctx, t, pm.hosts[to], pm.hosts[from], libvirt.Domain{Name: pm.domName})
	if d, err := pm.hosts[to].end.c.DomainLookupByName(ctx, pm.domName); err != nil || d.UUID.String() != uuid {
		t.Fatalf("%s: the domain on %s: %v, UUID %s, want %s", migration, pm.hosts[to].name, err, d.UUID, uuid)
	}
	if got := poolVolumes(ctx, t, pm.hosts[from]); !slices.Equal(got, []string{moveBase}) {
		t.Errorf("%s: the source pool holds %v, want the base alone", migration, got)
	}
	// The seed the target rendered names the MAC the moved domain's interface has.
	h := pm.hosts[to]
	d, err := h.end.c.DomainLookupByName(ctx, pm.domName)
	if err != nil {
		t.Fatal(err)
	}
	def, err := readDefinition(ctx, h.end.c, d)
	if err != nil {
		t.Fatal(err)
	}
	macs := interfaceMACs(def)
	vol, err := h.end.c.StorageVolLookupByName(ctx, h.end.pool, seedVolume(pm.domName))
	if err != nil {
		t.Fatal(err)
	}
	if len(macs) != 1 || macs[0] == "" {
		t.Fatalf("%s: the moved domain's interfaces %v, want one with its MAC", migration, macs)
	}
	if net := isoFile(t, downloadSeed(ctx, t, h.end.c, vol), "/network-config"); !strings.Contains(strings.ToLower(net), strings.ToLower(macs[0])) ||
		!strings.Contains(net, "198.18.68.10/24") {
		t.Errorf("%s: the target's seed network-config does not name the interface's MAC %s and its address:\n%s", migration, macs[0], net)
	}
}

// handOver plays the controller's handover in one update and waits for the target's provider
// to adopt the running domain: Ready, the same UUID (not recreated), the record dropped.
func (pm *providersMove) handOver(ctx context.Context, t *testing.T, migration string, to int, uuid string) {
	t.Helper()
	testenv.Eventually(t, 30*time.Second, "the handover of "+migration, func() error {
		var cur infrav1.LibvirtMachine
		if err := pm.env.Client.Get(ctx, pm.key, &cur); err != nil {
			return err
		}
		cur.Spec.Migration = nil
		cur.Spec.ProviderRef = &infrav1.ProviderReference{Name: pm.providers[to]}
		cur.Spec.Pool = pm.hosts[to].end.pool.Name
		return pm.env.Client.Update(ctx, &cur)
	})
	after := pm.wait(ctx, t, "the machine adopted on "+pm.providers[to], 3*time.Minute, func(m *infrav1.LibvirtMachine) bool {
		return machineReady(m) && m.Status.MigrationTarget == nil && m.Spec.ProviderID == providerID(pm.providers[to], uuid)
	})
	if after.Status.DomainUUID != uuid {
		t.Errorf("%s: domain UUID %s after the handover, want %s: the domain was recreated", migration, after.Status.DomainUUID, uuid)
	}
	checkRunsOnly(ctx, t, pm.hosts[to], pm.hosts[1-to], libvirt.Domain{Name: pm.domName})
}

// delete deletes the machine and waits for it to go.
func (pm *providersMove) delete(ctx context.Context, t *testing.T) {
	t.Helper()
	var m infrav1.LibvirtMachine
	if err := pm.env.Client.Get(ctx, pm.key, &m); err != nil {
		t.Fatal(err)
	}
	if err := pm.env.Client.Delete(ctx, &m); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 2*time.Minute, "the machine gone", func() error {
		var cur infrav1.LibvirtMachine
		return testenv.Unmet(client.IgnoreNotFound(pm.env.Client.Get(ctx, pm.key, &cur)) == nil && cur.Name == "", "still there")
	})
}
