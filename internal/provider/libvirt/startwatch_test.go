package libvirt

import (
	"testing"
	"time"
)

func TestStartWatch(t *testing.T) {
	clock := time.Unix(0, 0)
	w := &startWatch{now: func() time.Time { return clock }}
	steps := []struct {
		advance time.Duration
		clear   bool
		want    bool
	}{
		{0, false, false}, // first sighting
		{startingUpLimit - time.Second, false, false}, // still within the limit
		{time.Second, false, true},                    // the limit reached: stuck, and forgotten
		{0, false, false},                             // the restart is watched anew
		{startingUpLimit / 2, true, false},            // the domain left starting up in between...
		{startingUpLimit / 2, false, false},           // ...so the next sighting starts the clock again
		{startingUpLimit, false, true},
	}
	for i, s := range steps {
		clock = clock.Add(s.advance)
		if s.clear {
			w.clear("m")
		}
		if got := w.stuck("m"); got != s.want {
			t.Fatalf("step %d: stuck = %v, want %v", i, got, s.want)
		}
	}
	if w.stuck("other") {
		t.Error("another machine's first sighting is not stuck")
	}
}
