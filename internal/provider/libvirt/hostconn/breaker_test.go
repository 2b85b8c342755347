package hostconn

import (
	"errors"
	"testing"
	"time"
)

// TestBreaker walks the state machine through every transition: a step is a dial asked for
// (admit) at a time, and, when admitted, its outcome.
func TestBreaker(t *testing.T) {
	refused := errors.New("connection refused")
	type step struct {
		at        time.Duration // since the start
		dial      bool          // false: only ask (blocked), as a caller does before waiting for the slot
		outcome   error         // of the dial, when admitted
		wantWait  time.Duration // what admit or blocked returns
		wantState BreakerState  // afterwards
	}
	settings := Breaker{Failures: 3, CoolDown: 30 * time.Second}
	for _, tc := range []struct {
		name  string
		steps []step
	}{
		{"successes keep it closed", []step{
			{at: 0, dial: true, wantState: BreakerClosed},
			{at: time.Second, dial: true, wantState: BreakerClosed},
		}},
		{"failures below the threshold keep it closed; a success forgets them", []step{
			{at: 0, dial: true, outcome: refused, wantState: BreakerClosed},
			{at: 1, dial: true, outcome: refused, wantState: BreakerClosed},
			{at: 2, dial: true, wantState: BreakerClosed},
			{at: 3, dial: true, outcome: refused, wantState: BreakerClosed},
			{at: 4, dial: true, outcome: refused, wantState: BreakerClosed},
		}},
		{"the threshold opens it; it refuses until the cool-down is over", []step{
			{at: 0, dial: true, outcome: refused, wantState: BreakerClosed},
			{at: 0, dial: true, outcome: refused, wantState: BreakerClosed},
			{at: 0, dial: true, outcome: refused, wantState: BreakerOpen},
			{at: 10 * time.Second, wantWait: 20 * time.Second, wantState: BreakerOpen},
			{at: 10 * time.Second, dial: true, wantWait: 20 * time.Second, wantState: BreakerOpen},
			{at: 29 * time.Second, dial: true, wantWait: time.Second, wantState: BreakerOpen},
		}},
		{"after the cool-down one probe goes; a successful probe closes it", []step{
			{at: 0, dial: true, outcome: refused}, {at: 0, dial: true, outcome: refused},
			{at: 0, dial: true, outcome: refused, wantState: BreakerOpen},
			{at: 30 * time.Second, wantWait: 0, wantState: BreakerOpen}, // asking changes nothing
			{at: 30 * time.Second, dial: true, wantState: BreakerClosed},
			{at: 31 * time.Second, dial: true, outcome: refused, wantState: BreakerClosed}, // counting from zero again
		}},
		{"while the probe is under way everyone else is refused; a failed probe opens it again", []step{
			{at: 0, dial: true, outcome: refused}, {at: 0, dial: true, outcome: refused},
			{at: 0, dial: true, outcome: refused, wantState: BreakerOpen},
			{at: 40 * time.Second, dial: true, outcome: errProbing, wantState: BreakerHalfOpen},
			{at: 41 * time.Second, wantWait: 30 * time.Second, wantState: BreakerHalfOpen},
			{at: 41 * time.Second, dial: true, wantWait: 30 * time.Second, wantState: BreakerHalfOpen},
			{at: 45 * time.Second, dial: true, outcome: refused, wantState: BreakerOpen}, // the probe's outcome
			{at: 50 * time.Second, wantWait: 25 * time.Second, wantState: BreakerOpen},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := breaker{settings: settings}
			start := time.Unix(1000, 0)
			probe := false // a probe admitted whose outcome comes in a later step
			for i, s := range tc.steps {
				now := start.Add(s.at)
				if probe && s.dial && s.wantWait == 0 {
					// The outcome of the probe admitted earlier.
					b.record(now, s.outcome)
					probe = false
				} else if !s.dial {
					if got := b.blocked(now); got != s.wantWait {
						t.Errorf("step %d: blocked = %s, want %s", i, got, s.wantWait)
					}
				} else {
					got := b.admit(now)
					if got != s.wantWait {
						t.Errorf("step %d: admit = %s, want %s", i, got, s.wantWait)
					}
					if got == 0 {
						if errors.Is(s.outcome, errProbing) {
							probe = true
						} else {
							b.record(now, s.outcome)
						}
					}
				}
				if b.state != s.wantState {
					t.Fatalf("step %d: state %s, want %s", i, b.state, s.wantState)
				}
			}
		})
	}
}

// errProbing marks a dial whose outcome is recorded by a later step.
var errProbing = errors.New("still dialling")
