package libvirt

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	infrav1 "banlieue.io/banlieue/api/infrastructure/v1alpha1"
	"banlieue.io/banlieue/internal/app"
	"banlieue.io/banlieue/internal/provider/libvirt/hostconn"
	"banlieue.io/banlieue/pkg/libvirt"
)

// Domain events (docs/adr/0120-domain-events.md): every pooled host connection subscribes to
// its host's domain events (hostconn), and an event enqueues the LibvirtMachine whose domain it
// names, so a domain destroyed, undefined or changed by hand is healed or reported at once
// instead of at the resync. A domain no machine names is ignored: it is not banlieue's.

// machineDomainIndex indexes LibvirtMachines by "<provider namespace>/<provider name>/<domain
// name>", the key a host's event maps to.
const machineDomainIndex = "spec.providerRef+spec.domainName"

func domainIndexKey(provider types.NamespacedName, domain string) string {
	return provider.String() + "/" + domain
}

func machineDomainKey(o client.Object) []string {
	m, ok := o.(*infrav1.LibvirtMachine)
	if !ok || m.Spec.DomainName == "" {
		return nil
	}
	return []string{domainIndexKey(m.ProviderKey(), m.Spec.DomainName)}
}

// domainEventBuffer is how many host events wait for the controller's queue. The hand-off never
// blocks the connection's event goroutine: past it, events are dropped and counted, and the
// resync looks at those machines later.
const domainEventBuffer = 1024

// selfEventGrace is how long after a machine's pass its own kind of events (selfCaused) are
// still taken for the pass's: libvirtd sends them within milliseconds of the call.
const selfEventGrace = 2 * time.Second

// watchedResync is the resync of a converged machine whose host connection delivers events:
// the events see drift at once, and the resync is only the safety net for the events a broken
// connection lost. Without events the intervals of docs/operations.md, "Requeue intervals".
const watchedResync = 10 * time.Minute

// domainEvents carries host events to the LibvirtMachine controller.
type domainEvents struct {
	ch      chan event.TypedGenericEvent[hostconn.DomainEvent]
	dropped atomic.Uint64

	mu     sync.Mutex
	passes map[types.NamespacedName]passMark
}

// passMark is a machine's passes in progress and when the last one ended.
type passMark struct {
	running int
	ended   time.Time
}

func newDomainEvents() *domainEvents {
	return &domainEvents{ch: make(chan event.TypedGenericEvent[hostconn.DomainEvent], domainEventBuffer),
		passes: map[types.NamespacedName]passMark{}}
}

// offer hands ev to the controller without blocking.
func (d *domainEvents) offer(ev hostconn.DomainEvent) {
	select {
	case d.ch <- event.TypedGenericEvent[hostconn.DomainEvent]{Object: ev}:
	default:
		d.dropped.Add(1)
	}
}

// track marks every pass over a machine, so that the events the pass itself causes (it defines
// the domain on every pass, and starts it) do not make another pass, and that one another.
func (d *domainEvents) track(r reconcile.Reconciler) reconcile.Reconciler {
	return reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
		d.mu.Lock()
		m := d.passes[req.NamespacedName]
		m.running++
		d.passes[req.NamespacedName] = m
		d.mu.Unlock()
		defer func() {
			d.mu.Lock()
			m := d.passes[req.NamespacedName]
			m.running--
			m.ended = time.Now()
			d.passes[req.NamespacedName] = m
			d.prune(m.ended)
			d.mu.Unlock()
		}()
		return r.Reconcile(ctx, req)
	})
}

// prune forgets machines whose last pass is past the grace, so the map holds only machines
// with a pass in the last few seconds. Runs with mu held.
func (d *domainEvents) prune(now time.Time) {
	for k, m := range d.passes {
		if m.running == 0 && now.Sub(m.ended) > selfEventGrace {
			delete(d.passes, k)
		}
	}
}

// inPass reports whether machine has a pass running or just ended.
func (d *domainEvents) inPass(machine types.NamespacedName, now time.Time) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	m, ok := d.passes[machine]
	return ok && withinPass(m, now)
}

func withinPass(m passMark, now time.Time) bool {
	return m.running > 0 || now.Sub(m.ended) <= selfEventGrace
}

// selfCaused reports the lifecycle events a pass over a machine causes itself. A converge pass
// redefines the domain (Defined) and starts it (Suspended and Resumed around Started); taken for
// drift, they would make every pass cause the next. A teardown, the pass over a machine being
// deleted, also stops the domain and undefines it (Stopped, Undefined): a pass woken by those
// would run from a cache that may still show the machine with its finalizer, find nothing left
// on the host, and patch a machine already gone (measured in docs/performance.md, the PATCHes
// of the LibvirtMachine during deletion). Otherwise Stopped, Undefined,
// Shutdown, Crashed, PMSuspended and a removed device are never a pass's own (a power-off's
// Stopped costs one extra pass, which changes nothing), so they count.
//
// startAwaited: the machine's last pass found its domain paused "starting up" by a start that
// was not its own (a provider killed during DomainCreate, libvirtd finishing it alone; another
// client's) and ended waiting for it (startWatch). That start's Started and Resumed are what the
// pass waits for, not what it did, so they count: the machine is realised on the start's own
// event instead of the 5 s error retry. Its Defined still does not: every pass redefines the
// domain, and a pass woken by its own Defined would wake the next until the start ends.
func selfCaused(ev libvirt.DomainEvent, deleting, startAwaited bool) bool {
	if ev.ID != libvirt.DomainEventIDLifecycle {
		return false
	}
	switch ev.Type {
	case libvirt.DomainEventStarted, libvirt.DomainEventResumed:
		return !startAwaited
	case libvirt.DomainEventDefined, libvirt.DomainEventSuspended:
		return true
	case libvirt.DomainEventStopped, libvirt.DomainEventUndefined:
		return deleting
	}
	return false
}

// machinesFor maps a host event to the machines it concerns.
func (r *MachineReconciler) machinesFor(ctx context.Context, ev hostconn.DomainEvent) []reconcile.Request {
	var list infrav1.LibvirtMachineList
	var err error
	if ev.Resubscribed {
		err = r.Client.List(ctx, &list)
	} else {
		err = r.Client.List(ctx, &list, client.MatchingFields{machineDomainIndex: domainIndexKey(ev.Provider, ev.Event.Domain.Name)})
	}
	if err != nil {
		log.FromContext(ctx).Error(err, "listing the machines of a host event; the resync looks at them", "provider", ev.Provider)
		return nil
	}
	now := time.Now()
	var out []reconcile.Request
	for i := range list.Items {
		m := &list.Items[i]
		key := client.ObjectKeyFromObject(m)
		if m.ProviderKey() != ev.Provider || !r.serves(m) {
			continue
		}
		if !ev.Resubscribed && selfCaused(ev.Event, !m.DeletionTimestamp.IsZero(), r.starts.inFlight(m.UID)) && r.events.inPass(key, now) {
			continue
		}
		out = append(out, reconcile.Request{NamespacedName: key})
	}
	return out
}

// machineRequeue is when a converged machine is looked at again. A running guest without
// addresses, or whose installed system has not announced itself (its agent not answering yet
// included: a DHCP lease gives an address long before the agent starts), is polled on the
// default interval: no libvirt event reports either. Otherwise, with events the resync is the
// long safety net (watchedResync); without, a machine that is not running is polled on the
// default interval and one that is, on the long one, as before events.
func machineRequeue(obs observation, watched bool) time.Duration {
	switch {
	case obs.snapshotsPending:
		return snapshotRequeue
	case isRunning(obs.state) && (len(obs.addresses) == 0 || obs.phase != installed):
		return app.RequeueDefault
	case watched:
		return watchedResync
	case len(obs.addresses) == 0:
		return app.RequeueDefault
	default:
		return app.RequeueLong
	}
}
