package hostconn

import (
	"context"
	"sync"

	"k8s.io/apimachinery/pkg/types"

	"banlieue.io/banlieue/pkg/libvirt"
)

// Connections keeps one multiplexed libvirt connection per Provider, shared by every controller
// of the process. A connection is replaced when it breaks or when the Provider's endpoint or
// credentials change, so rotated certificates take effect on the next reconcile.
type Connections struct {
	mu    sync.Mutex // guards slots only; never held while dialling
	slots map[types.NamespacedName]*slot
	// Dialer's zero fields take pkg/libvirt's defaults; tests may shorten keepalive.
	Dialer libvirt.Dialer
}

// slot is one Provider's connection. Its token is held while the connection is checked or
// dialled, so a dial to a host that stopped answering delays only that Provider's callers, and
// they wait only as long as their own contexts allow.
type slot struct {
	token   chan struct{}
	key     string
	client  *libvirt.Client
	retired bool // removed from the set by Forget or Close
}

// NewConnections returns an empty set of connections.
func NewConnections() *Connections {
	return &Connections{slots: map[types.NamespacedName]*slot{}}
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
		c, err := s.get(ctx, p.Dialer, endpoint, creds)
		<-s.token
		return c, err
	}
}

// get runs with the slot's token held.
func (s *slot) get(ctx context.Context, d libvirt.Dialer, endpoint libvirt.Endpoint, creds Credentials) (*libvirt.Client, error) {
	key := endpoint.String() + "|" + creds.Version
	if s.client != nil {
		if s.key == key && s.client.Err() == nil {
			return s.client, nil
		}
		_ = s.client.Close()
		s.client = nil
	}
	d.Endpoint, d.Credentials = endpoint, creds.TLS
	c, err := d.Dial(ctx)
	if err != nil {
		return nil, err
	}
	s.key, s.client = key, c
	return c, nil
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

// Forget closes the Provider's connection, if any; the next Get dials afresh. It waits for a
// dial of that Provider in progress, so the connection that dial makes is closed too.
func (p *Connections) Forget(provider types.NamespacedName) {
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
