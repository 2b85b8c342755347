package app

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// ObservedOnce remembers the objects a role has already recorded in a histogram (a finished
// Job, a VM that became Ready), so that a resync, a retried pass or a lagging cache showing the
// same object again records nothing more (docs/adr/0116). It is memory only: a restarted
// process starts empty, so First also refuses an event older than the process (since), which
// the previous process may have recorded. The price is that what happened while no replica led
// is never recorded. One UID is kept per recorded object for the life of the process.
type ObservedOnce struct {
	mu    sync.Mutex
	since time.Time
	seen  map[types.UID]struct{}
}

// NewObservedOnce records events from since on; a role passes its start.
func NewObservedOnce(since time.Time) *ObservedOnce {
	// API timestamps have whole seconds: an event in the second the process started counts.
	return &ObservedOnce{since: since.Truncate(time.Second), seen: map[types.UID]struct{}{}}
}

// First reports whether the event of uid, which happened at at, is to be recorded now: the
// first call for uid with an event no earlier than since.
func (o *ObservedOnce) First(uid types.UID, at time.Time) bool {
	if at.Before(o.since) {
		return false
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if _, ok := o.seen[uid]; ok {
		return false
	}
	o.seen[uid] = struct{}{}
	return true
}
