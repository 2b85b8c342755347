package controller

import (
	"reflect"
	"slices"
	"testing"

	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
)

// on is the placement on Provider (and failure domain) fd, as scheduledOn records it.
func on(fd string) banlieuev1.ScheduledPlacement {
	return *scheduledOn("x", fd).Status.Scheduled
}

func TestWithAssumed(t *testing.T) {
	type held struct{ name, fd string }
	tests := []struct {
		name     string
		cached   []banlieuev1.VirtualMachine
		assumed  map[string]banlieuev1.ScheduledPlacement
		wantView []held // "" fd: not scheduled
		wantDone []string
	}{
		{
			name:     "nothing assumed: the cache as it is",
			cached:   []banlieuev1.VirtualMachine{scheduledOn("web-01", "a"), *testVM("web-02")},
			wantView: []held{{"web-01", "a"}, {"web-02", ""}},
		},
		{
			name:     "a placement the cache does not show yet holds its failure domain",
			cached:   []banlieuev1.VirtualMachine{*testVM("web-01"), *testVM("web-02")},
			assumed:  map[string]banlieuev1.ScheduledPlacement{"web-01": on("a")},
			wantView: []held{{"web-01", ""}, {"web-02", ""}, {"web-01", "a"}},
		},
		{
			name:     "the cache shows the placement: the assumption is over",
			cached:   []banlieuev1.VirtualMachine{scheduledOn("web-01", "a")},
			assumed:  map[string]banlieuev1.ScheduledPlacement{"web-01": on("a")},
			wantView: []held{{"web-01", "a"}},
			wantDone: []string{"web-01"},
		},
		{
			name:     "a move counts in both places until the cache shows it",
			cached:   []banlieuev1.VirtualMachine{scheduledOn("web-01", "a")},
			assumed:  map[string]banlieuev1.ScheduledPlacement{"web-01": on("b")},
			wantView: []held{{"web-01", "a"}, {"web-01", "b"}},
		},
		{
			name:     "a VM the cache no longer lists was deleted",
			cached:   []banlieuev1.VirtualMachine{*testVM("web-02")},
			assumed:  map[string]banlieuev1.ScheduledPlacement{"web-01": on("a"), "web-00": on("b")},
			wantView: []held{{"web-02", ""}},
			wantDone: []string{"web-00", "web-01"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := slices.Clone(tt.cached)
			view, done := withAssumed(tt.cached, tt.assumed)
			var got []held
			for _, vm := range view {
				h := held{name: vm.Name}
				if vm.Status.Scheduled != nil {
					h.fd = vm.Status.Scheduled.FailureDomain
				}
				got = append(got, h)
			}
			if !reflect.DeepEqual(got, tt.wantView) {
				t.Errorf("view %v, want %v", got, tt.wantView)
			}
			if !slices.Equal(done, tt.wantDone) {
				t.Errorf("done %v, want %v", done, tt.wantDone)
			}
			if !reflect.DeepEqual(tt.cached, before) {
				t.Errorf("the cached list was changed: %+v", tt.cached)
			}
		})
	}
}

// TestAssumeAndSettle: a decision sees the placements decided before it in its namespace and
// not yet cached; an assumption its pass did not write is dropped, and the one it replaced is
// back; one its pass wrote stays until the cache shows it.
func TestAssumeAndSettle(t *testing.T) {
	providers := []banlieuev1.Provider{testProvider("a"), testProvider("b")}
	image := testImage(readyRow("a"), readyRow("b"))
	assumed := newAssumedPlacements()
	decide := func(name string, cached []banlieuev1.VirtualMachine) (string, *assumption) {
		t.Helper()
		vm := testVM(name, withAntiAffinity("required"))
		d, as, err := assumed.decide(vm, nil, cached, nil, func(siblings, _ []banlieuev1.VirtualMachine) (decision, error) {
			return schedule(scheduleInput{VM: vm, Class: testClass(), Image: image, Providers: providers, Siblings: siblings})
		})
		if err != nil {
			return err.(*scheduleError).Reason, as
		}
		return d.FailureDomain.Name, as
	}
	// The cache shows neither VM placed, as when both are decided at once.
	cached := []banlieuev1.VirtualMachine{*testVM("web-01"), *testVM("web-02"), *testVM("web-03")}
	fd1, as1 := decide("web-01", cached)
	fd2, as2 := decide("web-02", cached)
	if fd1 != "a" || fd2 != "b" {
		t.Fatalf("web-01 on %s, web-02 on %s: want a and b, the second seeing the first's assumed placement", fd1, fd2)
	}
	if got, _ := decide("web-03", cached); got != banlieuev1.ReasonAntiAffinityUnsatisfied {
		t.Errorf("web-03: %s, want %s while both placements are assumed", got, banlieuev1.ReasonAntiAffinityUnsatisfied)
	}
	// web-02's pass did not write its placement: b is free again.
	as2.settle(nil)
	if got, _ := decide("web-03", cached); got != "b" {
		t.Errorf("web-03 after web-02's pass failed: %s, want b", got)
	}
	// web-01's pass wrote a: it stays assumed while the cache lags.
	written := as1.placement
	as1.settle(&written)
	if got, _ := decide("web-02", cached); got != banlieuev1.ReasonAntiAffinityUnsatisfied {
		t.Errorf("web-02 with a assumed for web-01 and b for web-03: %s", got)
	}

	// A second pass of web-01 re-assumes a from a lagging cache and fails: the first
	// assumption, which its write confirmed, is back.
	_, again := decide("web-01", cached)
	again.settle(nil)
	if fd, _ := decide("web-09", []banlieuev1.VirtualMachine{*testVM("web-01"), *testVM("web-09")}); fd != "b" {
		t.Errorf("web-09: %s, want b while web-01's written placement on a is not cached", fd)
	}
	// Once the cache shows web-01 on a, its assumption is over and it is the cache that blocks a.
	web01 := testVM("web-01", withAntiAffinity("required"))
	web01.Status.Scheduled = &written
	cachedNow := []banlieuev1.VirtualMachine{*web01, *testVM("web-09")}
	if fd, _ := decide("web-09", cachedNow); fd != "b" {
		t.Errorf("web-09 with web-01 cached on a: %s, want b", fd)
	}
	if _, ok := assumed.namespace(testNS).byName["web-01"]; ok {
		t.Error("web-01's assumption outlived the cache showing it")
	}
}
