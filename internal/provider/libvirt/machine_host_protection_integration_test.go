package libvirt

import (
	"context"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	infrav1 "banlieue.io/banlieue/api/infrastructure/v1alpha1"
	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
	"banlieue.io/banlieue/internal/provider/libvirt/hostconn"
	"banlieue.io/banlieue/internal/testenv"
)

// blackHole accepts TCP connections and never answers, as a frozen libvirtd or a black-holed
// TLS port does: every dial to it lasts the dial timeout. It counts the dials.
type blackHole struct {
	port  int
	dials atomic.Int32
}

func newBlackHole(t *testing.T) *blackHole {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b := &blackHole{port: l.Addr().(*net.TCPAddr).Port}
	var mu sync.Mutex
	var held []net.Conn
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			b.dials.Add(1)
			mu.Lock()
			held = append(held, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		_ = l.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range held {
			_ = c.Close()
		}
	})
	return b
}

// TestHostProtection: one Provider's host is a black hole, another's the lab host. With only
// two workers, the dead host's machines are refused fast once its breaker opens (no dial until
// the cool-down, then one probe), report HostUnavailable, and the live host's machines, created
// after them, are realised meanwhile.
func TestHostProtection(t *testing.T) {
	const (
		dialTimeout = 2 * time.Second
		coolDown    = 8 * time.Second
		failures    = 2
	)
	ctx, ps := startLabSuite(t, func(mgr ctrl.Manager, conns *hostconn.Connections) error {
		conns.Dialer.Timeout = dialTimeout
		conns.Breaker = hostconn.Breaker{Failures: failures, CoolDown: coolDown}
		conns.Limits = hostconn.Limits{DomainOperations: 1}
		conns.Observer = HostObserver()
		r := &MachineReconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Connections: conns,
			Resync: time.Second, Workers: 2}
		return r.SetupWithManager(mgr)
	})
	run := testenv.RunID()
	s := &machineSuite{providerSuite: ps, pool: fmt.Sprintf("protect-%s", run), bootName: "tiny.raw"}
	s.createPool(ctx, t)
	hole := newBlackHole(t)
	live := s.guideProvider("lab")
	live.Spec.Capabilities = s.capabilities()
	dead := s.guideProvider("dead")
	dead.Spec.Capabilities = s.capabilities()
	dead.Spec.Connection.Endpoint = fmt.Sprintf("qemu+tls://127.0.0.1:%d/system", hole.port)
	for _, p := range []*banlieuev1.Provider{live, dead} {
		if err := s.env.Client.Create(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	img := &banlieuev1.VMImage{
		ObjectMeta: metav1.ObjectMeta{Name: s.pool},
		Spec: banlieuev1.VMImageSpec{OSFamily: "linux", OSDistribution: "tiny", OSVersion: "1", Architecture: "amd64",
			Sources: []banlieuev1.ImageSource{{ProviderClass: "libvirt", Kind: banlieuev1.SourceBackingFile, Ref: s.bootName}}},
	}
	if err := s.env.Client.Create(ctx, img); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"lab", "dead"} {
		img.Status.PerProvider = append(img.Status.PerProvider, banlieuev1.ProviderImageStatus{
			ProviderName: p, ProviderNamespace: testNamespace, Ready: true, Reason: banlieuev1.ReasonReconciled, ResolvedRef: s.bootName})
	}
	if err := s.env.Client.Status().Update(ctx, img); err != nil {
		t.Fatal(err)
	}

	var deadMachines, liveMachines []*infrav1.LibvirtMachine
	for i := range 6 {
		m := s.machine(testNamespace, fmt.Sprintf("hp-dead-%s-%d", run, i))
		m.Spec.ProviderRef.Name = "dead"
		deadMachines = append(deadMachines, m)
	}
	for i := range 3 {
		liveMachines = append(liveMachines, s.machine(testNamespace, fmt.Sprintf("hp-live-%s-%d", run, i)))
	}
	start := time.Now()
	for _, m := range append(append([]*infrav1.LibvirtMachine{}, deadMachines...), liveMachines...) {
		if err := s.env.Client.Create(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		for _, m := range liveMachines {
			_ = s.env.Client.Delete(context.Background(), m)
		}
		for _, m := range liveMachines {
			s.waitGone(context.Background(), t, client.ObjectKeyFromObject(m))
		}
	})

	// Without the breaker the six dead machines, retried every second, would each hold a
	// worker for the whole dial timeout: the live ones would wait behind them.
	for _, m := range liveMachines {
		s.waitMachine(ctx, t, client.ObjectKeyFromObject(m), 60*time.Second, machineReady)
	}
	t.Logf("live machines realised %s after creation; dead host dialled %d times", time.Since(start).Round(time.Millisecond), hole.dials.Load())
	for _, m := range deadMachines {
		got := s.waitMachine(ctx, t, client.ObjectKeyFromObject(m), 30*time.Second, func(m *infrav1.LibvirtMachine) bool {
			c := meta.FindStatusCondition(m.Status.Conditions, banlieuev1.ConditionReady)
			return c != nil && c.Reason == infrav1.ReasonHostUnavailable
		})
		msg := meta.FindStatusCondition(got.Status.Conditions, banlieuev1.ConditionReady).Message
		if !strings.Contains(msg, `Provider "banlieue-system/dead"`) || !strings.Contains(msg, "circuit breaker open") {
			t.Errorf("%s: Ready message %q: want the Provider and the breaker named", m.Name, msg)
		}
	}
	if got := hostGauge(t, "banlieue_libvirt_host_breaker_state", "dead", ""); got != float64(hostconn.BreakerOpen) &&
		got != float64(hostconn.BreakerHalfOpen) {
		t.Errorf("banlieue_libvirt_host_breaker_state of the dead host = %v, want open (2) or probing (1)", got)
	}
	if got := hostGauge(t, "banlieue_libvirt_host_breaker_state", "lab", ""); got != float64(hostconn.BreakerClosed) {
		t.Errorf("banlieue_libvirt_host_breaker_state of the live host = %v, want closed (0)", got)
	}

	// While open, the dead host is not dialled, however often its machines are retried; after
	// the cool-down, one probe goes, and fails, and the breaker holds off again.
	opened := hole.dials.Load()
	if opened != failures && opened != failures+1 {
		t.Fatalf("the dead host was dialled %d times before its breaker held; want %d (or one probe more)", opened, failures)
	}
	testenv.Eventually(t, 2*coolDown+2*dialTimeout, "one probe dial after the cool-down", func() error {
		return testenv.Unmet(hole.dials.Load() > opened, fmt.Sprintf("%d dials", hole.dials.Load()))
	})
	probed := hole.dials.Load()
	time.Sleep(coolDown / 2)
	if got := hole.dials.Load(); got != probed {
		t.Errorf("the dead host was dialled %d times within half a cool-down of the probe; want none", got-probed)
	}
	// Every slot taken is given back: the live machines' resyncs (every second) are in flight
	// now and then, so the gauge is waited for, and a leaked slot would keep it above 0.
	testenv.Eventually(t, 10*time.Second, "the live host's domain operations in flight back to 0", func() error {
		got := hostGauge(t, "banlieue_libvirt_host_operations_in_flight", "lab", hostconn.OperationDomain)
		return testenv.Unmet(got == 0, fmt.Sprintf("%v in flight", got))
	})
}

// hostGauge reads one host series of testNamespace's Provider name from the registry the
// metrics endpoint serves; op is empty for the breaker's.
func hostGauge(t *testing.T, family, name string, op hostconn.Operation) float64 {
	t.Helper()
	families, err := metrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != family {
			continue
		}
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["namespace"] == testNamespace && labels["name"] == name && labels["operation"] == string(op) {
				return m.GetGauge().GetValue()
			}
		}
	}
	t.Fatalf("no %s series for Provider %s/%s %s", family, testNamespace, name, op)
	return 0
}
