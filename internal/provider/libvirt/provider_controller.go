package libvirt

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
	"banlieue.io/banlieue/internal/app"
	"banlieue.io/banlieue/internal/provider/libvirt/hostconn"
	"banlieue.io/banlieue/internal/provider/providerkit"
	"banlieue.io/banlieue/pkg/libvirt"
)

// ClassName is the ProviderClass this backend serves.
const ClassName = "libvirt"

// hostArch is the guest architecture whose virtualisation type decides kvm or qemu.
const hostArch = "x86_64"

// probeTimeout bounds one probe of the host, connect included.
const probeTimeout = 60 * time.Second

// ProviderReconciler verifies a libvirt host and publishes its single failure domain.
type ProviderReconciler struct {
	Client client.Client
	// APIReader reads Secrets and ConfigMaps uncached: the provider may only get them by name.
	APIReader   client.Reader
	Connections *hostconn.Connections
	// Resync is how often a healthy Provider is probed again; zero means every 30 s. Tests
	// shorten it to watch a host change without touching the object.
	Resync time.Duration
	// Workers is how many Providers are probed at once (--workers); zero means one.
	Workers int

	// lost receives a Provider whose probed connection ended by itself (keepalive declared
	// libvirtd dead, or it hung up), so the Provider says so at once rather than at the next
	// resync. watched is the connection each Provider's last good probe used.
	lost    chan event.GenericEvent
	mu      sync.Mutex
	watched map[types.NamespacedName]*libvirt.Client
	// report publishes what a probe found (providerkit); set up with the manager.
	report *providerkit.Reporter
}

// SetupWithManager registers the reconciler.
func (r *ProviderReconciler) SetupWithManager(mgr ctrl.Manager) error {
	r.lost = make(chan event.GenericEvent, 64)
	r.report = &providerkit.Reporter{Client: r.Client, Class: ClassName, Recorder: mgr.GetEventRecorder(RecorderName),
		Statuses: &providerkit.Statuses{FieldManager: banlieuev1.FieldManagerProviderLibvirt}}
	b := ctrl.NewControllerManagedBy(mgr).Named("provider").
		For(&banlieuev1.Provider{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		WatchesRawSource(source.Channel(r.lost, &handler.EnqueueRequestForObject{})).
		WithOptions(app.ControllerOptions(r.Workers))
	return b.Complete(r)
}

// ProviderFieldSelector narrows the manager's cache of Providers to one name, server-side.
func ProviderFieldSelector(name string) fields.Selector {
	return fields.OneTermEqualSelector("metadata.name", name)
}

// MachineFieldSelector selects the LibvirtMachines whose spec.providerRef.name is name, in every
// namespace: a field the CRD declares selectable (api/infrastructure/v1alpha1). Machines of
// same-named Providers in other namespaces are selected too; serves tells them apart.
func MachineFieldSelector(name string) fields.Selector {
	return fields.OneTermEqualSelector("spec.providerRef.name", name)
}

// Reconcile probes the host and writes the Provider's status.
func (r *ProviderReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	pp, gone, res, err := r.report.Lookup(ctx, req.NamespacedName)
	if gone {
		r.Connections.ForgetHost(req.NamespacedName)
		_ = r.connectionLost(req.NamespacedName) // drops the connection Forget just closed
	}
	if pp == nil {
		return res, err
	}
	p := *pp

	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	if err := r.connectionLost(req.NamespacedName); err != nil {
		// Published before redialling: a redial to a host that stopped answering (frozen, or
		// gone from the network) lasts the whole dial timeout, with the Provider still Ready.
		log.FromContext(ctx).Info("provider host unavailable", "reason", banlieuev1.ReasonConnectFailed, "error", err.Error())
		if err := r.report.WriteFailed(ctx, &p, banlieuev1.ReasonConnectFailed, err.Error()); err != nil {
			return ctrl.Result{}, err
		}
	}
	host, err := r.probe(ctx, &p)
	if err != nil {
		reason := banlieuev1.ReasonConnectFailed
		var credErr *hostconn.CredentialsError
		if errors.As(err, &credErr) {
			reason = banlieuev1.ReasonCredentialsUnavailable
		}
		log.FromContext(ctx).Info("provider host unavailable", "reason", reason, "error", err.Error())
		if err := r.report.WriteFailed(ctx, &p, reason, err.Error()); err != nil {
			return ctrl.Result{}, err
		}
		var specErr *hostconn.SpecError
		if errors.As(err, &specErr) {
			// A wrong scheme or a refused option will not fix itself; an edit of the Provider
			// triggers the next reconcile, so retrying on a timer would only repeat the error.
			return ctrl.Result{}, reconcile.TerminalError(err)
		}
		return ctrl.Result{RequeueAfter: cmp.Or(hostRetry(err), min(app.ErrorRetry, cmp.Or(r.Resync, app.ErrorRetry)))}, nil
	}

	n := narrowCapabilities(p.Spec.Capabilities, host)
	ready := "all declared capabilities are present on the host"
	if host.domainType == "qemu" {
		ready += "; the host has no KVM, so its domains run emulated (domain type qemu)"
	}
	if err := r.report.WriteProbed(ctx, &p, providerkit.Probe{
		FailureDomains: []banlieuev1.FailureDomain{failureDomain(&p, host, n)},
		Reachable:      fmt.Sprintf("connected; %d pool(s), %d network(s)", len(host.pools), len(host.networks)),
		Missing:        n.missing,
		Ready:          ready,
	}); err != nil {
		return ctrl.Result{}, err
	}
	return ctrl.Result{RequeueAfter: cmp.Or(r.Resync, app.RequeueDefault)}, nil
}

// probe lists the host's pools, networks and interfaces and decides the domain type.
func (r *ProviderReconciler) probe(ctx context.Context, p *banlieuev1.Provider) (hostInventory, error) {
	key := client.ObjectKeyFromObject(p)
	c, err := r.Connections.ConnectFresh(ctx, r.APIReader, p)
	if err != nil {
		return hostInventory{}, err
	}
	host, err := inventory(ctx, c, mappedPools(p.Spec.Capabilities))
	if err != nil {
		// The connection may be the problem; the next attempt dials afresh.
		r.Connections.Forget(key)
		return hostInventory{}, err
	}
	r.watch(key, c)
	return host, nil
}

// watch remembers c as the Provider's connection and, the first time, enqueues the Provider when
// c ends by itself. Keepalive notices a silent libvirtd on every connection, but nothing else
// would tell the Provider before its next probe.
func (r *ProviderReconciler) watch(key types.NamespacedName, c *libvirt.Client) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.watched[key] == c {
		return
	}
	if r.watched == nil {
		r.watched = map[types.NamespacedName]*libvirt.Client{}
	}
	r.watched[key] = c
	if r.lost == nil {
		return // not set up with a manager: the next probe reports it
	}
	go func() {
		<-c.Done()
		if closedOnPurpose(c.Err()) {
			return
		}
		provider := &banlieuev1.Provider{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}
		select {
		case r.lost <- event.GenericEvent{Object: provider}:
		default: // a backlog of lost connections: the resync probes this Provider anyway
		}
	}()
}

// connectionLost forgets the Provider's watched connection once it has ended and returns why,
// unless the pool closed it on purpose (a failed probe, new credentials, shutdown).
func (r *ProviderReconciler) connectionLost(key types.NamespacedName) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	c, ok := r.watched[key]
	if !ok || c.Err() == nil {
		return nil
	}
	delete(r.watched, key)
	if closedOnPurpose(c.Err()) {
		return nil
	}
	return c.Err()
}

// closedOnPurpose tells a connection closed by its owner (Client.Close) from one that broke.
func closedOnPurpose(err error) bool {
	var ce *libvirt.ConnError
	return errors.As(err, &ce) && errors.Is(ce.Err, libvirt.ErrConnectionClosed)
}

// inventory reads what the host offers. Its cost is bounded whatever the host runs: five calls,
// and one STORAGE_POOL_GET_INFO per pool the Provider maps (mapped).
func inventory(ctx context.Context, c *libvirt.Client, mapped map[string]bool) (hostInventory, error) {
	var host hostInventory
	var err error
	if host.libVersion, err = c.LibVersion(ctx); err != nil {
		return host, fmt.Errorf("reading the libvirt version: %w", err)
	}
	pools, err := c.ListAllStoragePools(ctx)
	if err != nil {
		return host, fmt.Errorf("listing storage pools: %w", err)
	}
	for _, pool := range pools {
		host.pools = append(host.pools, pool.Name)
		if !mapped[pool.Name] {
			continue
		}
		info, err := c.StoragePoolGetInfo(ctx, pool)
		if err != nil {
			return host, fmt.Errorf("reading the size of storage pool %s: %w", pool.Name, err)
		}
		if info.State == libvirt.StoragePoolRunning {
			if host.poolSizes == nil {
				host.poolSizes = map[string]libvirt.StoragePoolInfo{}
			}
			host.poolSizes[pool.Name] = info
		}
	}
	node, err := c.NodeGetInfo(ctx)
	if err != nil {
		return host, fmt.Errorf("reading the host's CPUs and memory: %w", err)
	}
	host.cpus, host.memoryKiB = node.CPUs, node.MemoryKiB
	networks, err := c.ListAllNetworks(ctx)
	if err != nil {
		return host, fmt.Errorf("listing networks: %w", err)
	}
	for _, n := range networks {
		host.networks = append(host.networks, n.Name)
	}
	ifaces, err := c.ListAllInterfaces(ctx)
	if err != nil {
		return host, fmt.Errorf("listing host interfaces: %w", err)
	}
	for _, i := range ifaces {
		host.interfaces = append(host.interfaces, i.Name)
	}
	caps, err := c.Capabilities(ctx)
	if err != nil {
		return host, fmt.Errorf("reading host capabilities: %w", err)
	}
	if host.domainType, err = libvirt.DomainType(caps, hostArch); err != nil {
		return host, err
	}
	return host, nil
}
