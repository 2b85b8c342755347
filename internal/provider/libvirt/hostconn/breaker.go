package hostconn

import (
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// BreakerState is where a host's circuit breaker stands (ADR-0133).
type BreakerState int

// The states, in the order of banlieue_libvirt_host_breaker_state's values.
const (
	// BreakerClosed: dials go ahead; consecutive failures are counted.
	BreakerClosed BreakerState = iota
	// BreakerHalfOpen: the cool-down is over and one dial, the probe, is under way; every
	// other caller fails fast until it ends.
	BreakerHalfOpen
	// BreakerOpen: Failures dials in a row failed; every caller fails fast until the cool-down
	// is over.
	BreakerOpen
)

func (s BreakerState) String() string {
	return [...]string{"closed", "half-open", "open"}[s]
}

// Breaker configures every host's circuit breaker; zero fields take DefaultBreaker's.
type Breaker struct {
	// Failures is how many dials in a row must fail before the breaker opens.
	Failures int
	// CoolDown is how long an open breaker refuses dials before it lets one probe through.
	CoolDown time.Duration
}

// DefaultBreaker: three failed dials in a row are not a blip (a libvirtd restart answers within
// a second or two), and 30 s is the default requeue, so a dead host costs one probe per
// default interval and nothing in between.
var DefaultBreaker = Breaker{Failures: 3, CoolDown: 30 * time.Second}

// HostUnavailableError is a Provider whose breaker is open or probing: nothing is sent to its
// host until RetryAfter has passed. It is returned at once, without waiting on the host.
type HostUnavailableError struct {
	Provider types.NamespacedName
	// Failures is how many dials in a row failed; Last is the last one's error.
	Failures int
	Last     error
	// RetryAfter is how long until the breaker lets a dial through again.
	RetryAfter time.Duration
}

func (e *HostUnavailableError) Error() string {
	// No RetryAfter: the message lands in a condition, which would change on every pass.
	return fmt.Sprintf("host of Provider %q not contacted: circuit breaker open after %d failed connection attempts in a row "+
		"(last: %v); the next attempt is after its cool-down", e.Provider.String(), e.Failures, e.Last)
}

// breaker is one host's state machine. It is pure: the caller passes the time and holds the
// lock (hosts.go).
type breaker struct {
	settings Breaker
	state    BreakerState
	failures int
	last     error
	openedAt time.Time
}

// blocked reports, without changing anything, how long a caller must wait before it may dial:
// zero when it may go ahead now, because the breaker is closed or its cool-down is over.
func (b *breaker) blocked(now time.Time) time.Duration {
	switch b.state {
	case BreakerOpen:
		return max(b.openedAt.Add(b.settings.CoolDown).Sub(now), 0)
	case BreakerHalfOpen:
		// The probe ends within its dial's timeout; by the next cool-down it has decided.
		return b.settings.CoolDown
	}
	return 0
}

// admit is called right before a dial: it returns zero when the dial may go ahead, moving an
// open breaker whose cool-down is over to half-open (this dial is the probe), or else how long
// the caller must wait.
func (b *breaker) admit(now time.Time) time.Duration {
	wait := b.blocked(now)
	if wait == 0 && b.state == BreakerOpen {
		b.state = BreakerHalfOpen
	}
	return wait
}

// record notes a dial's outcome: a success closes the breaker and forgets the failures; a
// failure counts, and opens the breaker at the threshold or when it was the probe.
func (b *breaker) record(now time.Time, err error) {
	if err == nil {
		b.state, b.failures, b.last = BreakerClosed, 0, nil
		return
	}
	b.failures++
	b.last = err
	if b.state == BreakerHalfOpen || b.failures >= b.settings.Failures {
		b.state, b.openedAt = BreakerOpen, now
	}
}
