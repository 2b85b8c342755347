package hostconn

import (
	"context"
	"sync"

	"k8s.io/apimachinery/pkg/types"

	"banlieue.io/banlieue/pkg/libvirt"
)

// Pool keeps one multiplexed libvirt connection per Provider, shared by every controller
// of the process. A connection is replaced when it breaks or when the Provider's endpoint or
// credentials change, so rotated certificates take effect on the next reconcile.
type Pool struct {
	mu    sync.Mutex
	conns map[types.NamespacedName]*pooledConn
	// Dialer's zero fields take pkg/libvirt's defaults; tests may shorten keepalive.
	Dialer libvirt.Dialer
}

type pooledConn struct {
	key    string
	client *libvirt.Client
}

// NewPool returns an empty pool.
func NewPool() *Pool {
	return &Pool{conns: map[types.NamespacedName]*pooledConn{}}
}

// Get returns the Provider's live connection, dialling when there is none, when it broke, or
// when key (endpoint and credential versions) changed.
func (p *Pool) Get(ctx context.Context, provider types.NamespacedName, endpoint libvirt.Endpoint,
	creds Credentials) (*libvirt.Client, error) {
	key := endpoint.String() + "|" + creds.Version
	p.mu.Lock()
	defer p.mu.Unlock()
	if pc, ok := p.conns[provider]; ok {
		if pc.key == key && pc.client.Err() == nil {
			return pc.client, nil
		}
		_ = pc.client.Close()
		delete(p.conns, provider)
	}
	d := p.Dialer
	d.Endpoint, d.Credentials = endpoint, creds.TLS
	c, err := d.Dial(ctx)
	if err != nil {
		return nil, err
	}
	p.conns[provider] = &pooledConn{key: key, client: c}
	return c, nil
}

// Forget closes the Provider's connection, if any; the next Get dials afresh.
func (p *Pool) Forget(provider types.NamespacedName) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if pc, ok := p.conns[provider]; ok {
		_ = pc.client.Close()
		delete(p.conns, provider)
	}
}

// Close closes every connection.
func (p *Pool) Close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for name, pc := range p.conns {
		_ = pc.client.Close()
		delete(p.conns, name)
	}
}
