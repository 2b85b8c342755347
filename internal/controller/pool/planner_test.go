package pool

import (
	"fmt"
	"net/netip"
	"slices"
	"testing"
	"time"
)

const (
	timeout = 1800 * time.Second
	rev     = "aaaaaaaaaaaa"
	oldRev  = "bbbbbbbbbbbb"
)

func ready(name string, age time.Duration) member {
	return member{Name: name, Phase: phaseReady, Age: age, ReadyFor: age / 2, Revision: rev, Signalled: true}
}

func provisioningM(name string, age time.Duration) member {
	return member{Name: name, Phase: phaseProvisioning, Age: age, Revision: rev, Signalled: true}
}

func claimedM(name string) member {
	return member{Name: name, Phase: phaseClaimed, Age: time.Hour, Revision: oldRev, Signalled: true}
}

func withRev(m member, r string) member             { m.Revision = r; return m }
func withAddr(m member, a string) member            { m.Address = netip.MustParseAddr(a); return m }
func withPhase(m member, p memberPhase) member      { m.Phase = p; return m }
func withReadyFor(m member, d time.Duration) member { m.ReadyFor = d; return m }

func addrs(s ...string) []netip.Addr {
	out := make([]netip.Addr, 0, len(s))
	for _, a := range s {
		out = append(out, netip.MustParseAddr(a))
	}
	return out
}

func mustRanges(t *testing.T, entries ...string) []addressRange {
	t.Helper()
	r, err := parseAddressPool(entries)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestPlanPool(t *testing.T) {
	base := func(warm, maxReplicas, maxSurge int, members ...member) planInput {
		return planInput{Members: members, Warm: warm, MaxReplicas: maxReplicas, MaxSurge: maxSurge,
			ProvisioningTimeout: timeout, RecycleOnImageChange: true, Revision: rev}
	}
	tests := []struct {
		name string
		in   planInput
		want plan
	}{
		{
			name: "empty pool fills up to maxSurge at a time",
			in:   base(5, 10, 2),
			want: plan{Creates: make([]netip.Addr, 2)},
		},
		{
			name: "provisioning members count toward surge and warm",
			in:   base(3, 10, 2, provisioningM("p1", time.Minute)),
			want: plan{Creates: make([]netip.Addr, 1)},
		},
		{
			name: "a member provisioning past the timeout is deleted and no longer counts",
			in:   base(1, 10, 2, provisioningM("slow", timeout+time.Second)),
			want: plan{Deletes: []deletion{{"slow", reasonProvisioningTimeout}}, Creates: make([]netip.Addr, 1)},
		},
		{
			name: "scale down deletes the oldest fresh surplus",
			in:   base(2, 10, 2, ready("a", 3*time.Hour), ready("b", time.Hour), ready("c", 2*time.Hour), ready("d", time.Hour)),
			want: plan{Deletes: []deletion{{"a", reasonScaleDown}, {"c", reasonScaleDown}}},
		},
		{
			name: "stale members stand in while a fresh one is created within surge",
			in: base(3, 4, 1,
				withRev(ready("s1", 3*time.Hour), oldRev), withRev(ready("s2", 2*time.Hour), oldRev), withRev(ready("s3", time.Hour), oldRev)),
			want: plan{Creates: make([]netip.Addr, 1)},
		},
		{
			name: "once a fresh member is Ready the oldest stale one goes",
			in: base(3, 4, 1, ready("f1", time.Minute),
				withRev(ready("s1", 3*time.Hour), oldRev), withRev(ready("s2", 2*time.Hour), oldRev), withRev(ready("s3", time.Hour), oldRev)),
			want: plan{Deletes: []deletion{{"s1", reasonStaleImage}}, Creates: make([]netip.Addr, 1)},
		},
		{
			name: "without recycleOnImageChange an old revision is fresh",
			in: func() planInput {
				in := base(2, 4, 1, withRev(ready("s1", time.Hour), oldRev), withRev(ready("s2", time.Hour), oldRev))
				in.RecycleOnImageChange = false
				return in
			}(),
			want: plan{},
		},
		{
			name: "idle members past maxIdle are recycled like stale ones",
			in: func() planInput {
				in := base(1, 4, 1, withReadyFor(ready("idle", 3*time.Hour), 2*time.Hour), ready("new", time.Minute))
				in.MaxIdle = time.Hour
				return in
			}(),
			want: plan{Deletes: []deletion{{"idle", reasonIdleExpired}}},
		},
		{
			name: "at maxReplicas kept stale members are traded for room, oldest first",
			in: base(3, 3, 2,
				withRev(ready("s1", 3*time.Hour), oldRev), withRev(ready("s2", 2*time.Hour), oldRev), withRev(ready("s3", time.Hour), oldRev)),
			want: plan{Deletes: []deletion{{"s1", reasonStaleImage}, {"s2", reasonStaleImage}}, Creates: make([]netip.Addr, 2)},
		},
		{
			name: "claimed members take room but are never deleted nor warm",
			in:   base(2, 3, 2, claimedM("c1"), claimedM("c2")),
			want: plan{Creates: make([]netip.Addr, 1), BlockedOnCapacity: 1},
		},
		{
			name: "claimed members survive warm 0",
			in:   base(0, 0, 2, claimedM("c1")),
			want: plan{},
		},
		{
			name: "addresses skip every member's, deleting ones included, in list order",
			in: func() planInput {
				in := base(3, 10, 3, withAddr(provisioningM("p1", time.Minute), "10.0.0.1"),
					withAddr(withPhase(ready("gone", time.Hour), phaseDeleting), "10.0.0.2"),
					withAddr(provisioningM("late", timeout+1), "10.0.0.4"))
				in.Addresses = mustRanges(t, "10.0.0.1-10.0.0.2", "10.0.0.4", "10.0.0.8/30")
				return in
			}(),
			want: plan{Deletes: []deletion{{"late", reasonProvisioningTimeout}}, Creates: addrs("10.0.0.8", "10.0.0.9")},
		},
		{
			name: "an exhausted range blocks the rest",
			in: func() planInput {
				in := base(3, 10, 3)
				in.Addresses = mustRanges(t, "192.0.2.10-192.0.2.11")
				return in
			}(),
			want: plan{Creates: addrs("192.0.2.10", "192.0.2.11"), BlockedOnAddresses: 1},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := planPool(tc.in)
			if !samePlan(got, tc.want) {
				t.Errorf("plan =\n  %+v\nwant\n  %+v", got, tc.want)
			}
		})
	}
}

// samePlan compares plans, an empty list equal to none.
func samePlan(a, b plan) bool {
	return slices.Equal(a.Deletes, b.Deletes) && slices.Equal(a.Creates, b.Creates) &&
		a.BlockedOnCapacity == b.BlockedOnCapacity && a.BlockedOnAddresses == b.BlockedOnAddresses
}

// TestPlanPoolGuideRecycle walks the worked example of docs/guides/virtualmachine-pools.md:
// warm 3, max 4, surge 1, three Ready members on the old revision and one claimed.
func TestPlanPoolGuideRecycle(t *testing.T) {
	in := planInput{Warm: 3, MaxReplicas: 4, MaxSurge: 1, ProvisioningTimeout: timeout, RecycleOnImageChange: true, Revision: rev,
		Members: []member{claimedM("c"), withRev(ready("a1", 3*time.Hour), oldRev), withRev(ready("a2", 2*time.Hour), oldRev),
			withRev(ready("a3", time.Hour), oldRev)}}
	steps := []struct {
		deletes string
		creates int
	}{
		{"a1", 1}, // pass 1: trade the oldest stale member for the first new one
		{"", 0},   // pass 2: surge used up
		{"a2", 1}, // pass 3: the new member is Ready; trade again
		{"", 0},   // pass 4
		{"a3", 1}, // pass 5
		{"", 0},   // pass 6: done
	}
	for i, step := range steps {
		p := planPool(in)
		var deleted string
		for _, d := range p.Deletes {
			deleted += d.Name
		}
		if deleted != step.deletes || len(p.Creates) != step.creates {
			t.Fatalf("pass %d: plan %+v, want deletes %q and %d create(s)", i+1, p, step.deletes, step.creates)
		}
		// Apply: deleted members vanish, a new member provisions, and on the next even pass
		// every provisioning member becomes Ready.
		var next []member
		for _, m := range in.Members {
			switch {
			case m.Name == deleted:
			case m.Phase == phaseProvisioning && i%2 == 1:
				next = append(next, withPhase(m, phaseReady))
			default:
				next = append(next, m)
			}
		}
		for range p.Creates {
			next = append(next, provisioningM(fmt.Sprintf("b%d", i), time.Minute))
		}
		in.Members = next
	}
	for _, m := range in.Members {
		if m.Phase == phaseReady && m.Revision != rev {
			t.Errorf("stale member %s survived", m.Name)
		}
	}
}
