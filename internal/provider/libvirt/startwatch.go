package libvirt

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// startingUpLimit is longer than any start of a domain takes, emulated ones included.
const startingUpLimit = 60 * time.Second

// startWatch tells a start libvirtd lost from one still in flight (docs/reliability.md, B9):
// libvirtd killed during DomainCreate leaves the domain paused "starting up" for good. It keeps,
// per machine, when its domain was first seen starting up. The sightings are in memory, so a
// restarted provider waits the limit again, which errs on the side of waiting.
type startWatch struct {
	first sync.Map // types.UID → time.Time
	now   func() time.Time
}

// stuck records a sighting of uid's domain starting up and reports whether the first one is
// startingUpLimit old; a stuck start is forgotten, so the start that follows is watched anew.
func (w *startWatch) stuck(uid types.UID) bool {
	now := time.Now
	if w.now != nil {
		now = w.now
	}
	first, _ := w.first.LoadOrStore(uid, now())
	if now().Sub(first.(time.Time)) < startingUpLimit {
		return false
	}
	w.first.Delete(uid)
	return true
}

// clear forgets uid's sighting: its domain is past starting up, or the machine is gone.
func (w *startWatch) clear(uid types.UID) { w.first.Delete(uid) }
