package pool

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"testing"
	"time"
)

// The planner's invariants over random pools. The seed is fixed so a failure reproduces; the
// failing case is printed in full.
func TestPlanPoolProperties(t *testing.T) {
	rng := rand.New(rand.NewPCG(56, 2024))
	for i := range 20000 {
		in := randomPool(rng)
		p := planPool(in)
		if err := checkPlan(in, p); err != nil {
			t.Fatalf("case %d: %v\ninput: %+v\nplan: %+v", i, err, in, p)
		}
	}
}

func randomPool(rng *rand.Rand) planInput {
	revisions := []string{rev, oldRev}
	in := planInput{
		Warm:                 rng.IntN(8),
		MaxSurge:             rng.IntN(5),
		ProvisioningTimeout:  time.Duration(1+rng.IntN(3000)) * time.Second,
		RecycleOnImageChange: rng.IntN(2) == 0,
		Revision:             revisions[rng.IntN(2)],
	}
	// maxReplicas is at least warm (admission says so), sometimes below what is claimed.
	in.MaxReplicas = in.Warm + rng.IntN(6)
	if rng.IntN(3) == 0 {
		in.MaxIdle = time.Duration(1+rng.IntN(3000)) * time.Second
	}
	// Small, overlapping ranges make exhaustion and double-listing common.
	pools := [][]string{nil, {"10.0.0.0/29"}, {"10.0.0.3-10.0.0.6", "10.0.0.5", "10.0.0.0/30"}, {"10.0.0.1"}}
	entries := pools[rng.IntN(len(pools))]
	if entries != nil {
		in.Addresses, _ = parseAddressPool(entries)
	}
	free := rng.Perm(16)
	for j := range rng.IntN(14) {
		m := member{
			Name:      fmt.Sprintf("m%02d", j),
			Phase:     memberPhase(rng.IntN(4)),
			Age:       time.Duration(rng.IntN(4000)) * time.Second,
			Revision:  revisions[rng.IntN(2)],
			Signalled: rng.IntN(4) != 0,
		}
		if m.Phase == phaseReady {
			m.ReadyFor = time.Duration(rng.Int64N(int64(m.Age) + 1))
		}
		if in.Addresses != nil && rng.IntN(3) != 0 {
			m.Address = fromUint32(toUint32(netip.MustParseAddr("10.0.0.0")) + uint32(free[j]))
		}
		in.Members = append(in.Members, m)
	}
	return in
}

// checkPlan returns the first invariant p breaks for in.
func checkPlan(in planInput, p plan) error {
	byName := map[string]member{}
	for _, m := range in.Members {
		byName[m.Name] = m
	}
	deleted := map[string]bool{}
	for _, d := range p.Deletes {
		m, ok := byName[d.Name]
		switch {
		case !ok:
			return fmt.Errorf("deletes unknown member %s", d.Name)
		case deleted[d.Name]:
			return fmt.Errorf("deletes %s twice", d.Name)
		case m.Phase == phaseClaimed:
			return fmt.Errorf("deletes claimed member %s", d.Name)
		case m.Phase == phaseDeleting:
			return fmt.Errorf("deletes %s, already being deleted", d.Name)
		}
		deleted[d.Name] = true
	}

	alive, provisioning := 0, 0
	for _, m := range in.Members {
		if m.Phase == phaseDeleting || deleted[m.Name] {
			continue
		}
		alive++
		if m.Phase == phaseProvisioning {
			provisioning++
		}
	}
	creates := len(p.Creates)
	if creates > 0 && alive+creates > in.MaxReplicas {
		return fmt.Errorf("alive %d + creates %d > maxReplicas %d", alive, creates, in.MaxReplicas)
	}
	if creates > 0 && provisioning+creates > in.MaxSurge {
		return fmt.Errorf("provisioning %d + creates %d > maxSurge %d", provisioning, creates, in.MaxSurge)
	}
	if p.BlockedOnCapacity < 0 || p.BlockedOnAddresses < 0 {
		return fmt.Errorf("negative blocked counts")
	}

	if err := checkAddresses(in, p); err != nil {
		return err
	}

	// Claimed members are not warm: without them the pool wants exactly as many members and
	// scales down exactly the same ones.
	var unclaimed []member
	for _, m := range in.Members {
		if m.Phase != phaseClaimed {
			unclaimed = append(unclaimed, m)
		}
	}
	other := in
	other.Members = unclaimed
	q := planPool(other)
	if want(q) != want(p) {
		return fmt.Errorf("claimed members change the demand: %d without them, %d with", want(q), want(p))
	}
	if !slices.Equal(scaleDowns(q), scaleDowns(p)) {
		return fmt.Errorf("claimed members change the scale-down: %v without them, %v with", scaleDowns(q), scaleDowns(p))
	}

	// Deterministic whatever order the members are listed in.
	shuffled := in
	shuffled.Members = slices.Clone(in.Members)
	slices.Reverse(shuffled.Members)
	r := planPool(shuffled)
	if !sameSet(r.Deletes, p.Deletes) || !slices.Equal(r.Creates, p.Creates) ||
		r.BlockedOnCapacity != p.BlockedOnCapacity || r.BlockedOnAddresses != p.BlockedOnAddresses {
		return fmt.Errorf("listing order changes the plan: %+v", r)
	}

	// Stable: the plan applied and planned again asks for nothing more.
	next := applyPlan(in, p)
	if again := planPool(next); len(again.Deletes) > 0 || len(again.Creates) > 0 {
		return fmt.Errorf("not stable; planning its own outcome gives %+v", again)
	}
	return nil
}

func checkAddresses(in planInput, p plan) error {
	if in.Addresses == nil {
		for _, a := range p.Creates {
			if a.IsValid() {
				return fmt.Errorf("hands out %s without addressing", a)
			}
		}
		return nil
	}
	used := map[netip.Addr]bool{}
	for _, m := range in.Members {
		used[m.Address] = m.Address.IsValid()
	}
	for _, a := range p.Creates {
		if !a.IsValid() || used[a] {
			return fmt.Errorf("hands out %v, which is invalid or already in use", a)
		}
		if !slices.ContainsFunc(in.Addresses, func(r addressRange) bool { return r.first <= toUint32(a) && toUint32(a) <= r.last }) {
			return fmt.Errorf("hands out %s, outside the pool", a)
		}
		used[a] = true
	}
	return nil
}

// applyPlan is the pool after p: deleted members are Deleting and still hold their addresses,
// created ones are brand new and provisioning.
func applyPlan(in planInput, p plan) planInput {
	out := in
	out.Members = slices.Clone(in.Members)
	for i, m := range out.Members {
		if slices.ContainsFunc(p.Deletes, func(d deletion) bool { return d.Name == m.Name }) {
			out.Members[i].Phase = phaseDeleting
		}
	}
	for j, a := range p.Creates {
		out.Members = append(out.Members, member{Name: fmt.Sprintf("new%02d", j), Phase: phaseProvisioning,
			Revision: in.Revision, Address: a})
	}
	return out
}

func want(p plan) int { return len(p.Creates) + p.BlockedOnCapacity + p.BlockedOnAddresses }

func scaleDowns(p plan) []string {
	var names []string
	for _, d := range p.Deletes {
		if d.Reason == reasonScaleDown {
			names = append(names, d.Name)
		}
	}
	return names
}

func sameSet(a, b []deletion) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	cmp := func(x, y deletion) int {
		if x.Name < y.Name {
			return -1
		}
		if x.Name > y.Name {
			return 1
		}
		return 0
	}
	slices.SortFunc(a, cmp)
	slices.SortFunc(b, cmp)
	return slices.Equal(a, b)
}
