package hostconn

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"banlieue.io/banlieue/pkg/libvirt"
)

// Connections keeps one multiplexed libvirt connection per Provider, shared by every controller
// of the process. A connection is replaced when it breaks or when the Provider's endpoint or
// credentials change, so rotated certificates take effect on the next reconcile. Each
// Provider's host also has its limits and its circuit breaker (hosts.go, breaker.go).
type Connections struct {
	mu    sync.Mutex // guards slots, hosts, onEvent and subscribedOnce; never held while dialling
	slots map[types.NamespacedName]*slot
	hosts map[types.NamespacedName]*host
	// onEvent receives the domain events of every connection (events.go); subscribedOnce
	// remembers the Providers whose events were subscribed before, so a new subscription says
	// that some may have been missed.
	onEvent        func(DomainEvent)
	subscribedOnce map[types.NamespacedName]bool
	// Dialer's zero fields take pkg/libvirt's defaults; tests may shorten keepalive.
	Dialer libvirt.Dialer
	// Limits and Breaker apply to every host (zero fields: DefaultLimits, DefaultBreaker);
	// Observer, if set, is told their changes. Set them before the first Get.
	Limits   Limits
	Breaker  Breaker
	Observer Observer
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
	return &Connections{slots: map[types.NamespacedName]*slot{}, hosts: map[types.NamespacedName]*host{},
		subscribedOnce: map[types.NamespacedName]bool{}, credentials: newCredentialCache()}
}

// Get returns the Provider's live connection, dialling when there is none, when it broke, or
// when key (endpoint and credential versions) changed. While the host's breaker is open it
// returns a *HostUnavailableError at once, without waiting for a dial under way.
func (p *Connections) Get(ctx context.Context, provider types.NamespacedName, endpoint libvirt.Endpoint,
	creds Credentials) (*libvirt.Client, error) {
	h := p.host(provider)
	for {
		if err := h.refuse(time.Now(), false); err != nil {
			return nil, err
		}
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
		c, dialled, err := s.get(ctx, h, p.Dialer, endpoint, creds)
		if dialled {
			// Under the token, so the callers waiting for this connection find it subscribed.
			p.subscribe(ctx, provider, s, c)
		}
		<-s.token
		return c, err
	}
}

// get runs with the slot's token held; dialled is true when c is a new connection. A dial asks
// the host's breaker first and tells it the outcome; the connection's uploads take the host's
// upload slots.
func (s *slot) get(ctx context.Context, h *host, d libvirt.Dialer, endpoint libvirt.Endpoint, creds Credentials) (c *libvirt.Client, dialled bool, err error) {
	key := endpoint.String() + "|" + creds.Version
	if s.client != nil {
		if s.key == key && s.client.Err() == nil {
			return s.client, false, nil
		}
		_ = s.client.Close()
		s.client = nil
	}
	if err := h.refuse(time.Now(), true); err != nil {
		return nil, false, err
	}
	d.Endpoint, d.Credentials, d.UploadLimiter = endpoint, creds.TLS, h.gates[OperationUpload]
	c, err = d.Dial(ctx)
	h.dialled(time.Now(), err)
	if err != nil {
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
