package hostconn

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"banlieue.io/banlieue/pkg/libvirt"
)

// DomainEvent is a domain event of a Provider's host, seen on the pool's connection to it, or,
// with Resubscribed set, the news that the pool subscribed again after a connection ended:
// whatever happened on the host in between was not reported, so every machine of the Provider
// is worth a look.
type DomainEvent struct {
	Provider     types.NamespacedName
	Event        libvirt.DomainEvent
	Resubscribed bool
}

// subscribeTimeout bounds the registration on a fresh connection, apart from the caller's own
// deadline: a Get's context may be nearly spent by the dial.
const subscribeTimeout = 10 * time.Second

// OnDomainEvent makes every connection the pool dials from now on subscribe to its host's
// domain lifecycle and device-removed events and hand each to fn, from one goroutine per
// connection, in the order libvirtd sent them. fn must not block: it runs on the goroutine that
// drains the connection's event backlog. A connection dialled again (after a break, or new
// credentials) subscribes again; after the first for a Provider, fn also gets a Resubscribed
// event, because the events of the gap are lost.
func (p *Connections) OnDomainEvent(fn func(DomainEvent)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.onEvent = fn
}

// Watching reports whether the Provider's current connection holds a live event subscription,
// so a caller may rely on events rather than a short resync.
func (p *Connections) Watching(provider types.NamespacedName) bool {
	p.mu.Lock()
	s := p.slots[provider]
	p.mu.Unlock()
	if s == nil {
		return false
	}
	c := s.watching.Load()
	return c != nil && c.Err() == nil
}

// subscribe registers c for domain events when a handler is set. A host that refuses is still
// served: the resync notices what events would have, later (docs/reliability.md).
func (p *Connections) subscribe(ctx context.Context, provider types.NamespacedName, s *slot, c *libvirt.Client) {
	p.mu.Lock()
	fn := p.onEvent
	again := p.subscribedOnce[provider]
	p.mu.Unlock()
	if fn == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), subscribeTimeout)
	defer cancel()
	sub, err := c.SubscribeDomainEvents(ctx)
	if err != nil {
		log.FromContext(ctx).Info("host domain events unavailable; drift is noticed at the resync", "provider", provider, "error", err.Error())
		return
	}
	s.watching.Store(c)
	p.mu.Lock()
	p.subscribedOnce[provider] = true
	p.mu.Unlock()
	if again {
		fn(DomainEvent{Provider: provider, Resubscribed: true})
	}
	go func() {
		// Events is closed when the connection ends, whoever ends it.
		for ev := range sub.Events() {
			fn(DomainEvent{Provider: provider, Event: ev})
		}
		s.watching.CompareAndSwap(c, nil)
	}()
}
