package libvirt

import (
	"context"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "banlieue.io/banlieue/api/infrastructure/v1alpha1"
	"banlieue.io/banlieue/internal/provider/libvirt/hostconn"
	"banlieue.io/banlieue/internal/testenv"
	"banlieue.io/banlieue/pkg/libvirt"
)

// healBound is what an out-of-band change may take to be healed through events (the issue's
// p99 target): far below the resync a Ready machine waits for otherwise (30 s for a running
// machine without addresses, as these have no NIC) and below the 5 s error retry.
const healBound = 3 * time.Second

// startBound is how long QEMU may take, once the provider has started the domain again, until
// the domain runs: a tiny guest under emulation on two loaded cores.
const startBound = 60 * time.Second

// TestMachineEventsAgainstLabHost runs the Provider and LibvirtMachine controllers with the
// production requeue intervals (no Resync): only the host's domain events can bring a machine
// back within healBound.
func TestMachineEventsAgainstLabHost(t *testing.T) {
	var conns *hostconn.Connections
	ctx, ps := startLabSuite(t, func(mgr ctrl.Manager, c *hostconn.Connections) error {
		conns = c
		if err := (&ProviderReconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Connections: c}).SetupWithManager(mgr); err != nil {
			return err
		}
		return (&MachineReconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Connections: c}).SetupWithManager(mgr)
	})
	s := &machineSuite{providerSuite: ps, pool: "events-" + testenv.RunID(), bootName: "tiny.raw"}
	s.createPool(ctx, t)
	p := s.guideProvider("lab")
	p.Spec.Capabilities = s.capabilities()
	if err := s.env.Client.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	s.createImage(ctx, t, s.pool, s.bootName)
	m := s.machine(testNamespace, "drift")
	if err := s.env.Client.Create(ctx, m); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.deleteAndWait(context.Background(), t, m) })
	s.waitMachine(ctx, t, client.ObjectKeyFromObject(m), 60*time.Second, machineReady)
	name := m.Spec.DomainName
	key := client.ObjectKeyFromObject(m)

	t.Run("a domain destroyed by hand is started again", func(t *testing.T) {
		s.outOfBand(ctx, t, key, name, false)
	})
	t.Run("a domain undefined and destroyed by hand is defined and started again", func(t *testing.T) {
		s.outOfBand(ctx, t, key, name, true)
	})
	t.Run("after libvirtd restarts, the new connection is subscribed again", func(t *testing.T) {
		pid := s.lab.DaemonPID(t)
		if err := exec.Command("kill", "-9", strconv.Itoa(pid)).Run(); err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command(filepath.Join(testenv.RepoRoot(), "hack", "libvirt-lab.sh"), "start", s.lab.Dir).CombinedOutput()
		if err != nil {
			t.Fatalf("restarting libvirtd: %v\n%s", err, out)
		}
		s.host = s.dialHost(t)
		// The Provider controller notices the lost connection and dials again at once; that dial
		// subscribes.
		testenv.Eventually(t, 60*time.Second, "the pool's new connection subscribed to domain events", func() error {
			return testenv.Unmet(conns.Watching(client.ObjectKeyFromObject(p)), "not watching")
		})
		s.outOfBand(ctx, t, key, name, true)
	})
}

// outOfBand destroys (with undefine, undefines and destroys) the machine's domain through the test's own
// connection, as virsh would, and waits for the provider to run a domain of that name again. The
// machine is settled first: Ready for its current generation (the providerID patch bumps it, and
// the pass that follows must not be the one that heals), so no pass is due before the resync.
func (s *machineSuite) outOfBand(ctx context.Context, t *testing.T, key client.ObjectKey, name string, undefine bool) {
	t.Helper()
	s.waitMachine(ctx, t, key, 60*time.Second, func(m *infrav1.LibvirtMachine) bool {
		return machineReady(m) && m.Status.ObservedGeneration == m.Generation
	})
	dom, err := s.host.DomainLookupByName(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	if st, _, err := s.host.DomainState(ctx, dom); err != nil || st != libvirt.DomainRunning {
		t.Fatalf("domain %s before the test: %v, %v; want Running", name, st, err)
	}
	// Undefined first, the running domain turns transient and the destroy removes it whole; the
	// other order races the provider, which may start the stopped domain between the two calls.
	if undefine {
		if err := s.host.DomainUndefine(ctx, dom, libvirt.UndefineManagedSave|libvirt.UndefineNVRAM|libvirt.UndefineTPM); err != nil {
			t.Fatal(err)
		}
	}
	start := time.Now()
	if err := s.host.DomainDestroy(ctx, dom); err != nil {
		t.Fatal(err)
	}
	destroyed := time.Since(start)
	changed := time.Now()
	// The bound is on the provider's reaction: a domain of that name started again, running or
	// still paused by libvirtd while QEMU starts up. QEMU's own start under emulation on a loaded
	// machine is not the provider's, so running may follow later, within startBound.
	var started time.Duration
	for {
		got, err := s.host.DomainLookupByName(ctx, name)
		if err == nil && got.ID > 0 && got.ID != dom.ID {
			st, reason, err := s.host.DomainState(ctx, got)
			if err == nil && started == 0 && (st == libvirt.DomainRunning || st == libvirt.DomainPaused && reason == libvirt.DomainPausedStartingUp) {
				started = time.Since(changed)
			}
			if err == nil && st == libvirt.DomainRunning {
				t.Logf("DOMAIN_DESTROY took %v; domain %s started again (ID %d → %d) %v after the change, running %v after it",
					destroyed.Round(time.Millisecond), name, dom.ID, got.ID, started.Round(time.Millisecond), time.Since(changed).Round(time.Millisecond))
				return
			}
		} else if err != nil && !libvirt.IsNotFound(err) {
			t.Fatal(err)
		}
		if started == 0 && time.Since(changed) > healBound {
			t.Fatalf("domain %s not started again within %v of the out-of-band change", name, healBound)
		}
		if time.Since(changed) > startBound {
			t.Fatalf("domain %s started again %v after the out-of-band change but not running within %v", name, started, startBound)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
