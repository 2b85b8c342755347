package controller

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
	"banlieue.io/banlieue/internal/testenv"
)

// drainFleet is a namespace with hosts kvm-a (large) and kvm-b (small, cordoned until the
// drain) and VMs of the given policies placed on kvm-a; it returns the machines' UIDs.
func (s *suite) drainFleet(ctx context.Context, t *testing.T, ns, image string, vms map[string]string) map[string]types.UID {
	t.Helper()
	s.namespace(ctx, t, ns)
	s.sizedProvider(ctx, t, ns, "kvm-a", 32, 65536)
	s.sizedProvider(ctx, t, ns, "kvm-b", 8, 9216)
	s.patchProvider(ctx, t, ns, "kvm-b", func(p *banlieuev1.Provider) { p.Spec.Unschedulable = true })
	s.image(ctx, t, image, banlieuev1.InstallImmediate, readyRowIn(ns, "kvm-a"), readyRowIn(ns, "kvm-b"))
	for name, policy := range vms {
		class := "small"
		if strings.HasPrefix(name, "big") {
			class = "big-" + ns
		}
		vm := guideVM(ns, name, class, image, nil)
		vm.Spec.MigrationPolicy = policy
		s.create(ctx, t, vm)
	}
	if per := s.placements(ctx, t, ns, "", len(vms)); per["kvm-a"] != len(vms) {
		t.Fatalf("placements before the drain = %v, want all on kvm-a", per)
	}
	uids := map[string]types.UID{}
	for name := range vms {
		uids[name] = s.waitMachine(ctx, t, ns, name).UID
	}
	return uids
}

// drainStatus waits until kvm-a's status.drain satisfies ok, checking on every read that no
// more VMs move at once than spec.drain.maxConcurrent allows.
func (s *suite) drainStatus(ctx context.Context, t *testing.T, ns, what string, ok func(*banlieuev1.ProviderDrainStatus) bool) *banlieuev1.ProviderDrainStatus {
	t.Helper()
	var got *banlieuev1.ProviderDrainStatus
	testenv.Eventually(t, 3*waitTimeout, "kvm-a's drain "+what, func() error {
		var p banlieuev1.Provider
		if err := s.c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "kvm-a"}, &p); err != nil {
			return err
		}
		got = p.Status.Drain
		if got != nil && p.Spec.Drain != nil && len(got.Moving) > int(ptr.Deref(p.Spec.Drain.MaxConcurrent, 1)) {
			t.Fatalf("%d VMs moving at once, maxConcurrent %d: %+v", len(got.Moving), *p.Spec.Drain.MaxConcurrent, got.Moving)
		}
		return testenv.Unmet(got != nil && ok(got), fmt.Sprintf("%+v", got))
	})
	return got
}

// testDrain: a drain refused without its cordon; then, with it, moves the recreate and
// automatic VMs two at a time onto kvm-b, lists the manual one until it is approved and the
// never one for good, keeps a VM no other host can hold where it is (its machine untouched),
// and uncordoning ends it.
func (s *suite) testDrain(ctx context.Context, t *testing.T) {
	ns := "ns-dr"
	big := guideClass("big-"+ns, false)
	big.Spec.Hardware.MemoryMiB = 16384
	s.create(ctx, t, big)
	uids := s.drainFleet(ctx, t, ns, "img-dr", map[string]string{
		"r1": "recreate", "r2": "recreate", "r3": "automatic", "m1": "manual", "n1": "never", "big1": "recreate"})

	var p banlieuev1.Provider
	if err := s.c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "kvm-a"}, &p); err != nil {
		t.Fatal(err)
	}
	orig := p.DeepCopy()
	p.Spec.Drain = &banlieuev1.ProviderDrain{MaxConcurrent: ptr.To[int32](2)}
	if err := s.c.Patch(ctx, &p, client.MergeFrom(orig)); !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "spec.drain needs spec.unschedulable") {
		t.Fatalf("a drain without the cordon: %v, want Invalid naming spec.unschedulable", err)
	}

	s.patchProvider(ctx, t, ns, "kvm-b", func(p *banlieuev1.Provider) { p.Spec.Unschedulable = false })
	s.patchProvider(ctx, t, ns, "kvm-a", func(p *banlieuev1.Provider) {
		p.Spec.Unschedulable = true
		p.Spec.Drain = &banlieuev1.ProviderDrain{MaxConcurrent: ptr.To[int32](2)}
	})
	st := s.drainStatus(ctx, t, ns, "Blocked with m1, n1 and big1 left", func(st *banlieuev1.ProviderDrainStatus) bool {
		return st.Phase == banlieuev1.DrainBlocked && st.Remaining == 3
	})
	if st.Total != 6 {
		t.Errorf("total = %d, want 6", st.Total)
	}
	reasons := map[string]string{}
	for _, v := range st.Blocked {
		reasons[v.Name] = v.Reason
	}
	want := map[string]string{"m1": banlieuev1.ReasonDrainAwaitingApproval, "n1": banlieuev1.ReasonDrainMigrationNever,
		"big1": banlieuev1.ReasonDrainNoHostFits}
	if fmt.Sprint(reasons) != fmt.Sprint(want) {
		t.Fatalf("blocked = %v, want %v (%+v)", reasons, want, st.Blocked)
	}
	for _, name := range []string{"r1", "r2", "r3"} {
		vm := s.waitVM(ctx, t, ns, name, "on kvm-b", func(vm *banlieuev1.VirtualMachine) bool {
			return vm.Status.Scheduled != nil && vm.Status.Scheduled.ProviderName == "kvm-b"
		})
		if m := s.waitMachine(ctx, t, ns, name); m.Spec.ProviderRef.Name != "kvm-b" || m.UID == uids[name] {
			t.Errorf("%s: machine on %s (uid %s, was %s), want a new one on kvm-b", vm.Name, m.Spec.ProviderRef.Name, m.UID, uids[name])
		}
	}
	// What cannot move was not touched: the same machines, on kvm-a, and big1 says why.
	for _, name := range []string{"m1", "n1", "big1"} {
		if m := s.waitMachine(ctx, t, ns, name); m.UID != uids[name] || !m.DeletionTimestamp.IsZero() || m.Spec.ProviderRef.Name != "kvm-a" {
			t.Errorf("%s: machine uid %s on %s, deleting %v; want the original on kvm-a", name, m.UID, m.Spec.ProviderRef.Name, !m.DeletionTimestamp.IsZero())
		}
	}
	s.waitVM(ctx, t, ns, "big1", "PlacementValid=True again once the drain stopped moving it", func(vm *banlieuev1.VirtualMachine) bool {
		return hasCondition(vm.Status.Conditions, banlieuev1.ConditionPlacementValid, metav1.ConditionTrue, banlieuev1.ReasonReconciled)
	})
	var big1 banlieuev1.DrainVM
	for _, v := range st.Blocked {
		if v.Name == "big1" {
			big1 = v
		}
	}
	if !strings.Contains(big1.Message, "no other host can hold the VM") || !strings.Contains(big1.Message, string(banlieuev1.ReasonInsufficientCapacity)) &&
		!strings.Contains(big1.Message, "memory") {
		t.Errorf("big1's blocked message %q does not say why", big1.Message)
	}

	s.patchVM(ctx, t, ns, "m1", func(vm *banlieuev1.VirtualMachine) {
		vm.Annotations = map[string]string{banlieuev1.AnnotationMigrate: "true"}
	})
	s.drainStatus(ctx, t, ns, "Blocked with n1 and big1 left", func(st *banlieuev1.ProviderDrainStatus) bool {
		return st.Phase == banlieuev1.DrainBlocked && st.Remaining == 2
	})
	testenv.Eventually(t, waitTimeout, "kvm-a's drain events", func() error {
		keys := testenv.EventKeys(testenv.EventsAbout(ctx, t, s.c, ns, "kvm-a"))
		for _, want := range []string{"Normal/" + banlieuev1.ReasonDrainStarted, "Normal/" + banlieuev1.ReasonDrainMoving, "Warning/" + banlieuev1.ReasonDrainBlocked} {
			if !slices.Contains(keys, want) {
				return fmt.Errorf("events %v lack %s", keys, want)
			}
		}
		return nil
	})

	s.patchProvider(ctx, t, ns, "kvm-a", func(p *banlieuev1.Provider) { p.Spec.Unschedulable, p.Spec.Drain = false, nil })
	testenv.Eventually(t, 3*waitTimeout, "status.drain removed after uncordon", func() error {
		var p banlieuev1.Provider
		if err := s.c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "kvm-a"}, &p); err != nil {
			return err
		}
		return testenv.Unmet(p.Status.Drain == nil && len(p.Status.FailureDomains) == 1, fmt.Sprintf("%+v", p.Status))
	})
	if m := s.waitMachine(ctx, t, ns, "n1"); m.UID != uids["n1"] {
		t.Errorf("n1's machine was replaced")
	}
}

// testDrainLive: a drain creates a VirtualMachineMigration for a live and a liveOrRecreate VM
// and recreates neither while they move. Nothing runs them here (the VMs are not running), so
// both migrations are refused as impossible: the live VM stays where it is, untouched, listed
// LiveMigrationFailed; the liveOrRecreate one is recreated on the other host.
func (s *suite) testDrainLive(ctx context.Context, t *testing.T) {
	ns := "ns-drl"
	uids := s.drainFleet(ctx, t, ns, "img-drl", map[string]string{"l1": "live", "lr1": "liveOrRecreate"})
	s.patchProvider(ctx, t, ns, "kvm-b", func(p *banlieuev1.Provider) { p.Spec.Unschedulable = false })
	s.patchProvider(ctx, t, ns, "kvm-a", func(p *banlieuev1.Provider) {
		p.Spec.Unschedulable = true
		p.Spec.Drain = &banlieuev1.ProviderDrain{MaxConcurrent: ptr.To[int32](2)}
	})
	st := s.drainStatus(ctx, t, ns, "Blocked with l1 left", func(st *banlieuev1.ProviderDrainStatus) bool {
		return st.Phase == banlieuev1.DrainBlocked && st.Remaining == 1
	})
	var p banlieuev1.Provider
	if err := s.c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "kvm-a"}, &p); err != nil {
		t.Fatal(err)
	}
	for _, vm := range []string{"l1", "lr1"} {
		var m banlieuev1.VirtualMachineMigration
		if err := s.c.Get(ctx, client.ObjectKey{Namespace: ns, Name: drainMigrationName(&p, st.StartedAt, vm)}, &m); err != nil {
			t.Fatalf("the drain's migration of %s: %v", vm, err)
		}
		ready, msg := readyOf(m.Status)
		if m.Spec.VMName != vm || m.Spec.TargetProvider != nil || m.Annotations[banlieuev1.AnnotationDrainedProvider] != ns+"/kvm-a" ||
			m.Status.Phase != banlieuev1.MigrationFailed || !strings.HasSuffix(ready, "/"+banlieuev1.ReasonVMNotRunning) {
			t.Errorf("%s's migration: spec %+v, annotations %v, phase %s, Ready %s %q; want the VM, no target, the drained Provider, "+
				"refused VMNotRunning", vm, m.Spec, m.Annotations, m.Status.Phase, ready, msg)
		}
	}
	if len(st.Blocked) != 1 || st.Blocked[0].Name != "l1" || st.Blocked[0].Reason != banlieuev1.ReasonDrainLiveMigrationFailed ||
		!strings.Contains(st.Blocked[0].Message, banlieuev1.ReasonVMNotRunning) {
		t.Fatalf("blocked = %+v, want l1 LiveMigrationFailed naming VMNotRunning", st.Blocked)
	}
	if m := s.waitMachine(ctx, t, ns, "l1"); m.UID != uids["l1"] || !m.DeletionTimestamp.IsZero() || m.Spec.ProviderRef.Name != "kvm-a" {
		t.Errorf("l1: machine uid %s on %s, deleting %v; want the original on kvm-a", m.UID, m.Spec.ProviderRef.Name, !m.DeletionTimestamp.IsZero())
	}
	s.waitVM(ctx, t, ns, "lr1", "on kvm-b", func(vm *banlieuev1.VirtualMachine) bool {
		return vm.Status.Scheduled != nil && vm.Status.Scheduled.ProviderName == "kvm-b"
	})
	if m := s.waitMachine(ctx, t, ns, "lr1"); m.Spec.ProviderRef.Name != "kvm-b" || m.UID == uids["lr1"] {
		t.Errorf("lr1: machine on %s (uid %s, was %s), want a new one on kvm-b", m.Spec.ProviderRef.Name, m.UID, uids["lr1"])
	}
}

// TestDrainResumesAfterControllerRestart stops the controller in the middle of a drain (one VM
// at a time) and starts another: the drain goes on from its status and ends Drained, with the
// count and start of the first.
func TestDrainResumesAfterControllerRestart(t *testing.T) {
	env := testenv.Start(t)
	ctx := context.Background()
	start := func() func() error {
		mgr := env.NewManager(t)
		if err := Setup(mgr, Options{}); err != nil {
			t.Fatal(err)
		}
		return testenv.StartManager(t, mgr)
	}
	stop := start()
	s := &suite{c: env.Client, cfg: env.Config}
	s.create(ctx, t, guideClass("small", false))
	ns := "ns-drr"
	s.drainFleet(ctx, t, ns, "img-drr", map[string]string{"a1": "recreate", "a2": "recreate", "a3": "recreate"})
	s.patchProvider(ctx, t, ns, "kvm-b", func(p *banlieuev1.Provider) { p.Spec.Unschedulable = false })
	s.patchProvider(ctx, t, ns, "kvm-a", func(p *banlieuev1.Provider) {
		p.Spec.Unschedulable = true
		p.Spec.Drain = &banlieuev1.ProviderDrain{}
	})
	first := s.drainStatus(ctx, t, ns, "one VM moved", func(st *banlieuev1.ProviderDrainStatus) bool { return st.Remaining <= 2 })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	start()
	st := s.drainStatus(ctx, t, ns, "Drained", func(st *banlieuev1.ProviderDrainStatus) bool { return st.Phase == banlieuev1.DrainDrained })
	if st.Total != 3 || st.Remaining != 0 || !st.StartedAt.Equal(&first.StartedAt) {
		t.Fatalf("after the restart: total %d, remaining %d, started %s; want 3, 0, %s", st.Total, st.Remaining, st.StartedAt, first.StartedAt)
	}
	for _, name := range []string{"a1", "a2", "a3"} {
		if m := s.waitMachine(ctx, t, ns, name); m.Spec.ProviderRef.Name != "kvm-b" {
			t.Errorf("%s's machine is on %s, want kvm-b", name, m.Spec.ProviderRef.Name)
		}
	}
}

// TestDrainLiveAsInstalledAccount runs testDrainLive with the controller acting as its installed
// ClusterRole (config/rbac/controller/role.yaml): the drain may create the migrations it needs,
// and nothing more is asked of the role.
func TestDrainLiveAsInstalledAccount(t *testing.T) {
	env := testenv.Start(t)
	ctx := context.Background()
	env.BindInstalledClusterRole(ctx, t, "config/rbac/controller/role.yaml", controllerUser)
	mgr := testenv.NewManagerWith(t, testenv.Impersonating(env.Config, controllerUser), testenv.ManagerOptions())
	if err := Setup(mgr, Options{}); err != nil {
		t.Fatal(err)
	}
	testenv.StartManager(t, mgr)
	s := &suite{c: env.Client, cfg: env.Config}
	s.create(ctx, t, guideClass("small", false))
	s.testDrainLive(ctx, t)
}
