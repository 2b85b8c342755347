package hostconn

import (
	"context"
	"sync"
	"sync/atomic"

	"k8s.io/apimachinery/pkg/types"

	"banlieue.io/banlieue/pkg/libvirt"
)

// Connections keeps one multiplexed libvirt connection per Provider, shared by every controller
// of the process. A connection is replaced when it breaks or when the Provider's endpoint or
// credentials change, so rotated certificates take effect on the next reconcile.
type Connections struct {
	mu    sync.Mutex // guards slots, onEvent and subscribedOnce; never held while dialling
	slots map[types.NamespacedName]*slot
	// onEvent receives the domain events of every connection (events.go); subscribedOnce
	// remembers the Providers whose events were subscribed before, so a new subscription says
	// that some may have been missed.
	onEvent        func(DomainEvent)
	subscribedOnce map[types.NamespacedName]bool
	// Dialer's zero fields take pkg/libvirt's defaults; tests may shorten keepalive.
	Dialer libvirt.Dialer
	// credentials are the Providers' resolved credentials (credcache.go).
	credentials *credentialCache
}

// slot is one Provider's connection. Its token is held while the connection is checked or
// dialled, so a dial to a host that stopped answering delays only that Provider's callers, and
// they wait only as long as their own contexts allow.
type slot struct {
	token   chan struct{}
	key     string
	client  *libvirt.Client
	retired bool // removed from the set by Forget or Close
	// watching is the connection whose domain event subscription is live, if any (events.go).
	watching atomic.Pointer[libvirt.Client]
}

// NewConnections returns an empty set of connections.
func NewConnections() *Connections {
	return &Connections{slots: map[types.NamespacedName]*slot{}, subscribedOnce: map[types.NamespacedName]bool{},
		credentials: newCredentialCache()}
}

// Get returns the Provider's live connection, dialling when there is none, when it broke, or
// when key (endpoint and credential versions) changed.
func (p *Connections) Get(ctx context.Context, provider types.NamespacedName, endpoint libvirt.Endpoint,
	creds Credentials) (*libvirt.Client, error) {
	for {
		s := p.slot(provider)
		select {
		case s.token <- struct{}{}:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		if s.retired {
			// Forgotten while this caller waited: a connection stored here would never be closed.
			<-s.token
			continue
		}
		c, dialled, err := s.get(ctx, p.Dialer, endpoint, creds)
		if dialled {
			// Under the token, so the callers waiting for this connection find it subscribed.
			p.subscribe(ctx, provider, s, c)
		}
		<-s.token
		return c, err
	}
}

// get runs with the slot's token held; dialled is true when c is a new connection.
func (s *slot) get(ctx context.Context, d libvirt.Dialer, endpoint libvirt.Endpoint, creds Credentials) (c *libvirt.Client, dialled bool, err error) {
	key := endpoint.String() + "|" + creds.Version
	if s.client != nil {
		if s.key == key && s.client.Err() == nil {
			return s.client, false, nil
		}
		_ = s.client.Close()
		s.client = nil
	}
	d.Endpoint, d.Credentials = endpoint, creds.TLS
	if c, err = d.Dial(ctx); err != nil {
		return nil, false, err
	}
	s.key, s.client = key, c
	return c, true, nil
}

func (p *Connections) slot(provider types.NamespacedName) *slot {
	p.mu.Lock()
	defer p.mu.Unlock()
	s, ok := p.slots[provider]
	if !ok {
		s = &slot{token: make(chan struct{}, 1)}
		p.slots[provider] = s
	}
	return s
}

// Forget closes the Provider's connection, if any, and drops its resolved credentials; the next
// Get dials afresh and the next Connect reads the Secret and CA again. It waits for a
// dial of that Provider in progress, so the connection that dial makes is closed too.
func (p *Connections) Forget(provider types.NamespacedName) {
	p.credentials.forget(provider)
	p.mu.Lock()
	s, ok := p.slots[provider]
	delete(p.slots, provider)
	p.mu.Unlock()
	if ok {
		s.close()
	}
}

// Close closes every connection.
func (p *Connections) Close() {
	p.mu.Lock()
	slots := p.slots
	p.slots = map[types.NamespacedName]*slot{}
	p.mu.Unlock()
	for _, s := range slots {
		s.close()
	}
}

func (s *slot) close() {
	s.token <- struct{}{}
	defer func() { <-s.token }()
	s.retired = true
	if s.client != nil {
		_ = s.client.Close()
		s.client = nil
	}
}
