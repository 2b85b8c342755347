package controller

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	infrav1 "banlieue.io/banlieue/api/infrastructure/v1alpha1"
	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
	"banlieue.io/banlieue/internal/testenv"
)

// waitMigration waits until the migration's status satisfies ok and returns it.
func (s *suite) waitMigration(ctx context.Context, t *testing.T, ns, name, what string,
	ok func(*banlieuev1.VirtualMachineMigration) bool) *banlieuev1.VirtualMachineMigration {
	t.Helper()
	var m banlieuev1.VirtualMachineMigration
	testenv.Eventually(t, 3*waitTimeout, "migration "+name+" "+what, func() error {
		if err := s.c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &m); err != nil {
			return err
		}
		ready, msg := readyOf(m.Status)
		return testenv.Unmet(ok(&m), fmt.Sprintf("phase %s, Ready %s: %s", m.Status.Phase, ready, msg))
	})
	return &m
}

func (s *suite) waitMigrationEnds(ctx context.Context, t *testing.T, ns, name string, phase banlieuev1.MigrationPhase, reason, inMessage string) {
	t.Helper()
	m := s.waitMigration(ctx, t, ns, name, fmt.Sprintf("%s %s", phase, reason), func(m *banlieuev1.VirtualMachineMigration) bool {
		return m.Status.Phase == phase
	})
	ready, msg := readyOf(m.Status)
	if !strings.HasSuffix(ready, "/"+reason) || !strings.Contains(msg, inMessage) || m.Status.CompletedAt == nil {
		t.Errorf("%s: Ready %s %q completedAt %v, want reason %s naming %q", name, ready, msg, m.Status.CompletedAt, reason, inMessage)
	}
	if controllerutil.ContainsFinalizer(m, banlieuev1.FinalizerVirtualMachineMigration) {
		// Released once final; the watch may lag one read.
		s.waitMigration(ctx, t, ns, name, "without its finalizer", func(m *banlieuev1.VirtualMachineMigration) bool {
			return !controllerutil.ContainsFinalizer(m, banlieuev1.FinalizerVirtualMachineMigration)
		})
	}
}

func migrationOf(ns, name, vm string, mut ...func(*banlieuev1.VirtualMachineMigration)) *banlieuev1.VirtualMachineMigration {
	m := &banlieuev1.VirtualMachineMigration{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: banlieuev1.VirtualMachineMigrationSpec{VMName: vm}}
	for _, f := range mut {
		f(m)
	}
	return m
}

// reportMove writes the machine's status as the provider would while it moves the domain:
// running, with report as status.migration (nil: none).
func (s *suite) reportMove(ctx context.Context, t *testing.T, ns, name string, report *infrav1.LibvirtMachineMigrationStatus) {
	t.Helper()
	m := s.waitMachine(ctx, t, ns, name)
	s.machineStatus(ctx, t, m, infrav1.LibvirtMachineStatus{
		Initialization:     &banlieuev1.InitializationStatus{Provisioned: ptr.To(true)},
		ObservedPowerState: banlieuev1.PoweredOn,
		Conditions: []metav1.Condition{{Type: banlieuev1.ConditionReady, Status: metav1.ConditionTrue, Reason: "DomainRunning",
			Message: "domain is running", LastTransitionTime: metav1.Now()}},
		Migration: report,
	})
}

// testLiveMigration: the controller's half of a live move against the API server, the suite
// playing the provider. Refusals name their field; one migration per VM runs, the scheduler
// picks a host other than the source and the request reaches the machine's spec.migration;
// the provider's progress is mirrored; cancel asks for an abort while the copy runs and the
// request is withdrawn once the provider stops; a timeout and a deleted migration withdraw it.
func (s *suite) testLiveMigration(ctx context.Context, t *testing.T) {
	ns := "ns-lm"
	s.drainFleet(ctx, t, ns, "img-lm", map[string]string{"lm1": "live", "rc1": "recreate"})
	s.patchProvider(ctx, t, ns, "kvm-b", func(p *banlieuev1.Provider) { p.Spec.Unschedulable = false })
	for _, vm := range []string{"lm1", "rc1"} {
		s.reportMove(ctx, t, ns, vm, nil)
		s.waitVM(ctx, t, ns, vm, "Ready", func(vm *banlieuev1.VirtualMachine) bool { return vm.Status.Phase == banlieuev1.VMPhaseReady })
	}

	s.create(ctx, t, migrationOf(ns, "no-vm", "absent"))
	s.create(ctx, t, migrationOf(ns, "recreate-only", "rc1"))
	s.create(ctx, t, migrationOf(ns, "to-self", "lm1", func(m *banlieuev1.VirtualMachineMigration) {
		m.Spec.TargetProvider = &banlieuev1.MigrationProviderReference{Name: "kvm-a"}
	}))
	s.waitMigrationEnds(ctx, t, ns, "no-vm", banlieuev1.MigrationFailed, banlieuev1.ReasonVMNotFound, "spec.vmName")
	s.waitMigrationEnds(ctx, t, ns, "recreate-only", banlieuev1.MigrationFailed, banlieuev1.ReasonMigrationPolicyNotLive, "migrationPolicy recreate")
	s.waitMigrationEnds(ctx, t, ns, "to-self", banlieuev1.MigrationFailed, banlieuev1.ReasonTargetIsSource, "spec.targetProvider")

	// The first started; the second waits for it.
	s.create(ctx, t, migrationOf(ns, "mv", "lm1"))
	mv := s.waitMigration(ctx, t, ns, "mv", "PreparingTarget", func(m *banlieuev1.VirtualMachineMigration) bool {
		return m.Status.Phase == banlieuev1.MigrationPreparingTarget
	})
	if endpointName(mv.Status.Source) != ns+"/kvm-a" || endpointName(mv.Status.Target) != ns+"/kvm-b" || mv.Status.StartedAt == nil {
		t.Fatalf("mv: source %+v target %+v startedAt %v, want kvm-a to kvm-b", mv.Status.Source, mv.Status.Target, mv.Status.StartedAt)
	}
	s.create(ctx, t, migrationOf(ns, "mv2", "lm1", func(m *banlieuev1.VirtualMachineMigration) { m.Spec.TimeoutSeconds = ptr.To[int32](30) }))
	s.waitMigration(ctx, t, ns, "mv2", "waits for mv", func(m *banlieuev1.VirtualMachineMigration) bool {
		ready, msg := readyOf(m.Status)
		return m.Status.Phase == banlieuev1.MigrationPending && ready == "False/AnotherMigrationActive" && strings.Contains(msg, "mv of")
	})
	machine := s.waitMachineWhere(ctx, t, ns, "lm1", "asked to move to kvm-b", func(m *infrav1.LibvirtMachine) bool {
		return m.Spec.Migration != nil && m.Spec.Migration.MigrationName == "mv" && m.Spec.Migration.TargetProvider.Name == "kvm-b" &&
			m.Spec.Migration.TargetProvider.Namespace == ns && !m.Spec.Migration.Abort
	})
	if machine.Spec.ProviderRef.Name != "kvm-a" || !machine.DeletionTimestamp.IsZero() {
		t.Fatalf("the machine moved or is deleted: %+v", machine.Spec.ProviderRef)
	}

	// The provider copies; a cancel asks it to abort, and its Aborted withdraws the request.
	s.reportMove(ctx, t, ns, "lm1", &infrav1.LibvirtMachineMigrationStatus{MigrationName: "mv", Phase: infrav1.MachineMigrationMigrating})
	s.waitMigration(ctx, t, ns, "mv", "Migrating", func(m *banlieuev1.VirtualMachineMigration) bool {
		return m.Status.Phase == banlieuev1.MigrationMigrating
	})
	// A VM label change runs the VM reconciler's apply: the request must survive it.
	s.patchVM(ctx, t, ns, "lm1", func(vm *banlieuev1.VirtualMachine) { vm.Labels["tier"] = "db" })
	s.waitMachineWhere(ctx, t, ns, "lm1", "relabelled, still asked to move", func(m *infrav1.LibvirtMachine) bool {
		return m.Labels["tier"] == "db" && m.Spec.Migration != nil && m.Spec.Migration.MigrationName == "mv"
	})
	s.patchMigration(ctx, t, ns, "mv", `{"spec":{"cancel":true}}`)
	s.waitMigrationEnds(ctx, t, ns, "mv", banlieuev1.MigrationCancelled, banlieuev1.ReasonMigrationCancelled, "kvm-a")
	s.waitMachineWhere(ctx, t, ns, "lm1", "asked to abort mv", func(m *infrav1.LibvirtMachine) bool {
		return m.Spec.Migration != nil && m.Spec.Migration.MigrationName == "mv" && m.Spec.Migration.Abort
	})
	s.reportMove(ctx, t, ns, "lm1", &infrav1.LibvirtMachineMigrationStatus{MigrationName: "mv", Phase: infrav1.MachineMigrationAborted})

	// Then mv2 starts, and times out with the provider silent: its request is withdrawn.
	s.waitMigration(ctx, t, ns, "mv2", "PreparingTarget", func(m *banlieuev1.VirtualMachineMigration) bool {
		return m.Status.Phase == banlieuev1.MigrationPreparingTarget
	})
	s.waitMachineWhere(ctx, t, ns, "lm1", "asked to move for mv2", func(m *infrav1.LibvirtMachine) bool {
		return m.Spec.Migration != nil && m.Spec.Migration.MigrationName == "mv2" && !m.Spec.Migration.Abort
	})
	s.waitMigrationEnds(ctx, t, ns, "mv2", banlieuev1.MigrationFailed, banlieuev1.ReasonMigrationTimeout, "(30s)")
	s.waitMachineWhere(ctx, t, ns, "lm1", "no request left", func(m *infrav1.LibvirtMachine) bool { return m.Spec.Migration == nil })

	// A migration deleted while started withdraws its request before it goes.
	s.create(ctx, t, migrationOf(ns, "mv3", "lm1", func(m *banlieuev1.VirtualMachineMigration) {
		m.Spec.TargetProvider = &banlieuev1.MigrationProviderReference{Name: "kvm-b"}
	}))
	s.waitMachineWhere(ctx, t, ns, "lm1", "asked to move for mv3", func(m *infrav1.LibvirtMachine) bool {
		return m.Spec.Migration != nil && m.Spec.Migration.MigrationName == "mv3"
	})
	if err := s.c.Delete(ctx, migrationOf(ns, "mv3", "lm1")); err != nil {
		t.Fatal(err)
	}
	s.waitMachineWhere(ctx, t, ns, "lm1", "mv3's request withdrawn", func(m *infrav1.LibvirtMachine) bool { return m.Spec.Migration == nil })
	testenv.Eventually(t, 3*waitTimeout, "mv3 gone", func() error {
		err := s.c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "mv3"}, &banlieuev1.VirtualMachineMigration{})
		return testenv.Unmet(apierrors.IsNotFound(err), fmt.Sprint(err))
	})
	if m := s.waitMachine(ctx, t, ns, "lm1"); m.Spec.ProviderRef.Name != "kvm-a" {
		t.Errorf("lm1's machine is on %s, want kvm-a: the provider never moved it", m.Spec.ProviderRef.Name)
	}
	s.testHandover(ctx, t, ns)
}

// testHandover: lm1 moves to kvm-b while kvm-a drains; the provider (the suite) reports the
// move Succeeded with its timings: the controller hands the machine over in one update (the
// request gone, providerRef, pool and failure domain the target's), moves the VM's placement
// there with its resolved mappings, so the VM reconciler sees no drift and never recreates the
// machine; the migration ends Succeeded with the timings and the drain ends Drained.
func (s *suite) testHandover(ctx context.Context, t *testing.T, ns string) {
	before := s.waitMachine(ctx, t, ns, "lm1")
	s.create(ctx, t, migrationOf(ns, "mv4", "lm1", func(m *banlieuev1.VirtualMachineMigration) {
		m.Spec.TargetProvider = &banlieuev1.MigrationProviderReference{Name: "kvm-b"}
	}))
	asked := s.waitMachineWhere(ctx, t, ns, "lm1", "asked to move for mv4", func(m *infrav1.LibvirtMachine) bool {
		return m.Spec.Migration != nil && m.Spec.Migration.MigrationName == "mv4"
	})
	if asked.Spec.Migration.TargetPool == "" {
		t.Errorf("mv4's request %+v: want the target's pool", asked.Spec.Migration)
	}
	s.patchProvider(ctx, t, ns, "kvm-a", func(p *banlieuev1.Provider) {
		p.Spec.Unschedulable = true
		p.Spec.Drain = &banlieuev1.ProviderDrain{}
	})
	s.reportMove(ctx, t, ns, "lm1", &infrav1.LibvirtMachineMigrationStatus{MigrationName: "mv4", Phase: infrav1.MachineMigrationMigrating})
	s.reportMove(ctx, t, ns, "lm1", &infrav1.LibvirtMachineMigrationStatus{MigrationName: "mv4", Phase: infrav1.MachineMigrationSucceeded,
		TotalMilliseconds: ptr.To[int64](9000), DowntimeMilliseconds: ptr.To[int64](250)})
	after := s.waitMachineWhere(ctx, t, ns, "lm1", "handed over to kvm-b", func(m *infrav1.LibvirtMachine) bool {
		return m.Spec.Migration == nil && m.Spec.ProviderRef != nil && m.Spec.ProviderRef.Name == "kvm-b"
	})
	if after.UID != before.UID || !after.DeletionTimestamp.IsZero() || after.Spec.Pool != asked.Spec.Migration.TargetPool ||
		after.Spec.FailureDomain != asked.Spec.Migration.TargetFailureDomain {
		t.Errorf("after the handover: uid %s (was %s), deleting %v, pool %s, failure domain %s; want the same machine in %s/%s",
			after.UID, before.UID, !after.DeletionTimestamp.IsZero(), after.Spec.Pool, after.Spec.FailureDomain,
			asked.Spec.Migration.TargetPool, asked.Spec.Migration.TargetFailureDomain)
	}
	s.waitVM(ctx, t, ns, "lm1", "placed on kvm-b without drift", func(vm *banlieuev1.VirtualMachine) bool {
		c := meta.FindStatusCondition(vm.Status.Conditions, banlieuev1.ConditionPlacementValid)
		return vm.Status.Scheduled != nil && vm.Status.Scheduled.ProviderName == "kvm-b" && len(vm.Status.Scheduled.ResolvedStorage) > 0 &&
			vm.Status.Scheduled.ResolvedStorage[0].BackendID == after.Spec.Pool && c != nil && c.Status == metav1.ConditionTrue
	})
	mv := s.waitMigration(ctx, t, ns, "mv4", "Succeeded", func(m *banlieuev1.VirtualMachineMigration) bool {
		return m.Status.Phase == banlieuev1.MigrationSucceeded
	})
	if ptr.Deref(mv.Status.TotalMilliseconds, 0) != 9000 || ptr.Deref(mv.Status.DowntimeMilliseconds, 0) != 250 {
		t.Errorf("mv4: total %v downtime %v, want 9000 and 250", mv.Status.TotalMilliseconds, mv.Status.DowntimeMilliseconds)
	}
	s.drainStatus(ctx, t, ns, "Drained once lm1 moved", func(st *banlieuev1.ProviderDrainStatus) bool {
		return st.Phase == banlieuev1.DrainDrained || st.Remaining == 0 && len(st.Blocked) == 0
	})
	// Passes later, the machine is still the one that moved: never recreated.
	time.Sleep(3 * time.Second)
	if m := s.waitMachine(ctx, t, ns, "lm1"); m.UID != before.UID || !m.DeletionTimestamp.IsZero() || m.Spec.ProviderRef.Name != "kvm-b" {
		t.Errorf("lm1's machine after the handover: uid %s on %s, deleting %v; want the moved one on kvm-b", m.UID, m.Spec.ProviderRef.Name, !m.DeletionTimestamp.IsZero())
	}
}

func (s *suite) patchMigration(ctx context.Context, t *testing.T, ns, name, patch string) {
	t.Helper()
	m := migrationOf(ns, name, "")
	if err := s.c.Patch(ctx, m, client.RawPatch("application/merge-patch+json", []byte(patch))); err != nil {
		t.Fatal(err)
	}
}
