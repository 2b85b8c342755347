package libvirt

import (
	"errors"
	"testing"
	"time"

	"banlieue.io/banlieue/pkg/libvirt"
)

func TestStartWatch(t *testing.T) {
	clock := time.Unix(0, 0)
	w := &startWatch{now: func() time.Time { return clock }}
	lost := &StartLostError{Domain: "d", Cause: errors.New("cannot acquire state change lock")}
	steps := []struct {
		name    string
		advance time.Duration
		clear   bool
		refused bool // libvirtd refused the destroy the verdict before asked for
		want    startVerdict
	}{
		{"first sighting", 0, false, false, startInFlight},
		{"still within the limit", startingUpLimit - time.Second, false, false, startInFlight},
		{"the limit reached", time.Second, false, false, startStuck},
		{"a destroy that failed otherwise is tried again", 0, false, false, startStuck},
		{"a refused destroy is not asked again", 0, false, true, startLost},
		{"nor later", time.Hour, false, false, startLost},
		{"the domain left starting up (repaired): watched anew", 0, true, false, startInFlight},
		{"a destroyed stuck start is forgotten too", startingUpLimit, true, false, startInFlight},
		{"the clock runs from the new sighting", startingUpLimit, false, false, startStuck},
	}
	for _, s := range steps {
		clock = clock.Add(s.advance)
		if s.clear {
			w.clear("m")
		}
		if s.refused {
			w.refused("m", lost)
		}
		got, err := w.judge("m")
		if got != s.want {
			t.Fatalf("%s: verdict %d, want %d", s.name, got, s.want)
		}
		if (got == startLost) != (err == lost) {
			t.Fatalf("%s: verdict %d reports %v", s.name, got, err)
		}
		// Seen starting up, the start is awaited unless libvirtd refused to stop it.
		if w.inFlight("m") != (got != startLost) {
			t.Fatalf("%s: verdict %d, inFlight %v", s.name, got, w.inFlight("m"))
		}
	}
	if w.clear("m"); w.inFlight("m") {
		t.Error("a start is awaited after its domain left starting up")
	}
	if w.inFlight("never seen") {
		t.Error("a start is awaited for a machine no pass saw starting up")
	}
	if v, _ := w.judge("other"); v != startInFlight {
		t.Error("another machine's first sighting is not in flight")
	}
	// Teardown records a refusal for a machine no pass saw starting up (a restarted provider).
	w.refused("torn-down", lost)
	if v, err := w.judge("torn-down"); v != startLost || w.lost("torn-down") != lost || err != lost {
		t.Error("a refusal recorded by teardown is not reported by the next pass")
	}
	if w.lost("other") != nil {
		t.Error("a start in flight reads as lost")
	}
}

func TestLostStart(t *testing.T) {
	refusal := &libvirt.Error{Code: libvirt.ErrOperationTimeout, Message: "Timed out during operation: cannot acquire state change lock"}
	for _, c := range []struct {
		name   string
		state  libvirt.DomainState
		reason libvirt.DomainStateReason
		err    error
		want   bool
	}{
		{"refused while paused starting up", libvirt.DomainPaused, libvirt.DomainPausedStartingUp, refusal, true},
		{"wrapped refusal", libvirt.DomainPaused, libvirt.DomainPausedStartingUp, errors.Join(errors.New("x"), refusal), true},
		{"refused while paused by a user", libvirt.DomainPaused, 1, refusal, false},
		{"refused while running", libvirt.DomainRunning, 1, refusal, false},
		{"another libvirt error", libvirt.DomainPaused, libvirt.DomainPausedStartingUp,
			&libvirt.Error{Code: libvirt.ErrOperationFailed, Message: "x"}, false},
		{"a transport error", libvirt.DomainPaused, libvirt.DomainPausedStartingUp, libvirt.ErrConnectionClosed, false},
	} {
		got := lostStart("d", c.state, c.reason, c.err)
		if (got != nil) != c.want {
			t.Errorf("%s: lostStart = %v, want a lost start: %v", c.name, got, c.want)
		}
		if got != nil && (startLostReason(got) != "DomainStartLost" || !errors.Is(got, c.err)) {
			t.Errorf("%s: %v has reason %q and does not wrap the refusal", c.name, got, startLostReason(got))
		}
	}
}
