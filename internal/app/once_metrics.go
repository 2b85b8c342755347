package app

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// ObservedOnce remembers the objects a role has already recorded in a histogram (a finished
// Job, a VM that became Ready), so that a resync, a retried pass or a lagging cache showing the
// same object again records nothing more (docs/adr/0116). It is memory only: a restarted or
// newly elected process starts empty, so First also refuses an event from before this process
// led (since), which the previous leader may have recorded. The price is that what happened
// while no replica led is never recorded. One UID is kept per recorded object for the life of
// the process.
type ObservedOnce struct {
	mu    sync.Mutex
	since func() (time.Time, bool)
	seen  map[types.UID]struct{}
}

// NewObservedOnce records events from since on; the roles pass LeadingSince. While since is
// false, nothing is recorded.
func NewObservedOnce(since func() (time.Time, bool)) *ObservedOnce {
	return &ObservedOnce{since: since, seen: map[types.UID]struct{}{}}
}

// First reports whether the event of uid, which happened at at, is to be recorded now: the
// first call for uid with an event no earlier than since.
func (o *ObservedOnce) First(uid types.UID, at time.Time) bool {
	since, ok := o.since()
	// API timestamps have whole seconds: an event in the second the process was elected counts.
	if !ok || at.Before(since.Truncate(time.Second)) {
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
