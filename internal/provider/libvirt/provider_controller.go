package libvirt

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
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
	// recorder announces the host becoming reachable or not; set up with the manager.
	recorder events.EventRecorder
	// announced keeps a pass reading a stale cache from announcing a transition twice.
	announced announced
	// statuses keeps a probe that finds the host as before from writing the status again.
	statuses providerStatuses
}

// SetupWithManager registers the reconciler.
func (r *ProviderReconciler) SetupWithManager(mgr ctrl.Manager) error {
	r.lost = make(chan event.GenericEvent, 64)
	r.recorder = mgr.GetEventRecorder(RecorderName)
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
	var p banlieuev1.Provider
	if err := r.Client.Get(ctx, req.NamespacedName, &p); err != nil {
		if client.IgnoreNotFound(err) == nil {
			r.Connections.ForgetHost(req.NamespacedName)
			r.statuses.forget(req.NamespacedName)
			_ = r.connectionLost(req.NamespacedName) // drops the connection Forget just closed
			forgetFailureDomains(req.Namespace, req.Name)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if p.Spec.ProviderClassRef.Name != ClassName || !p.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil
	}
	if p.Spec.Paused {
		return ctrl.Result{RequeueAfter: app.RequeueLong}, nil
	}

	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	if err := r.connectionLost(req.NamespacedName); err != nil {
		// Published before redialling: a redial to a host that stopped answering (frozen, or
		// gone from the network) lasts the whole dial timeout, with the Provider still Ready.
		log.FromContext(ctx).Info("provider host unavailable", "reason", banlieuev1.ReasonConnectFailed, "error", err.Error())
		if err := r.writeFailed(ctx, &p, banlieuev1.ReasonConnectFailed, err.Error()); err != nil {
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
		if err := r.writeFailed(ctx, &p, reason, err.Error()); err != nil {
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
	status := p.Status.DeepCopy()
	status.FailureDomains = []banlieuev1.FailureDomain{failureDomain(&p, host, n)}
	status.ObservedGeneration = p.Generation
	status.Workload = nil
	setCondition(status, &p, banlieuev1.ConditionProviderReachable, metav1.ConditionTrue, banlieuev1.ReasonReconciled,
		fmt.Sprintf("connected; %d pool(s), %d network(s)", len(host.pools), len(host.networks)))
	if len(n.missing) == 0 {
		msg := "all declared capabilities are present on the host"
		if host.domainType == "qemu" {
			msg += "; the host has no KVM, so its domains run emulated (domain type qemu)"
		}
		setCondition(status, &p, banlieuev1.ConditionReady, metav1.ConditionTrue, banlieuev1.ReasonReconciled, msg)
	} else {
		setCondition(status, &p, banlieuev1.ConditionReady, metav1.ConditionFalse, banlieuev1.ReasonCapabilitiesIncomplete,
			"declared capabilities missing on the host: "+strings.Join(n.missing, ", "))
	}
	if err := r.statuses.write(ctx, r.Client, &p, status); err != nil {
		return ctrl.Result{}, err
	}
	r.emitReachability(&p, p.Status.Conditions, status.Conditions)
	recordFailureDomains(p.Namespace, p.Name, len(status.FailureDomains))
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

// writeFailed publishes an unreachable host: both conditions False and no failure domains, so
// nothing is ever scheduled onto capabilities that were not verified.
func (r *ProviderReconciler) writeFailed(ctx context.Context, p *banlieuev1.Provider, reason, msg string) error {
	status := p.Status.DeepCopy()
	status.FailureDomains = nil
	status.ObservedGeneration = p.Generation
	status.Workload = nil
	setCondition(status, p, banlieuev1.ConditionProviderReachable, metav1.ConditionFalse, reason, msg)
	setCondition(status, p, banlieuev1.ConditionReady, metav1.ConditionFalse, reason, msg)
	recordFailureDomains(p.Namespace, p.Name, 0)
	if err := r.statuses.write(ctx, r.Client, p, status); err != nil {
		return err
	}
	r.emitReachability(p, p.Status.Conditions, status.Conditions)
	// A later write in the same pass (the probe after a lost connection) then records the
	// transition back to True.
	p.Status = *status
	return nil
}

func setCondition(status *banlieuev1.ProviderStatus, p *banlieuev1.Provider, typ string,
	st metav1.ConditionStatus, reason, msg string) {
	banlieuev1.SetCondition(&status.Conditions, p.Generation, metav1.Condition{Type: typ, Status: st, Reason: reason, Message: msg})
}

// emitReachability announces ProviderReachable moving between the status a write found and the
// one it wrote: HostReachable when the host answers again (or for the first time), the failure's
// own reason (ConnectFailed, CredentialsUnavailable) when it stops. A probe that finds the host
// as before announces nothing.
func (r *ProviderReconciler) emitReachability(p *banlieuev1.Provider, before, after []metav1.Condition) {
	c, moved := app.Transition(before, after, banlieuev1.ConditionProviderReachable)
	if moved {
		moved = r.announced.first(string(p.UID)+"/reachable", string(c.Status)+"/"+c.Reason)
	}
	switch {
	case !moved:
	case c.Status == metav1.ConditionTrue:
		r.recorder.Eventf(p, nil, corev1.EventTypeNormal, banlieuev1.ReasonHostReachable, "Probe", "%s", c.Message)
	default:
		r.recorder.Eventf(p, nil, corev1.EventTypeWarning, c.Reason, "Probe", "%s", c.Message)
	}
}
