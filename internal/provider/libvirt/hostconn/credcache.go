package hostconn

import (
	"context"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
)

// CredentialsTTL is how long a Provider's resolved credentials serve its passes before its
// Secret and CA are read again (ADR-0131). Every machine pass used to GET both and parse the key;
// a pass within the TTL reads nothing, and a read after it parses only when a resourceVersion
// changed. The provider may only get those objects by name (no list or watch, which the operator
// could not grant without holding them cluster-wide), so no informer can tell it of a change: a
// rotated Secret or CA is used at the Provider's next probe, which always reads them
// (ConnectFresh), by every other pass within the TTL, and at once after a failed dial (Forget
// drops the entry). It is the Provider probe's interval, app.RequeueDefault.
const CredentialsTTL = 30 * time.Second

// credentialCache keeps each Provider's last resolved target: the connection spec it was
// resolved from, when it was read, and the parsed credentials keyed by the objects' versions.
type credentialCache struct {
	mu      sync.Mutex
	entries map[types.NamespacedName]credentialEntry
	ttl     time.Duration
	now     func() time.Time
	// parse is material.parse; tests count it.
	parse func(material) (Credentials, error)
}

type credentialEntry struct {
	conn   banlieuev1.ProviderConnection
	target Target
	read   time.Time
}

func newCredentialCache() *credentialCache {
	return &credentialCache{entries: map[types.NamespacedName]credentialEntry{}, ttl: CredentialsTTL, now: time.Now,
		parse: material.parse}
}

// resolve returns p's target: unless fresh, the cached one while it is younger than the TTL and
// p's connection spec is the one it came from; else it reads the Secret and CA again and parses
// them only when their versions changed. A failure is never cached: the next pass reads again
// and reports what it finds.
func (c *credentialCache) resolve(ctx context.Context, r client.Reader, p *banlieuev1.Provider, fresh bool) (Target, error) {
	key := client.ObjectKeyFromObject(p)
	c.mu.Lock()
	e, ok := c.entries[key]
	c.mu.Unlock()
	sameSpec := ok && equality.Semantic.DeepEqual(e.conn, p.Spec.Connection)
	if !fresh && sameSpec && c.now().Sub(e.read) < c.ttl {
		return e.target, nil
	}
	t, err := resolveWith(p, func() (Credentials, error) {
		m, err := readMaterial(ctx, r, p)
		if err != nil {
			return Credentials{}, err
		}
		if sameSpec && m.version == e.target.Credentials.Version {
			return e.target.Credentials, nil
		}
		return c.parse(m)
	})
	c.mu.Lock()
	defer c.mu.Unlock()
	if err != nil {
		delete(c.entries, key)
		return Target{}, err
	}
	c.entries[key] = credentialEntry{conn: *p.Spec.Connection.DeepCopy(), target: t, read: c.now()}
	return t, nil
}

// forget drops the Provider's entry: the next pass reads its Secret and CA again.
func (c *credentialCache) forget(provider types.NamespacedName) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.entries, provider)
}
