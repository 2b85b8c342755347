package libvirt

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"

	infrav1 "banlieue.io/banlieue/api/infrastructure/v1alpha1"
	"banlieue.io/banlieue/pkg/libvirt"
)

// startingUpLimit is longer than any start of a domain takes, emulated ones included.
const startingUpLimit = 60 * time.Second

// destroyTimeout outlasts libvirtd's own 30 s wait for the job a destroy queues behind
// (docs/reliability.md, B10), so that the refusal of a lost start is read, not the client's
// timeout of the same length.
const destroyTimeout = 45 * time.Second

// startingUp: libvirtd reports the domain paused while it starts it (or lost that start).
func startingUp(state libvirt.DomainState, reason libvirt.DomainStateReason) bool {
	return state == libvirt.DomainPaused && reason == libvirt.DomainPausedStartingUp
}

// startVerdict is what a pass does about a domain it finds paused "starting up".
type startVerdict int

const (
	// startInFlight: within startingUpLimit of the first sighting; look again shortly.
	startInFlight startVerdict = iota
	// startStuck: past the limit; destroy the half-started domain and start it again.
	startStuck
	// startLost: libvirtd refused that destroy before (lostStart); report it, call nothing.
	startLost
)

// startWatch tells a start libvirtd lost from one still in flight (docs/reliability.md, B9 and
// B10): libvirtd killed during DomainCreate leaves the domain paused "starting up" for good. It
// keeps, per machine, when its domain was first seen starting up, and whether libvirtd refused
// to stop it. The sightings are in memory, so a restarted provider waits the limit again, which
// errs on the side of waiting.
type startWatch struct {
	seen sync.Map // types.UID → sighting
	now  func() time.Time
}

type sighting struct {
	first time.Time
	lost  *StartLostError // libvirtd's refusal to stop the domain, once it refused
}

// judge records a sighting of uid's domain starting up and says what to do about it; with
// startLost, the refusal to report again.
func (w *startWatch) judge(uid types.UID) (startVerdict, *StartLostError) {
	now := w.clock()
	v, _ := w.seen.LoadOrStore(uid, sighting{first: now()})
	switch s := v.(sighting); {
	case s.lost != nil:
		return startLost, s.lost
	case now().Sub(s.first) < startingUpLimit:
		return startInFlight, nil
	}
	return startStuck, nil
}

// refused records that libvirtd would not stop uid's stuck domain: later passes, teardown's
// included, report the lost start without asking again, until the domain leaves starting up.
// Load and store are two steps: the controller never runs two passes of one machine at once.
func (w *startWatch) refused(uid types.UID, lost *StartLostError) {
	v, _ := w.seen.LoadOrStore(uid, sighting{first: w.clock()()})
	s := v.(sighting)
	s.lost = lost
	w.seen.Store(uid, s)
}

// inFlight reports whether a pass found uid's domain starting up and ended waiting for that
// start: seen, not yet past starting up, and not refused (machine_domainevents.go lets the
// start's own events through for it).
func (w *startWatch) inFlight(uid types.UID) bool {
	v, ok := w.seen.Load(uid)
	return ok && v.(sighting).lost == nil
}

// lost is libvirtd's recorded refusal to stop uid's domain, or nil.
func (w *startWatch) lost(uid types.UID) *StartLostError {
	if v, ok := w.seen.Load(uid); ok {
		return v.(sighting).lost
	}
	return nil
}

func (w *startWatch) clock() func() time.Time {
	if w.now != nil {
		return w.now
	}
	return time.Now
}

// clear forgets uid's sighting: its domain is past starting up (a stuck one destroyed
// included), or the machine is gone.
func (w *startWatch) clear(uid types.UID) { w.seen.Delete(uid) }

// StartLostError is a domain that libvirtd keeps paused "starting up" and will not stop: it was
// killed after it recorded the start and before QEMU ran, and on its restart it neither finishes
// nor abandons that start, whose job blocks every call that changes the domain (destroy and
// undefine included) until the record is removed on the host (docs/reliability.md, B10).
type StartLostError struct {
	Domain string
	// Cause is libvirtd's refusal, "cannot acquire state change lock".
	Cause error
}

func (e *StartLostError) Error() string {
	return fmt.Sprintf("domain %s is paused starting up and libvirtd refuses to stop it (%v): "+
		"libvirtd lost this start; on the host stop libvirtd, remove its status file /run/libvirt/qemu/%s.xml and start it again",
		e.Domain, e.Cause, e.Domain)
}

func (e *StartLostError) Unwrap() error { return e.Cause }

// lostStart is err as a lost start when it is libvirtd refusing a state change of a domain
// paused "starting up" for its start job (VIR_ERR_OPERATION_TIMEOUT), and nil otherwise. A start
// in flight never refuses a destroy (libvirt admits one during any start), so the refusal alone
// tells a start libvirtd restored from its status file and will never end (B10).
func lostStart(dom string, state libvirt.DomainState, reason libvirt.DomainStateReason, err error) *StartLostError {
	var e *libvirt.Error
	if startingUp(state, reason) && errors.As(err, &e) && e.Code == libvirt.ErrOperationTimeout {
		return &StartLostError{Domain: dom, Cause: err}
	}
	return nil
}

// startLostReason is the Ready reason of a lost start.
func startLostReason(err error) string {
	var e *StartLostError
	if errors.As(err, &e) {
		return infrav1.ReasonDomainStartLost
	}
	return ""
}
