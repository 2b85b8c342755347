package libvirt

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "banlieue.io/banlieue/api/infrastructure/v1alpha1"
	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
	"banlieue.io/banlieue/internal/provider/libvirt/hostconn"
	"banlieue.io/banlieue/internal/testenv"
	"banlieue.io/banlieue/pkg/libvirt"
)

// writeCounter counts the writes a reconciler sends to the API server: on the object, and on
// its status subresource.
type writeCounter struct {
	client.Client
	object, status atomic.Int32
}

func (w *writeCounter) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
	w.object.Add(1)
	return w.Client.Patch(ctx, obj, patch, opts...)
}

func (w *writeCounter) Update(ctx context.Context, obj client.Object, opts ...client.UpdateOption) error {
	w.object.Add(1)
	return w.Client.Update(ctx, obj, opts...)
}

func (w *writeCounter) Status() client.SubResourceWriter {
	return statusCounter{SubResourceWriter: w.Client.Status(), n: &w.status}
}

type statusCounter struct {
	client.SubResourceWriter
	n *atomic.Int32
}

func (s statusCounter) Apply(ctx context.Context, obj runtime.ApplyConfiguration, opts ...client.SubResourceApplyOption) error {
	s.n.Add(1)
	return s.SubResourceWriter.Apply(ctx, obj, opts...)
}

func (s statusCounter) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
	s.n.Add(1)
	return s.SubResourceWriter.Patch(ctx, obj, patch, opts...)
}

func (s statusCounter) Update(ctx context.Context, obj client.Object, opts ...client.SubResourceUpdateOption) error {
	s.n.Add(1)
	return s.SubResourceWriter.Update(ctx, obj, opts...)
}

func (w *writeCounter) take() (object, status int32) { return w.object.Swap(0), w.status.Swap(0) }

// rpcCounter counts the libvirt calls of the reconciler's connection, by procedure.
type rpcCounter struct {
	mu sync.Mutex
	n  map[string]int
}

func (r *rpcCounter) observe(procedure string, _ time.Duration, _ error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.n[procedure]++
}

func (r *rpcCounter) take() map[string]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := r.n
	r.n = map[string]int{}
	return n
}

// TestMachineDefineOnceAgainstLabHost drives the reconciler pass by pass (no manager runs it):
// a new machine's first pass makes one API write on the object (finalizer and providerID
// together) and two on its status (the volume record, the status), defines the domain once under
// the UUID it recorded, with the seed built first and no read-back; the pass after it changes
// nothing and writes nothing. A machine whose UUID was recorded by a pass that died before the
// define gets its domain under that UUID.
func TestMachineDefineOnceAgainstLabHost(t *testing.T) {
	var conns *hostconn.Connections
	rpcs := &rpcCounter{n: map[string]int{}}
	ctx, ps := startLabSuite(t, func(_ ctrl.Manager, c *hostconn.Connections) error {
		conns = c
		c.Dialer.Observer = rpcs.observe
		return nil
	})
	s := &machineSuite{providerSuite: ps, pool: "once-" + testenv.RunID(), bootName: "tiny.raw"}
	s.createPool(ctx, t)
	p := s.guideProvider("lab")
	p.Spec.Capabilities = s.capabilities()
	if err := s.env.Client.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	s.createImage(ctx, t, s.pool, s.bootName)
	network := s.pool + "-net"
	if _, err := s.host.NetworkDefineXML(ctx, "<network><name>"+network+"</name></network>"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if n, err := s.host.NetworkLookupByName(context.Background(), network); err == nil {
			_ = s.host.NetworkUndefine(context.Background(), n)
		}
	})
	writes := &writeCounter{Client: s.env.Client}
	r := &MachineReconciler{Client: writes, APIReader: s.env.Client, Connections: conns, recorder: events.NewFakeRecorder(100)}
	pass := func(m *infrav1.LibvirtMachine) {
		t.Helper()
		if _, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(m)}); err != nil {
			t.Fatal(err)
		}
	}
	get := func(m *infrav1.LibvirtMachine) *infrav1.LibvirtMachine {
		t.Helper()
		var got infrav1.LibvirtMachine
		if err := s.env.Client.Get(ctx, client.ObjectKeyFromObject(m), &got); err != nil {
			t.Fatal(err)
		}
		return &got
	}
	defines := func(n map[string]int) int { return n["DOMAIN_DEFINE_XML"] + n["DOMAIN_DEFINE_XML_FLAGS"] }

	m := s.machine(testNamespace, "once-01")
	m.Spec.DesiredPowerState = banlieuev1.PoweredOff
	m.Spec.Network = []infrav1.LibvirtNetworkInterface{{Name: "nic0", Source: infrav1.NetworkSource{Kind: infrav1.SourceNetwork, Name: network},
		IPAM: banlieuev1.IpamSpec{Static: &banlieuev1.StaticIpamConfig{Address: "192.0.2.20", Prefix: 24, Gateway: "192.0.2.1"}}}}
	if err := s.env.Client.Create(ctx, m); err != nil {
		t.Fatal(err)
	}
	// The first connect (and the Provider's reads) are not the machine's work.
	if _, err := conns.Connect(ctx, s.env.Client, p); err != nil {
		t.Fatal(err)
	}
	rpcs.take()

	pass(m)
	object, status := writes.take()
	calls := rpcs.take()
	t.Logf("first pass: %d object writes, %d status writes, libvirt calls %v", object, status, calls)
	if object != 1 || status != 2 {
		t.Errorf("first pass: %d writes on the machine and %d on its status; want 1 (finalizer and providerID) and 2 (volume record, status)", object, status)
	}
	if defines(calls) != 1 || calls["DOMAIN_GET_XML_DESC"] != 0 || calls["STORAGE_POOL_REFRESH"] != 0 {
		t.Errorf("first pass: %d defines, %d definition reads, %d pool refreshes; want 1, 0 and 0", defines(calls),
			calls["DOMAIN_GET_XML_DESC"], calls["STORAGE_POOL_REFRESH"])
	}
	got := get(m)
	id, ok := strings.CutPrefix(got.Spec.ProviderID, "libvirt://lab/")
	dom, err := s.host.DomainLookupByName(ctx, m.Spec.DomainName)
	if err != nil {
		t.Fatal(err)
	}
	if !ok || dom.UUID.String() != id || got.Status.DomainUUID != id || !controllerHasFinalizer(got) {
		t.Errorf("providerID %q, status.domainUuid %q, domain %s, finalizers %v: one UUID throughout",
			got.Spec.ProviderID, got.Status.DomainUUID, dom.UUID, got.Finalizers)
	}
	def, err := readDefinition(ctx, s.host, dom)
	if err != nil {
		t.Fatal(err)
	}
	mac := interfaceMACs(def)[0]
	if mac != generatedMAC(id, 0) {
		t.Errorf("the domain's MAC %q is not the one chosen before the define, %q", mac, generatedMAC(id, 0))
	}
	hostPool, err := s.host.StoragePoolLookupByName(ctx, s.pool)
	if err != nil {
		t.Fatal(err)
	}
	seed, err := s.host.StorageVolLookupByName(ctx, hostPool, seedVolume(m.Spec.DomainName))
	if err != nil {
		t.Fatal(err)
	}
	if metaData, _ := s.readSeed(ctx, t, seed); !strings.Contains(metaData, "instance-id: "+id+"\n") {
		t.Errorf("seed meta-data %q, want instance-id %s", metaData, id)
	}
	if nc := s.readSeedFile(ctx, t, seed, "/network-config"); !strings.Contains(nc, mac) {
		t.Errorf("network-config does not name the domain's MAC %s:\n%s", mac, nc)
	}

	// Nothing changed: the next pass writes nothing, and redefines under the same UUID.
	pass(m)
	object, status = writes.take()
	calls = rpcs.take()
	t.Logf("second pass: %d object writes, %d status writes, libvirt calls %v", object, status, calls)
	if object != 0 || status != 0 {
		t.Errorf("a pass that changed nothing wrote %d times on the machine and %d on its status", object, status)
	}
	if calls["CONNECT_GET_CAPABILITIES"] != 0 {
		t.Errorf("the second pass read the host's capabilities again (%d): they are read once per connection", calls["CONNECT_GET_CAPABILITIES"])
	}
	if again, err := s.host.DomainLookupByName(ctx, m.Spec.DomainName); err != nil || again.UUID != dom.UUID {
		t.Errorf("after the second pass: %v %v, want UUID %s", again.UUID, err, dom.UUID)
	}

	// A pass died after the identity write: UUID and finalizer recorded, nothing on the host.
	const recorded = "5d8b8f0e-1c1f-4a8e-9a59-3b1d6f0c0a11"
	crashed := s.machine(testNamespace, "once-02")
	crashed.Spec.DesiredPowerState = banlieuev1.PoweredOff
	crashed.Spec.ProviderID = "libvirt://lab/" + recorded
	crashed.Finalizers = []string{infrav1.FinalizerLibvirtMachine}
	if err := s.env.Client.Create(ctx, crashed); err != nil {
		t.Fatal(err)
	}
	pass(crashed)
	object, _ = writes.take()
	if object != 0 {
		t.Errorf("a machine with its UUID and finalizer recorded wrote %d times on the object", object)
	}
	if d, err := s.host.DomainLookupByName(ctx, crashed.Spec.DomainName); err != nil || d.UUID.String() != recorded {
		t.Errorf("domain %v (%v), want it defined under the recorded UUID %s", d.UUID, err, recorded)
	}

	for _, mm := range []*infrav1.LibvirtMachine{m, crashed} {
		if err := s.env.Client.Delete(ctx, mm); err != nil {
			t.Fatal(err)
		}
		pass(mm)
		if _, err := s.host.DomainLookupByName(ctx, mm.Spec.DomainName); !libvirt.IsNotFound(err) {
			t.Errorf("domain %s after teardown: %v", mm.Spec.DomainName, err)
		}
	}
}
