package controller

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
)

var drainT0 = metav1.NewTime(time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC))

func drainedProvider(maxConcurrent int32, prev *banlieuev1.ProviderDrainStatus) *banlieuev1.Provider {
	p := &banlieuev1.Provider{}
	p.Namespace, p.Name = "fleet", "kvm-a"
	p.Spec.Unschedulable = true
	p.Spec.Drain = &banlieuev1.ProviderDrain{MaxConcurrent: ptr.To(maxConcurrent)}
	p.Status.Drain = prev
	return p
}

// drainVM is a VM of namespace ns placed on fleet/kvm-a under policy.
func drainVM(ns, name, policy string, mutate ...func(*banlieuev1.VirtualMachine)) banlieuev1.VirtualMachine {
	vm := banlieuev1.VirtualMachine{}
	vm.Namespace, vm.Name = ns, name
	vm.Spec.MigrationPolicy = policy
	vm.Status.Scheduled = &banlieuev1.ScheduledPlacement{ProviderNamespace: "fleet", ProviderName: "kvm-a"}
	for _, m := range mutate {
		m(&vm)
	}
	return vm
}

func names(vs []banlieuev1.DrainVM) []string {
	out := []string{}
	for _, v := range vs {
		out = append(out, drainKey(v.Namespace, v.Name)+":"+v.Reason)
	}
	return out
}

// drainMigrationsOf are the drain's migrations of the given "phase[/reason]" by VM key.
func drainMigrationsOf(phases map[string]banlieuev1.MigrationPhase) map[string]*banlieuev1.VirtualMachineMigration {
	out := map[string]*banlieuev1.VirtualMachineMigration{}
	for key, pr := range phases {
		phase, reason, _ := strings.Cut(string(pr), "/")
		m := &banlieuev1.VirtualMachineMigration{}
		m.Status.Phase = banlieuev1.MigrationPhase(phase)
		if reason != "" {
			m.Status.Conditions = []metav1.Condition{{Type: banlieuev1.ConditionReady, Status: metav1.ConditionFalse, Reason: reason, Message: "why"}}
		}
		out[key] = m
	}
	return out
}

func TestPlanDrain(t *testing.T) {
	approved := func(vm *banlieuev1.VirtualMachine) {
		vm.Annotations = map[string]string{banlieuev1.AnnotationMigrate: "true"}
	}
	paused := func(vm *banlieuev1.VirtualMachine) { vm.Spec.Paused = true }
	noHost := func(vm *banlieuev1.VirtualMachine) {
		vm.Status.Conditions = []metav1.Condition{{Type: banlieuev1.ConditionPlacementValid, Status: metav1.ConditionFalse,
			Reason: banlieuev1.ReasonNoHostFits, Message: "no room"}}
	}
	moving := func(keys ...string) []banlieuev1.DrainVM {
		var out []banlieuev1.DrainVM
		for _, k := range keys {
			out = append(out, banlieuev1.DrainVM{Namespace: "t", Name: k, Since: drainT0})
		}
		return out
	}
	later := metav1.NewTime(drainT0.Add(time.Minute))
	for _, tc := range []struct {
		name        string
		max         int32
		prev        *banlieuev1.ProviderDrainStatus
		vms         []banlieuev1.VirtualMachine
		now         metav1.Time
		migs        map[string]banlieuev1.MigrationPhase // phase[/Ready reason] by VM key
		phase       string
		wantMoving  []string
		wantBlocked []string
	}{
		{
			name: "live and liveOrRecreate move live, in the same slots as the others",
			max:  2, now: drainT0,
			vms:        []banlieuev1.VirtualMachine{drainVM("t", "a", "live"), drainVM("t", "b", "liveOrRecreate"), drainVM("t", "c", "recreate")},
			phase:      banlieuev1.DrainDraining,
			wantMoving: []string{"t/a:LiveMigration", "t/b:LiveMigration"}, wantBlocked: []string{},
		},
		{
			name: "a live move under way keeps its slot, whatever its phase",
			max:  1, now: later,
			prev:  &banlieuev1.ProviderDrainStatus{Phase: banlieuev1.DrainDraining, StartedAt: drainT0, Total: 2, Remaining: 2, Moving: moving("a")},
			vms:   []banlieuev1.VirtualMachine{drainVM("t", "a", "live"), drainVM("t", "b", "recreate")},
			migs:  map[string]banlieuev1.MigrationPhase{"t/a": banlieuev1.MigrationMigrating},
			phase: banlieuev1.DrainDraining, wantMoving: []string{"t/a:LiveMigration"}, wantBlocked: []string{},
		},
		{
			name: "a failed live move is listed, never recreated, and frees its slot",
			max:  1, now: later,
			prev: &banlieuev1.ProviderDrainStatus{Phase: banlieuev1.DrainDraining, StartedAt: drainT0, Total: 3, Remaining: 3, Moving: moving("a")},
			vms:  []banlieuev1.VirtualMachine{drainVM("t", "a", "live"), drainVM("t", "b", "liveOrRecreate"), drainVM("t", "c", "recreate")},
			migs: map[string]banlieuev1.MigrationPhase{"t/a": banlieuev1.MigrationFailed + "/" + banlieuev1.ReasonMigrationTimeout,
				"t/b": banlieuev1.MigrationCancelled + "/" + banlieuev1.ReasonMigrationCancelled},
			phase: banlieuev1.DrainDraining, wantMoving: []string{"t/c:"},
			wantBlocked: []string{"t/a:LiveMigrationFailed", "t/b:LiveMigrationFailed"},
		},
		{
			name: "liveOrRecreate is recreated only when the live move was refused as impossible",
			max:  4, now: later,
			prev: &banlieuev1.ProviderDrainStatus{Phase: banlieuev1.DrainDraining, StartedAt: drainT0, Total: 4, Remaining: 4, Moving: moving("a", "b", "c", "d")},
			vms: []banlieuev1.VirtualMachine{drainVM("t", "a", "liveOrRecreate"), drainVM("t", "b", "liveOrRecreate"),
				drainVM("t", "c", "live"), drainVM("t", "d", "liveOrRecreate")},
			migs: map[string]banlieuev1.MigrationPhase{"t/a": banlieuev1.MigrationFailed + "/" + banlieuev1.ReasonVMNotRunning,
				"t/b": banlieuev1.MigrationFailed + "/" + banlieuev1.ReasonLiveMigrationUnsupported,
				"t/c": banlieuev1.MigrationFailed + "/" + banlieuev1.ReasonVMNotRunning,
				"t/d": banlieuev1.MigrationFailed + "/" + banlieuev1.ReasonNoHostFits},
			phase: banlieuev1.DrainDraining, wantMoving: []string{"t/a:LiveMigrationImpossible", "t/b:LiveMigrationImpossible"},
			wantBlocked: []string{"t/c:LiveMigrationFailed", "t/d:LiveMigrationFailed"},
		},
		{
			name: "a VM its migration moved but not yet handed over stays moving",
			max:  1, now: later,
			prev:  &banlieuev1.ProviderDrainStatus{Phase: banlieuev1.DrainDraining, StartedAt: drainT0, Total: 1, Remaining: 1, Moving: moving("a")},
			vms:   []banlieuev1.VirtualMachine{drainVM("t", "a", "live")},
			migs:  map[string]banlieuev1.MigrationPhase{"t/a": banlieuev1.MigrationSucceeded},
			phase: banlieuev1.DrainDraining, wantMoving: []string{"t/a:LiveMigration"}, wantBlocked: []string{},
		},
		{name: "empty host is drained at once", max: 1, now: drainT0, phase: banlieuev1.DrainDrained, wantMoving: []string{}, wantBlocked: []string{}},
		{
			name: "slots go in name order; policies that forbid a move are listed",
			max:  2, now: drainT0,
			vms: []banlieuev1.VirtualMachine{drainVM("t", "d", "recreate"), drainVM("t", "a", "never"), drainVM("t", "c", "automatic"),
				drainVM("t", "b", "manual"), drainVM("t", "e", ""), drainVM("t", "f", "manual", approved), drainVM("t", "g", "recreate", paused)},
			phase:      banlieuev1.DrainDraining,
			wantMoving: []string{"t/c:", "t/d:"},
			wantBlocked: []string{"t/a:MigrationPolicyNever", "t/b:AwaitingApproval", "t/e:MigrationPolicyNever",
				"t/g:Paused"},
		},
		{
			name: "a moving VM keeps its slot; the freed slot goes to the next",
			max:  2, now: later,
			prev: &banlieuev1.ProviderDrainStatus{Phase: banlieuev1.DrainDraining, StartedAt: drainT0, Total: 4, Remaining: 4, Moving: moving("c", "d")},
			vms:  []banlieuev1.VirtualMachine{drainVM("t", "b", "recreate"), drainVM("t", "d", "recreate"), drainVM("t", "f", "recreate")},
			// c left the host; b sorts before f.
			phase: banlieuev1.DrainDraining, wantMoving: []string{"t/d:", "t/b:"}, wantBlocked: []string{},
		},
		{
			name: "a moving VM no host can hold is blocked, not retried at once",
			max:  1, now: later,
			prev:  &banlieuev1.ProviderDrainStatus{Phase: banlieuev1.DrainDraining, StartedAt: drainT0, Total: 1, Remaining: 1, Moving: moving("a")},
			vms:   []banlieuev1.VirtualMachine{drainVM("t", "a", "recreate", noHost)},
			phase: banlieuev1.DrainBlocked, wantMoving: []string{}, wantBlocked: []string{"t/a:NoHostFits"},
		},
		{
			name: "a NoHostFits VM whose condition cleared stays blocked until the retry",
			max:  1, now: metav1.NewTime(drainT0.Add(drainRetry - time.Second)),
			prev: &banlieuev1.ProviderDrainStatus{Phase: banlieuev1.DrainBlocked, StartedAt: drainT0, Total: 1, Remaining: 1,
				Blocked: []banlieuev1.DrainVM{{Namespace: "t", Name: "a", Reason: banlieuev1.ReasonDrainNoHostFits, Since: drainT0}}},
			vms:   []banlieuev1.VirtualMachine{drainVM("t", "a", "recreate")},
			phase: banlieuev1.DrainBlocked, wantMoving: []string{}, wantBlocked: []string{"t/a:NoHostFits"},
		},
		{
			name: "after the retry it moves again",
			max:  1, now: metav1.NewTime(drainT0.Add(drainRetry)),
			prev: &banlieuev1.ProviderDrainStatus{Phase: banlieuev1.DrainBlocked, StartedAt: drainT0, Total: 1, Remaining: 1,
				Blocked: []banlieuev1.DrainVM{{Namespace: "t", Name: "a", Reason: banlieuev1.ReasonDrainNoHostFits, Since: drainT0}}},
			vms:   []banlieuev1.VirtualMachine{drainVM("t", "a", "recreate")},
			phase: banlieuev1.DrainDraining, wantMoving: []string{"t/a:"}, wantBlocked: []string{},
		},
		{
			name: "a NoHostFits condition on a VM the drain did not move is not its verdict",
			max:  1, now: drainT0,
			vms:   []banlieuev1.VirtualMachine{drainVM("t", "a", "recreate", noHost)},
			phase: banlieuev1.DrainDraining, wantMoving: []string{"t/a:"}, wantBlocked: []string{},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := planDrain(drainedProvider(tc.max, tc.prev), tc.vms, drainMigrationsOf(tc.migs), tc.now)
			if got.Phase != tc.phase {
				t.Errorf("phase = %s, want %s", got.Phase, tc.phase)
			}
			if m := names(got.Moving); !reflect.DeepEqual(m, tc.wantMoving) {
				t.Errorf("moving = %v, want %v", m, tc.wantMoving)
			}
			if b := names(got.Blocked); !reflect.DeepEqual(b, tc.wantBlocked) {
				t.Errorf("blocked = %v, want %v", b, tc.wantBlocked)
			}
			if got.Remaining != int32(len(tc.vms)) {
				t.Errorf("remaining = %d, want %d", got.Remaining, len(tc.vms))
			}
			if tc.prev != nil && !got.StartedAt.Equal(&tc.prev.StartedAt) {
				t.Errorf("startedAt = %s, want the first pass's %s", got.StartedAt, tc.prev.StartedAt)
			}
		})
	}
	if got := planDrain(&banlieuev1.Provider{}, []banlieuev1.VirtualMachine{drainVM("t", "a", "recreate")}, nil, drainT0); got != nil {
		t.Errorf("a Provider without spec.drain has a plan: %+v", got)
	}
}

// TestPlanDrainProperties runs random drains to their end, the VMs moving as the plan says: the
// moving list never exceeds maxConcurrent or holds a VM its policy keeps, the same input gives
// the same plan, and the drain ends with only the VMs that may not move, each listed.
func TestPlanDrainProperties(t *testing.T) {
	policies := []string{"recreate", "automatic", "manual", "never", "", "live", "liveOrRecreate"}
	for seed := range uint64(300) {
		rng := rand.New(rand.NewPCG(seed, 7))
		maxC := int32(1 + rng.IntN(4))
		var vms []banlieuev1.VirtualMachine
		keep := map[string]bool{}
		for i := range rng.IntN(40) {
			vm := drainVM(fmt.Sprintf("ns-%d", rng.IntN(3)), fmt.Sprintf("vm-%02d", i), policies[rng.IntN(len(policies))])
			if rng.IntN(5) == 0 {
				vm.Annotations = map[string]string{banlieuev1.AnnotationMigrate: "true"}
			}
			if r, _ := unmovable(&vm); r != "" {
				keep[drainKey(vm.Namespace, vm.Name)] = true
			}
			vms = append(vms, vm)
		}
		p := drainedProvider(maxC, nil)
		now := drainT0
		for step := 0; ; step++ {
			plan := planDrain(p, vms, nil, now)
			if again := planDrain(p, vms, nil, now); !reflect.DeepEqual(plan, again) {
				t.Fatalf("seed %d step %d: two plans of one input differ", seed, step)
			}
			if len(plan.Moving) > int(maxC) {
				t.Fatalf("seed %d step %d: %d moving, max %d", seed, step, len(plan.Moving), maxC)
			}
			for _, v := range plan.Moving {
				if keep[drainKey(v.Namespace, v.Name)] {
					t.Fatalf("seed %d step %d: %s moves against its policy", seed, step, drainKey(v.Namespace, v.Name))
				}
			}
			if len(plan.Moving) == 0 {
				if len(plan.Blocked) != len(keep) || int(plan.Remaining) != len(keep) {
					t.Fatalf("seed %d: drain ended with %d blocked, %d remaining, want %d", seed, len(plan.Blocked), plan.Remaining, len(keep))
				}
				want := banlieuev1.DrainBlocked
				if len(keep) == 0 {
					want = banlieuev1.DrainDrained
				}
				if plan.Phase != want {
					t.Fatalf("seed %d: ended in %s, want %s", seed, plan.Phase, want)
				}
				break
			}
			if step > 100 {
				t.Fatalf("seed %d: the drain did not end", seed)
			}
			// One moving VM (chosen at random) lands elsewhere.
			gone := plan.Moving[rng.IntN(len(plan.Moving))]
			for i := range vms {
				if vms[i].Namespace == gone.Namespace && vms[i].Name == gone.Name {
					vms = append(vms[:i], vms[i+1:]...)
					break
				}
			}
			p.Status.Drain = plan
			now = metav1.NewTime(now.Add(time.Second))
		}
	}
}

// TestDrainMigrationName: one name per VM and drain, another for the next drain of the host.
func TestDrainMigrationName(t *testing.T) {
	p := drainedProvider(1, nil)
	a := drainMigrationName(p, drainT0, "web-1")
	if again := drainMigrationName(p, drainT0, "web-1"); again != a {
		t.Errorf("two names for one drain: %s, %s", a, again)
	}
	if next := drainMigrationName(p, metav1.NewTime(drainT0.Add(time.Hour)), "web-1"); next == a {
		t.Errorf("the next drain reuses %s", a)
	}
	if other := drainMigrationName(p, drainT0, "web-2"); other == a || !strings.HasPrefix(a, "web-1-drain-") {
		t.Errorf("names %s and %s", a, other)
	}
}

// TestEvictingSkipsLiveMoves: the VM reconciler places afresh (recreates) only a VM the drain
// moves other than live.
func TestEvictingSkipsLiveMoves(t *testing.T) {
	for _, tc := range []struct {
		reason string
		want   bool
	}{{"", true}, {banlieuev1.ReasonDrainLiveImpossible, true}, {banlieuev1.ReasonDrainMovingLive, false}} {
		p := drainedProvider(1, &banlieuev1.ProviderDrainStatus{Moving: []banlieuev1.DrainVM{{Namespace: "t", Name: "a", Reason: tc.reason}}})
		vm := drainVM("t", "a", "liveOrRecreate")
		if got := evicting(&vm, []banlieuev1.Provider{*p}); got != tc.want {
			t.Errorf("moving with reason %q: evicting = %v, want %v", tc.reason, got, tc.want)
		}
	}
}

func TestOnlyIgnoredStatusChanged(t *testing.T) {
	base := drainedProvider(2, &banlieuev1.ProviderDrainStatus{Phase: banlieuev1.DrainDraining, StartedAt: drainT0})
	for _, tc := range []struct {
		name   string
		mutate func(*banlieuev1.Provider)
		want   bool
	}{
		{"status.drain's moving list", func(p *banlieuev1.Provider) {
			p.Status.Drain.Moving = []banlieuev1.DrainVM{{Namespace: "t", Name: "a", Since: drainT0}}
		}, true},
		{"status.drain removed", func(p *banlieuev1.Provider) { p.Status.Drain = nil }, true},
		{"status.allocated", func(p *banlieuev1.Provider) {
			p.Status.Allocated = []banlieuev1.FailureDomainAllocation{{Name: "kvm-a", VirtualMachines: 1, CPUs: 2, MemoryMiB: 2048}}
		}, true},
		{"status.consoleKeys", func(p *banlieuev1.Provider) {
			p.Status.ConsoleKeys = []banlieuev1.ConsoleKey{{Pod: "p-0", SHA256: strings.Repeat("ab", 32), RenewedAt: drainT0}}
		}, true},
		{"the capacity", func(p *banlieuev1.Provider) {
			p.Status.FailureDomains = []banlieuev1.FailureDomain{{Name: "kvm-a"}}
		}, false},
		{"the spec", func(p *banlieuev1.Provider) { p.Spec.Drain = nil }, false},
		{"a label", func(p *banlieuev1.Provider) { p.Labels = map[string]string{"rack": "r2"} }, false},
	} {
		after := base.DeepCopy()
		tc.mutate(after)
		if got := onlyIgnoredStatusChanged(base, after); got != tc.want {
			t.Errorf("%s: onlyIgnoredStatusChanged = %v, want %v", tc.name, got, tc.want)
		}
	}
}
