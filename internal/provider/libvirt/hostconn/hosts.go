package hostconn

import (
	"cmp"
	"context"
	"fmt"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// Limits bound what this process does at once on one Provider's host (docs/operations.md,
// "Host protection"; ADR-0132); zero fields take DefaultLimits'. They are per process: the
// operator runs one provider process per Provider, so in the shipped install they are per
// Provider too.
type Limits struct {
	// DomainOperations is how many machine passes (a converge or a teardown) may talk to one
	// host at once. A libvirtd serialises much of its work per domain and per pool, and a
	// TCG guest's destroy alone takes seconds: more passes at once only make each one slower.
	DomainOperations int
	// VolumeUploads is how many volume uploads may stream to one host at once (seed ISOs,
	// the markers of imported images), so a burst of new machines does not take all of the
	// host's disk bandwidth at once.
	VolumeUploads int
}

// DefaultLimits are the provider's --host-domain-operations and --host-volume-uploads.
var DefaultLimits = Limits{DomainOperations: 8, VolumeUploads: 4}

// Operation is what a host slot is held for: the operation label of the host series.
type Operation string

// The operations that are limited per host.
const (
	OperationDomain Operation = "domain"
	OperationUpload Operation = "upload"
)

// Observer is told every change of a host's slots and breaker, for the provider's metrics.
// Its methods are called with the host's lock held, so the values they see are in order; they
// must not block.
type Observer interface {
	HostOperations(provider types.NamespacedName, op Operation, inFlight, queued int)
	HostBreaker(provider types.NamespacedName, state BreakerState)
	// HostForgotten drops the series of a Provider that is gone.
	HostForgotten(provider types.NamespacedName)
}

// host is one Provider's limits and breaker. Unlike its slot, it outlives a broken or forgotten
// connection: the slots held and the failures counted are the host's, not the connection's.
type host struct {
	key      types.NamespacedName
	observer Observer
	mu       sync.Mutex // guards queued and breaker
	gates    map[Operation]*gate
	breaker  breaker
}

// gate is a counting semaphore whose waiters are counted.
type gate struct {
	h      *host
	op     Operation
	slots  chan struct{}
	queued int
}

func (p *Connections) host(provider types.NamespacedName) *host {
	p.mu.Lock()
	defer p.mu.Unlock()
	h, ok := p.hosts[provider]
	if !ok {
		limits := Limits{DomainOperations: cmp.Or(p.Limits.DomainOperations, DefaultLimits.DomainOperations),
			VolumeUploads: cmp.Or(p.Limits.VolumeUploads, DefaultLimits.VolumeUploads)}
		settings := Breaker{Failures: cmp.Or(p.Breaker.Failures, DefaultBreaker.Failures),
			CoolDown: cmp.Or(p.Breaker.CoolDown, DefaultBreaker.CoolDown)}
		h = &host{key: provider, observer: p.Observer, breaker: breaker{settings: settings}}
		h.gates = map[Operation]*gate{
			OperationDomain: {h: h, op: OperationDomain, slots: make(chan struct{}, limits.DomainOperations)},
			OperationUpload: {h: h, op: OperationUpload, slots: make(chan struct{}, limits.VolumeUploads)},
		}
		p.hosts[provider] = h
		if h.observer != nil {
			for _, g := range h.gates {
				h.observer.HostOperations(provider, g.op, 0, 0)
			}
			h.observer.HostBreaker(provider, BreakerClosed)
		}
	}
	return h
}

// Acquire waits for one of the Provider's host slots for op, for as long as ctx allows, and
// returns the function that gives it back. A pass that waits is counted as queued.
func (p *Connections) Acquire(ctx context.Context, provider types.NamespacedName, op Operation) (release func(), err error) {
	g := p.host(provider).gates[op]
	if g == nil {
		return nil, fmt.Errorf("no host limit for operation %q", op)
	}
	return g.Acquire(ctx)
}

// Acquire takes a slot of g (libvirt.UploadLimiter for the upload gate).
func (g *gate) Acquire(ctx context.Context) (func(), error) {
	select {
	case g.slots <- struct{}{}: // a free slot: no wait, nothing queued
		g.observe(0)
		return g.release, nil
	default:
	}
	g.observe(1)
	select {
	case g.slots <- struct{}{}:
		g.observe(-1)
		return g.release, nil
	case <-ctx.Done():
		g.observe(-1)
		return nil, fmt.Errorf("waiting for one of the %d %s slots of the host of Provider %q: %w",
			cap(g.slots), g.op, g.h.key.String(), context.Cause(ctx))
	}
}

func (g *gate) release() {
	<-g.slots
	g.observe(0)
}

// observe adds delta to the queued count and reports the gate's state.
func (g *gate) observe(delta int) {
	g.h.mu.Lock()
	defer g.h.mu.Unlock()
	g.queued += delta
	if g.h.observer != nil {
		g.h.observer.HostOperations(g.h.key, g.op, len(g.slots), g.queued)
	}
}

// refuse returns the error of a caller that must not dial now, or nil (blocked, under the lock).
func (h *host) refuse(now time.Time, admit bool) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	before := h.breaker.state
	var wait time.Duration
	if admit {
		wait = h.breaker.admit(now)
	} else {
		wait = h.breaker.blocked(now)
	}
	h.reportBreaker(before)
	if wait == 0 {
		return nil
	}
	return &HostUnavailableError{Provider: h.key, Failures: h.breaker.failures, Last: h.breaker.last, RetryAfter: wait}
}

// dialled records a dial's outcome in the breaker.
func (h *host) dialled(now time.Time, err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	before := h.breaker.state
	h.breaker.record(now, err)
	h.reportBreaker(before)
}

func (h *host) reportBreaker(before BreakerState) {
	if h.observer != nil && h.breaker.state != before {
		h.observer.HostBreaker(h.key, h.breaker.state)
	}
}

// ForgetHost drops a Provider that is gone: its connection, its limits and breaker, and its
// series. A pass still holding one of its slots gives it back to the forgotten host.
func (p *Connections) ForgetHost(provider types.NamespacedName) {
	p.Forget(provider)
	p.mu.Lock()
	h, ok := p.hosts[provider]
	delete(p.hosts, provider)
	p.mu.Unlock()
	if ok && h.observer != nil {
		h.observer.HostForgotten(provider)
	}
}
