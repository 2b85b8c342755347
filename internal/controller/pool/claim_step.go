package pool

import (
	"sort"
)

// claimStep is what a claim reconcile does (docs/guides/virtualmachine-pools.md).
type claimStep int

const (
	stepRelease claimStep = iota
	stepFail
	stepHold
	stepBind
)

// claimSnapshot is what the step is decided from.
type claimSnapshot struct {
	Deleting, Expired bool
	// Bound says the claim names a member; MemberExists whether that member is still there.
	Bound, MemberExists bool
}

// nextStep picks the step by precedence: ending the claim beats everything, a lost member is
// terminal, a bound claim holds, and only an unbound claim looks for a member.
func nextStep(s claimSnapshot) claimStep {
	switch {
	case s.Deleting || s.Expired:
		return stepRelease
	case s.Bound && !s.MemberExists:
		return stepFail
	case s.Bound:
		return stepHold
	}
	return stepBind
}

// pickMember chooses the member an unbound claim takes: Ready members only, the pool's current
// revision first, then the longest Ready, then by name. A stale member still beats waiting.
func pickMember(members []member, revision string) (string, bool) {
	var ready []member
	for _, m := range members {
		if m.Phase == phaseReady {
			ready = append(ready, m)
		}
	}
	if len(ready) == 0 {
		return "", false
	}
	sort.Slice(ready, func(i, j int) bool {
		a, b := ready[i], ready[j]
		if (a.Revision == revision) != (b.Revision == revision) {
			return a.Revision == revision
		}
		if a.ReadyFor != b.ReadyFor {
			return a.ReadyFor > b.ReadyFor
		}
		return a.Name < b.Name
	})
	return ready[0].Name, true
}
