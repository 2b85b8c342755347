package app

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

func TestObservedOnce(t *testing.T) {
	start := time.Date(2026, 12, 1, 10, 0, 0, 700_000_000, time.UTC)
	if _, ok := LeadingSince(); ok {
		t.Fatal("LeadingSince is set in a process that was never elected")
	}
	if NewObservedOnce(LeadingSince).First("x", time.Now()) {
		t.Error("recorded before this process led")
	}
	o := NewObservedOnce(func() (time.Time, bool) { return start, true })
	steps := []struct {
		name string
		uid  string
		at   time.Time
		want bool
	}{
		{"finished before the process led: the previous leader may have recorded it", "old", start.Add(-time.Minute), false},
		{"the same object again: still refused", "old", start.Add(-time.Minute), false},
		{"in the second the process was elected (API times have whole seconds)", "edge", start.Truncate(time.Second), true},
		{"first event after start", "a", start.Add(time.Minute), true},
		{"a resync of the same object", "a", start.Add(time.Minute), false},
		{"the same object with a later event (Ready again)", "a", start.Add(time.Hour), false},
		{"another object", "b", start.Add(time.Minute), true},
	}
	for _, s := range steps {
		if got := o.First(types.UID(s.uid), s.at); got != s.want {
			t.Errorf("%s: First(%s, %v) = %v, want %v", s.name, s.uid, s.at, got, s.want)
		}
	}
}
