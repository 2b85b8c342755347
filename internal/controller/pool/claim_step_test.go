package pool

import (
	"testing"
	"time"
)

func TestNextStep(t *testing.T) {
	tests := []struct {
		snap claimSnapshot
		want claimStep
	}{
		{claimSnapshot{}, stepBind},
		{claimSnapshot{Bound: true, MemberExists: true}, stepHold},
		{claimSnapshot{Bound: true}, stepFail},
		{claimSnapshot{Deleting: true, Bound: true}, stepRelease},
		{claimSnapshot{Expired: true, Bound: true, MemberExists: true}, stepRelease},
		{claimSnapshot{Deleting: true}, stepRelease},
	}
	for _, tc := range tests {
		if got := nextStep(tc.snap); got != tc.want {
			t.Errorf("nextStep(%+v) = %v, want %v", tc.snap, got, tc.want)
		}
	}
}

func TestPickMember(t *testing.T) {
	stale := withReadyFor(withRev(ready("stale", time.Hour), oldRev), 50*time.Minute)
	longest := withReadyFor(ready("longest", time.Hour), 40*time.Minute)
	tieB := withReadyFor(ready("b", time.Hour), 10*time.Minute)
	tieA := withReadyFor(ready("a", time.Hour), 10*time.Minute)
	tests := []struct {
		name    string
		members []member
		want    string
	}{
		{"current revision beats a longer-ready stale one", []member{stale, tieA, longest}, "longest"},
		{"longest Ready first", []member{tieA, longest}, "longest"},
		{"then by name", []member{tieB, tieA}, "a"},
		{"a stale member beats waiting", []member{stale, provisioningM("p", 0), claimedM("c")}, "stale"},
		{"only Ready members", []member{provisioningM("p", 0), claimedM("c"), withPhase(tieA, phaseDeleting)}, ""},
	}
	for _, tc := range tests {
		got, ok := pickMember(tc.members, rev)
		if got != tc.want || ok != (tc.want != "") {
			t.Errorf("%s: picked %q (%v), want %q", tc.name, got, ok, tc.want)
		}
	}
}
