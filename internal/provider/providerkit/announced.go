package providerkit

import "sync"

// Announced remembers, per key (an object's UID and what is announced), the value last
// announced. A pass reads its "before" from the cache, which may not hold this process's own
// last write yet; from such a read a transition looks new again, and First checks here keep it
// from being announced twice. It is in memory: a restarted provider may announce once more.
type Announced struct {
	last sync.Map // string → string
}

// First records value under key and reports whether it differs from the last one recorded.
func (a *Announced) First(key, value string) bool {
	prev, seen := a.last.Swap(key, value)
	return !seen || prev != value
}

// Forget drops keys, for an object that is gone, so the memory follows the live objects.
func (a *Announced) Forget(keys ...string) {
	for _, k := range keys {
		a.last.Delete(k)
	}
}
