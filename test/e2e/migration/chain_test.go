package migration

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
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

// chain is one test's run of the whole chain: a real API server, banlieue-controller and the
// libvirt provider's Provider, machine and move-target controllers, a namespace whose Providers
// lab-a and lab-b are the two hosts of hack/migration-lab.sh, and a pool of the test's own on
// each host.
type chain struct {
	env   *testenv.Env
	lab   labhost.MigrationLab
	ns    string
	name  string             // the test's VM, image, class and pools are named from it
	hosts map[string]labHost // by Provider name
	uris  map[string]string  // by Provider name
	// stopController stops banlieue-controller, which runs in a manager of its own so that a
	// test can stop it and start another (restartController) while the providers go on.
	stopController func() error
}

// other is the Provider a VM on the given one moves to.
var other = map[string]string{"lab-a": "lab-b", "lab-b": "lab-a"}

// startChain starts the chain for one test in namespace ns, with a NAT network started on host
// a first when nat is set. The domains of the namespace are removed from both hosts after the
// manager has stopped (a running provider would define them again), then the pools with what
// they hold, then the network.
func startChain(t *testing.T, ns string, nat *labhost.NATNetwork) (context.Context, *chain) {
	l := labhost.NeedMigrationLab(t)
	testenv.SetLogger(t)
	if nat != nil {
		labhost.StartNATNetwork(t, l.LabOf(l.A), *nat)
	}
	env := testenv.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	t.Cleanup(cancel)
	var suffix [4]byte
	_, _ = rand.Read(suffix[:])
	ch := &chain{env: env, lab: l, ns: ns, name: "vm-" + hex.EncodeToString(suffix[:]),
		uris: map[string]string{"lab-a": l.A, "lab-b": l.B}}
	ch.hosts = map[string]labHost{"lab-a": labPool(ctx, t, l, "a", l.A, ch.name+"-a"), "lab-b": labPool(ctx, t, l, "b", l.B, ch.name+"-b")}
	for _, h := range ch.hosts {
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			labhost.RemoveDomains(ctx, h.c, ns+"-")
		})
	}

	ch.restartController(t)
	mgr := env.NewManager(t)
	conns := hostconn.NewConnections()
	t.Cleanup(conns.Close)
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
	env.CreateLabNamespace(ctx, t, l.LabOf(l.A), ns, "chain-creds", "chain-ca")
	return ctx, ch
}

// restartController stops banlieue-controller's manager, if one runs, and starts a new one: the
// new process of a controller that crashed, with nothing of the old one's memory.
func (ch *chain) restartController(t *testing.T) {
	t.Helper()
	if ch.stopController != nil {
		if err := ch.stopController(); err != nil {
			t.Errorf("stopping banlieue-controller: %v", err)
		}
	}
	mgr := ch.env.NewManager(t)
	if err := controller.Setup(mgr, controller.Options{}); err != nil {
		t.Fatal(err)
	}
	ch.stopController = testenv.StartManager(t, mgr)
}

// provider registers the host behind Provider p (lab-a or lab-b) with caps.
func (ch *chain) provider(ctx context.Context, t *testing.T, p string, caps banlieuev1.ProviderCapabilities) {
	t.Helper()
	ch.env.Create(ctx, t, ch.lab.LabOf(ch.uris[p]).Provider(ch.ns, p, "chain-creds", "chain-ca", caps))
}

// ready waits for the VM to be Ready and powered on, and returns it.
func (ch *chain) ready(ctx context.Context, t *testing.T, what string) *banlieuev1.VirtualMachine {
	t.Helper()
	var vm banlieuev1.VirtualMachine
	testenv.Eventually(t, 4*time.Minute, what, func() error {
		err := ch.env.Client.Get(ctx, client.ObjectKey{Namespace: ch.ns, Name: ch.name}, &vm)
		return testenv.Unmet(err == nil && vm.Status.Phase == banlieuev1.VMPhaseReady && vm.Status.ObservedPowerState == banlieuev1.PoweredOn,
			fmt.Sprintf("phase %s power %s scheduled %+v conditions %+v (%v)", vm.Status.Phase, vm.Status.ObservedPowerState, vm.Status.Scheduled, vm.Status.Conditions, err))
	})
	return &vm
}

func (ch *chain) machine(ctx context.Context, t *testing.T) *infrav1.LibvirtMachine {
	t.Helper()
	var m infrav1.LibvirtMachine
	if err := ch.env.Client.Get(ctx, client.ObjectKey{Namespace: ch.ns, Name: ch.name}, &m); err != nil {
		t.Fatal(err)
	}
	return &m
}

// move moves the running VM to the other host with a VirtualMachineMigration named after step,
// and checks what a live move promises: Succeeded with its timings, the VM Ready on the target
// with its machine handed over (same machine, same domain UUID: never recreated), the domain
// running on the target alone, and the source's pool holding the base alone. It returns the
// migration and the VM as it is then.
func (ch *chain) move(ctx context.Context, t *testing.T, vm *banlieuev1.VirtualMachine, step int, base string) (*banlieuev1.VirtualMachineMigration, *banlieuev1.VirtualMachine) {
	t.Helper()
	return ch.moveWith(ctx, t, vm, step, base, nil)
}

// moveWith is move with during, when set, called once the migration is created, before its end
// is awaited.
func (ch *chain) moveWith(ctx context.Context, t *testing.T, vm *banlieuev1.VirtualMachine, step int, base string,
	during func(migration string)) (*banlieuev1.VirtualMachineMigration, *banlieuev1.VirtualMachine) {
	t.Helper()
	first := ch.machine(ctx, t)
	from := vm.Status.Scheduled.ProviderName
	to := other[from]
	mv := fmt.Sprintf("%s-move-%d", ch.name, step)
	ch.env.Create(ctx, t, &banlieuev1.VirtualMachineMigration{ObjectMeta: metav1.ObjectMeta{Name: mv, Namespace: ch.ns},
		Spec: banlieuev1.VirtualMachineMigrationSpec{VMName: ch.name, TargetProvider: &banlieuev1.MigrationProviderReference{Name: to},
			TimeoutSeconds: ptr.To[int32](900)}})
	if during != nil {
		during(mv)
	}
	var m banlieuev1.VirtualMachineMigration
	testenv.Eventually(t, 10*time.Minute, mv+" final", func() error {
		err := ch.env.Client.Get(ctx, client.ObjectKey{Namespace: ch.ns, Name: mv}, &m)
		return testenv.Unmet(err == nil && m.Status.Phase.Final(), fmt.Sprintf("%+v (%v)", m.Status, err))
	})
	if m.Status.Phase != banlieuev1.MigrationSucceeded || ptr.Deref(m.Status.TotalMilliseconds, 0) <= 0 || m.Status.DowntimeMilliseconds == nil {
		t.Fatalf("%s: %+v, want Succeeded with its timings", mv, m.Status)
	}
	t.Logf("%s: %s to %s in %d ms, downtime %d ms", mv, from, to, *m.Status.TotalMilliseconds, *m.Status.DowntimeMilliseconds)
	vm = ch.ready(ctx, t, mv+": the VM running on "+to)
	testenv.Eventually(t, 2*time.Minute, mv+": the machine on "+to, func() error {
		m := ch.machine(ctx, t)
		return testenv.Unmet(m.Spec.ProviderRef.Name == to && m.Spec.Migration == nil && m.Status.MigrationTarget == nil &&
			vm.Status.Scheduled.ProviderName == to, fmt.Sprintf("providerRef %+v, request %+v, record %+v, VM on %s",
			m.Spec.ProviderRef, m.Spec.Migration, m.Status.MigrationTarget, vm.Status.Scheduled.ProviderName))
	})
	if now := ch.machine(ctx, t); now.UID != first.UID || now.Status.DomainUUID != first.Status.DomainUUID {
		t.Fatalf("%s: machine %s with domain %s, want %s with %s: recreated", mv, now.UID, now.Status.DomainUUID, first.UID, first.Status.DomainUUID)
	}
	checkRunsOnly(ctx, t, ch.hosts[to], ch.hosts[from], ch.domain())
	if got := poolVolumes(ctx, t, ch.hosts[from]); !slices.Equal(got, []string{base}) {
		t.Errorf("%s: %s's pool holds %v, want the base alone", mv, from, got)
	}
	return &m, vm
}

// imageOnHosts records the image as present on both Providers' hosts as base, as the image
// controller would once it found the volume: a status update on a fresh read, retried on a
// conflict with the controllers that write the image's status too.
func (ch *chain) imageOnHosts(ctx context.Context, t *testing.T, base string) {
	t.Helper()
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var img banlieuev1.VMImage
		if err := ch.env.Client.Get(ctx, client.ObjectKey{Name: ch.name}, &img); err != nil {
			return err
		}
		img.Status.PerProvider = nil
		for _, p := range []string{"lab-a", "lab-b"} {
			img.Status.PerProvider = append(img.Status.PerProvider, banlieuev1.ProviderImageStatus{ProviderName: p, ProviderNamespace: ch.ns,
				Ready: true, Reason: banlieuev1.ReasonReconciled, ResolvedRef: base})
		}
		return ch.env.Client.Status().Update(ctx, &img)
	}); err != nil {
		t.Fatalf("recording image %s on both hosts: %v", ch.name, err)
	}
}

// lookup is the VM's domain on h, whole (the agent's calls need its UUID).
func (ch *chain) lookup(ctx context.Context, t *testing.T, h labHost) libvirt.Domain {
	t.Helper()
	d, err := h.c.DomainLookupByName(ctx, ch.domain().Name)
	if err != nil {
		t.Fatalf("host %s: %v", h.name, err)
	}
	return d
}

// domain is the VM's domain, by name.
func (ch *chain) domain() libvirt.Domain { return libvirt.Domain{Name: ch.ns + "-" + ch.name} }
