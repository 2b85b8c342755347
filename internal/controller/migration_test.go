package controller

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	infrav1 "banlieue.io/banlieue/api/infrastructure/v1alpha1"
	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
)

var migT0 = metav1.NewTime(time.Date(2026, 12, 7, 1, 0, 0, 0, time.UTC))

// runningVM is a VM placed on Provider kvm-a, running, under policy.
func runningVM(policy string, mut ...func(*banlieuev1.VirtualMachine)) *banlieuev1.VirtualMachine {
	vm := testVM("web", func(vm *banlieuev1.VirtualMachine) {
		vm.Spec.MigrationPolicy = policy
		vm.Status.Scheduled = &banlieuev1.ScheduledPlacement{ProviderName: "kvm-a", ProviderNamespace: testNS,
			ProviderClass: "libvirt", FailureDomain: "kvm-a", CPUs: 2, MemoryMiB: 2048}
		vm.Status.InfrastructureRef = &banlieuev1.InfrastructureReference{Kind: "LibvirtMachine", Name: "web", Namespace: testNS}
		vm.Status.Phase, vm.Status.ObservedPowerState = banlieuev1.VMPhaseReady, banlieuev1.PoweredOn
	})
	for _, m := range mut {
		m(vm)
	}
	return vm
}

func testMigration(name string, mut ...func(*banlieuev1.VirtualMachineMigration)) *banlieuev1.VirtualMachineMigration {
	m := &banlieuev1.VirtualMachineMigration{ObjectMeta: metav1.ObjectMeta{Namespace: testNS, Name: name, Generation: 1, CreationTimestamp: migT0},
		Spec: banlieuev1.VirtualMachineMigrationSpec{VMName: "web", TimeoutSeconds: ptr.To[int32](600)}}
	for _, f := range mut {
		f(m)
	}
	return m
}

// started is a migration handed to the provider at migT0, kvm-a to kvm-b.
func started(m *banlieuev1.VirtualMachineMigration) {
	m.Status.Phase = banlieuev1.MigrationPreparingTarget
	m.Status.StartedAt = &migT0
	m.Status.Source = &banlieuev1.MigrationEndpoint{ProviderName: "kvm-a", ProviderNamespace: testNS, FailureDomain: "kvm-a"}
	m.Status.Target = &banlieuev1.MigrationEndpoint{ProviderName: "kvm-b", ProviderNamespace: testNS, FailureDomain: "kvm-b"}
}

func machineReporting(phase infrav1.LibvirtMachineMigrationPhase, mutate ...func(*infrav1.LibvirtMachine)) *infrav1.LibvirtMachine {
	lm := &infrav1.LibvirtMachine{}
	lm.Spec.Migration = &infrav1.LibvirtMachineMigration{MigrationName: "m", TargetProvider: infrav1.ProviderReference{Name: "kvm-b", Namespace: testNS}}
	if phase != "" {
		lm.Status.Migration = &infrav1.LibvirtMachineMigrationStatus{MigrationName: "m", Phase: phase, Message: "step perform: boom",
			DowntimeMilliseconds: ptr.To[int64](120), TotalMilliseconds: ptr.To[int64](9000)}
	}
	for _, f := range mutate {
		f(lm)
	}
	return lm
}

func readyOf(st banlieuev1.VirtualMachineMigrationStatus) (string, string) {
	for _, c := range st.Conditions {
		if c.Type == banlieuev1.ConditionReady {
			return string(c.Status) + "/" + c.Reason, c.Message
		}
	}
	return "", ""
}

func TestStepMigration(t *testing.T) {
	target := &banlieuev1.MigrationEndpoint{ProviderName: "kvm-b", ProviderNamespace: testNS, FailureDomain: "kvm-b"}
	cancel := func(m *banlieuev1.VirtualMachineMigration) { m.Spec.Cancel = true }
	deleting := func(vm *banlieuev1.VirtualMachine) { vm.DeletionTimestamp = &migT0 }
	later := func(d time.Duration) metav1.Time { return metav1.NewTime(migT0.Add(d)) }
	for _, tc := range []struct {
		name      string
		m         *banlieuev1.VirtualMachineMigration
		vm        *banlieuev1.VirtualMachine
		kind      string
		machine   *infrav1.LibvirtMachine
		active    string
		target    *banlieuev1.MigrationEndpoint
		refusal   [2]string
		now       metav1.Time
		phase     banlieuev1.MigrationPhase
		ready     string
		inMessage string
	}{
		{name: "no VM", m: testMigration("m"), active: "m", now: migT0,
			phase: banlieuev1.MigrationFailed, ready: "False/VMNotFound", inMessage: "spec.vmName"},
		{name: "policy recreate is refused", m: testMigration("m"), vm: runningVM("recreate"), kind: "LibvirtMachine", active: "m", now: migT0,
			phase: banlieuev1.MigrationFailed, ready: "False/MigrationPolicyNotLive", inMessage: "migrationPolicy recreate"},
		{name: "unset policy is refused as never", m: testMigration("m"), vm: runningVM(""), kind: "LibvirtMachine", active: "m", now: migT0,
			phase: banlieuev1.MigrationFailed, ready: "False/MigrationPolicyNotLive", inMessage: "migrationPolicy never"},
		{name: "unplaced VM", m: testMigration("m"), vm: runningVM("live", func(vm *banlieuev1.VirtualMachine) { vm.Status.Scheduled = nil }),
			active: "m", now: migT0, phase: banlieuev1.MigrationFailed, ready: "False/VMNotPlaced"},
		{name: "another backend", m: testMigration("m"), vm: runningVM("live"), kind: "VSphereMachine", active: "m", now: migT0,
			phase: banlieuev1.MigrationFailed, ready: "False/LiveMigrationUnsupported"},
		{name: "a stopped VM", m: testMigration("m"), vm: runningVM("live", func(vm *banlieuev1.VirtualMachine) {
			vm.Status.Phase, vm.Status.ObservedPowerState = banlieuev1.VMPhaseStopped, banlieuev1.PoweredOff
		}), kind: "LibvirtMachine", active: "m", now: migT0, phase: banlieuev1.MigrationFailed, ready: "False/VMNotRunning", inMessage: "phase Stopped"},
		{name: "a paused VM", m: testMigration("m"), vm: runningVM("live", func(vm *banlieuev1.VirtualMachine) { vm.Spec.Paused = true }),
			kind: "LibvirtMachine", active: "m", now: migT0, phase: banlieuev1.MigrationFailed, ready: "False/VMNotRunning"},
		{name: "a VM with snapshots", m: testMigration("m"), vm: runningVM("live"), kind: "LibvirtMachine", active: "m", target: target,
			machine: &infrav1.LibvirtMachine{Spec: infrav1.LibvirtMachineSpec{Snapshots: []infrav1.LibvirtMachineSnapshot{{Name: "before-upgrade", UID: "u1"}}}},
			now:     migT0, phase: banlieuev1.MigrationFailed, ready: "False/VMHasSnapshots", inMessage: "VirtualMachineSnapshots [before-upgrade]"},
		{name: "a VM whose snapshot the provider still records", m: testMigration("m"), vm: runningVM("live"), kind: "LibvirtMachine", active: "m",
			target: target, machine: &infrav1.LibvirtMachine{Status: infrav1.LibvirtMachineStatus{Snapshots: []infrav1.LibvirtMachineSnapshotStatus{{Name: "merging"}}}},
			now: migT0, phase: banlieuev1.MigrationFailed, ready: "False/VMHasSnapshots", inMessage: "[merging]"},
		{name: "a VM being deleted", m: testMigration("m"), vm: runningVM("live", deleting), kind: "LibvirtMachine", active: "m", now: migT0,
			phase: banlieuev1.MigrationCancelled, ready: "False/VMDeleted"},
		{name: "a second migration waits", m: testMigration("m2"), vm: runningVM("live"), kind: "LibvirtMachine", active: "m", now: migT0,
			phase: banlieuev1.MigrationPending, ready: "False/AnotherMigrationActive", inMessage: "VirtualMachineMigration m of"},
		{name: "the scheduler refuses", m: testMigration("m"), vm: runningVM("liveOrRecreate"), kind: "LibvirtMachine", active: "m", now: migT0,
			refusal: [2]string{banlieuev1.ReasonNoHostFits, "no Provider other than banlieue-system/kvm-a can hold the VM"},
			phase:   banlieuev1.MigrationFailed, ready: "False/NoHostFits"},
		{name: "starts on the chosen target", m: testMigration("m"), vm: runningVM("live"), kind: "LibvirtMachine", active: "m", target: target,
			now: migT0, phase: banlieuev1.MigrationPreparingTarget, ready: "False/PreparingTarget", inMessage: "/kvm-b, failure domain kvm-b"},
		{name: "cancelled before it starts", m: testMigration("m", cancel), vm: runningVM("live"), kind: "LibvirtMachine", active: "m",
			now: migT0, phase: banlieuev1.MigrationCancelled, ready: "False/Cancelled"},
		{name: "started: waits for the provider", m: testMigration("m", started), vm: runningVM("live"), machine: machineReporting(""),
			now: later(time.Minute), phase: banlieuev1.MigrationPreparingTarget},
		{name: "started: the provider copies", m: testMigration("m", started), vm: runningVM("live"),
			machine: machineReporting(infrav1.MachineMigrationMigrating, func(lm *infrav1.LibvirtMachine) { lm.Status.Migration.Message = "" }),
			now:     later(time.Minute), phase: banlieuev1.MigrationMigrating, ready: "False/Migrating", inMessage: "the provider copies the VM's memory"},
		{name: "started: the provider cannot tell where the VM runs", m: testMigration("m", started), vm: runningVM("live"),
			machine: machineReporting(infrav1.MachineMigrationMigrating, func(lm *infrav1.LibvirtMachine) {
				lm.Status.Migration.Message = "the domain does not run on the source"
			}),
			now: later(time.Minute), phase: banlieuev1.MigrationMigrating, ready: "False/Migrating",
			inMessage: "the provider reports: the domain does not run on the source"},
		{name: "started: the provider succeeded", m: testMigration("m", started), vm: runningVM("live"), machine: machineReporting(infrav1.MachineMigrationSucceeded),
			now: later(time.Minute), phase: banlieuev1.MigrationSucceeded, ready: "True/MigrationSucceeded"},
		{name: "started: the provider failed", m: testMigration("m", started), vm: runningVM("live"), machine: machineReporting(infrav1.MachineMigrationFailed),
			now: later(time.Minute), phase: banlieuev1.MigrationFailed, ready: "False/MigrationFailed", inMessage: "step perform: boom"},
		{name: "started: times out", m: testMigration("m", started), vm: runningVM("live"), machine: machineReporting(""),
			now: later(600 * time.Second), phase: banlieuev1.MigrationFailed, ready: "False/Timeout", inMessage: "(600s)"},
		{name: "started: times out while the provider copies", m: testMigration("m", started), vm: runningVM("live"),
			machine: machineReporting(infrav1.MachineMigrationMigrating, func(lm *infrav1.LibvirtMachine) { lm.Status.Migration.Message = "" }),
			now:     later(600 * time.Second), phase: banlieuev1.MigrationFailed, ready: "False/Timeout", inMessage: "VM runs on Provider banlieue-system/kvm-a"},
		{name: "started: times out on a provider that cannot tell where the VM runs", m: testMigration("m", started), vm: runningVM("live"),
			machine: machineReporting(infrav1.MachineMigrationMigrating, func(lm *infrav1.LibvirtMachine) {
				lm.Status.Migration.Message = "the domain does not run on the source"
			}),
			now: later(600 * time.Second), phase: banlieuev1.MigrationFailed, ready: "False/Timeout",
			inMessage: "asked to stop and the provider reports: the domain does not run on the source"},
		{name: "started: a success reported past the timeout stands", m: testMigration("m", started), vm: runningVM("live"),
			machine: machineReporting(infrav1.MachineMigrationSucceeded), now: later(time.Hour), phase: banlieuev1.MigrationSucceeded, ready: "True/MigrationSucceeded"},
		{name: "started: cancelled", m: testMigration("m", started, cancel), vm: runningVM("live"), machine: machineReporting(infrav1.MachineMigrationMigrating),
			now: later(time.Minute), phase: banlieuev1.MigrationCancelled, ready: "False/Cancelled", inMessage: "runs on Provider banlieue-system/kvm-a"},
		{name: "started: the VM is deleted", m: testMigration("m", started), vm: runningVM("live", deleting), now: later(time.Minute),
			phase: banlieuev1.MigrationCancelled, ready: "False/VMDeleted"},
		{name: "started: the VM is gone", m: testMigration("m", started), now: later(time.Minute),
			phase: banlieuev1.MigrationCancelled, ready: "False/VMDeleted"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := migrationInput{Migration: tc.m, VM: tc.vm, MachineKind: tc.kind, Machine: tc.machine, Active: tc.active,
				Target: tc.target, TargetReason: tc.refusal[0], TargetMsg: tc.refusal[1], Now: tc.now}
			st := stepMigration(in)
			if st.Phase != tc.phase {
				t.Fatalf("phase %s, want %s (%+v)", st.Phase, tc.phase, st.Conditions)
			}
			ready, msg := readyOf(st)
			if tc.ready != "" && ready != tc.ready {
				t.Errorf("Ready %s (%s), want %s", ready, msg, tc.ready)
			}
			if !strings.Contains(msg, tc.inMessage) {
				t.Errorf("Ready message %q lacks %q", msg, tc.inMessage)
			}
			if st.Phase.Final() != (st.CompletedAt != nil) {
				t.Errorf("completedAt %v in phase %s", st.CompletedAt, st.Phase)
			}
			if tc.phase == banlieuev1.MigrationSucceeded && ptr.Deref(st.DowntimeMilliseconds, 0) != 120 {
				t.Errorf("downtime %v, want the provider's 120", st.DowntimeMilliseconds)
			}
			// A second pass over its own result changes nothing.
			in.Migration = tc.m.DeepCopy()
			in.Migration.Status = st
			if again := stepMigration(in); !equalStatus(again, st) {
				t.Errorf("not idempotent:\n%+v\n%+v", st, again)
			}
		})
	}
}

func equalStatus(a, b banlieuev1.VirtualMachineMigrationStatus) bool {
	ra, ma := readyOf(a)
	rb, mb := readyOf(b)
	return a.Phase == b.Phase && ra == rb && ma == mb && endpointName(a.Target) == endpointName(b.Target)
}

func TestActiveMigration(t *testing.T) {
	at := func(d time.Duration) func(*banlieuev1.VirtualMachineMigration) {
		return func(m *banlieuev1.VirtualMachineMigration) { m.CreationTimestamp = metav1.NewTime(migT0.Add(d)) }
	}
	final := func(m *banlieuev1.VirtualMachineMigration) { m.Status.Phase = banlieuev1.MigrationFailed }
	for _, tc := range []struct {
		name string
		in   []*banlieuev1.VirtualMachineMigration
		want string
	}{
		{"none", nil, ""},
		{"oldest pending", []*banlieuev1.VirtualMachineMigration{testMigration("b", at(time.Second)), testMigration("a", at(2*time.Second))}, "b"},
		{"name breaks a tie", []*banlieuev1.VirtualMachineMigration{testMigration("b"), testMigration("a")}, "a"},
		{"a started one wins over an older pending one", []*banlieuev1.VirtualMachineMigration{testMigration("a"), testMigration("z", at(time.Hour), started)}, "z"},
		{"final ones do not count", []*banlieuev1.VirtualMachineMigration{testMigration("a", final), testMigration("b", at(time.Hour))}, "b"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var list []banlieuev1.VirtualMachineMigration
			for _, m := range tc.in {
				list = append(list, *m)
			}
			if got := activeMigration(list); got != tc.want {
				t.Errorf("active %q, want %q", got, tc.want)
			}
		})
	}
}

func TestMigrationTarget(t *testing.T) {
	image := testImage(readyRow("kvm-a"), readyRow("kvm-b"), readyRow("kvm-c"))
	in := func(providers ...banlieuev1.Provider) scheduleInput {
		return scheduleInput{VM: runningVM("live"), Class: testClass(), Image: image, Providers: providers}
	}
	ref := func(name string) *banlieuev1.MigrationProviderReference {
		return &banlieuev1.MigrationProviderReference{Name: name}
	}
	for _, tc := range []struct {
		name      string
		in        scheduleInput
		requested *banlieuev1.MigrationProviderReference
		want      string
		reason    string
		inMessage string
	}{
		{name: "the scheduler picks another host", in: in(testProvider("kvm-a"), testProvider("kvm-b")), want: "banlieue-system/kvm-b"},
		{name: "the source is never chosen, even alone", in: in(testProvider("kvm-a")), reason: banlieuev1.ReasonNoHostFits,
			inMessage: "no Provider other than banlieue-system/kvm-a can hold the VM"},
		{name: "cordoned hosts are skipped", in: in(testProvider("kvm-a"), testProvider("kvm-b", cordoned), testProvider("kvm-c")), want: "banlieue-system/kvm-c"},
		{name: "a full host is skipped", in: in(testProvider("kvm-a"), testProvider("kvm-b", sized(1, 1024)), testProvider("kvm-c")), want: "banlieue-system/kvm-c"},
		{name: "every other host is cordoned", in: in(testProvider("kvm-a"), testProvider("kvm-b", cordoned)), reason: banlieuev1.ReasonNoHostFits,
			inMessage: "ProviderUnschedulable"},
		{name: "the requested host", in: in(testProvider("kvm-a"), testProvider("kvm-b"), testProvider("kvm-c")), requested: ref("kvm-c"), want: "banlieue-system/kvm-c"},
		{name: "the requested host is the source", in: in(testProvider("kvm-a"), testProvider("kvm-b")), requested: ref("kvm-a"),
			reason: banlieuev1.ReasonTargetIsSource, inMessage: "spec.targetProvider"},
		{name: "the requested host does not exist", in: in(testProvider("kvm-a"), testProvider("kvm-b")), requested: ref("kvm-z"),
			reason: banlieuev1.ReasonTargetUnfit, inMessage: "is not a candidate Provider"},
		{name: "the requested host is cordoned", in: in(testProvider("kvm-a"), testProvider("kvm-b", cordoned)), requested: ref("kvm-b"),
			reason: banlieuev1.ReasonTargetUnfit, inMessage: "ProviderUnschedulable"},
		{name: "the requested host lacks the image", in: scheduleInput{VM: runningVM("live"), Class: testClass(), Image: testImage(readyRow("kvm-a")),
			Providers: []banlieuev1.Provider{testProvider("kvm-a"), testProvider("kvm-b")}}, requested: ref("kvm-b"),
			reason: banlieuev1.ReasonTargetUnfit, inMessage: "ImageNotReady"},
		{name: "required anti-affinity is kept", in: scheduleInput{VM: runningVM("live", withAntiAffinity("required")), Class: testClass(), Image: image,
			Providers: []banlieuev1.Provider{testProvider("kvm-a"), testProvider("kvm-b"), testProvider("kvm-c")},
			Siblings:  []banlieuev1.VirtualMachine{placedOn("web-2", "kvm-b", 2, 2048)}}, want: "banlieue-system/kvm-c"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, reason, msg := migrationTarget(tc.in, tc.requested)
			if endpointName(got) != tc.want || reason != tc.reason {
				t.Fatalf("target %q reason %q (%s), want %q reason %q", endpointName(got), reason, msg, tc.want, tc.reason)
			}
			if !strings.Contains(msg, tc.inMessage) {
				t.Errorf("message %q lacks %q", msg, tc.inMessage)
			}
		})
	}
}

func TestMachineMigration(t *testing.T) {
	running := testMigration("m", started)
	machine := func(spec *infrav1.LibvirtMachineMigration, report infrav1.LibvirtMachineMigrationPhase) *infrav1.LibvirtMachine {
		lm := machineReporting(report)
		lm.Spec.Migration = spec
		return lm
	}
	request := &infrav1.LibvirtMachineMigration{MigrationName: "m", TargetProvider: infrav1.ProviderReference{Name: "kvm-b", Namespace: testNS},
		TargetFailureDomain: "kvm-b"}
	withPhase := func(p banlieuev1.MigrationPhase) *banlieuev1.VirtualMachineMigrationStatus {
		st := running.Status.DeepCopy()
		st.Phase = p
		return st
	}
	other := &infrav1.LibvirtMachineMigration{MigrationName: "other"}
	for _, tc := range []struct {
		name      string
		st        *banlieuev1.VirtualMachineMigrationStatus
		machine   *infrav1.LibvirtMachine
		deleting  bool
		want      string
		wantKeep  bool
		wantAbort bool
	}{
		{name: "a started migration asks for the move", st: withPhase(banlieuev1.MigrationPreparingTarget), machine: machine(nil, ""), want: "m"},
		{name: "a pending one asks nothing", st: &banlieuev1.VirtualMachineMigrationStatus{Phase: banlieuev1.MigrationPending}, machine: machine(nil, ""), wantKeep: true},
		{name: "another migration's request is left alone", st: withPhase(banlieuev1.MigrationPreparingTarget), machine: machine(other, ""), wantKeep: true},
		{name: "final, nothing under way: withdrawn", st: withPhase(banlieuev1.MigrationFailed), machine: machine(request, "")},
		{name: "cancelled while the copy runs: abort", st: withPhase(banlieuev1.MigrationCancelled),
			machine: machine(request, infrav1.MachineMigrationMigrating), want: "m", wantAbort: true},
		{name: "succeeded: kept for the handover, never aborted", st: withPhase(banlieuev1.MigrationSucceeded),
			machine: machine(request, infrav1.MachineMigrationSucceeded), wantKeep: true},
		{name: "succeeded, then deleted: kept for the handover", st: withPhase(banlieuev1.MigrationSucceeded), deleting: true,
			machine: machine(request, infrav1.MachineMigrationSucceeded), wantKeep: true},
		{name: "cancelled as the provider reports success: kept, never aborted", st: withPhase(banlieuev1.MigrationCancelled),
			machine: machine(request, infrav1.MachineMigrationSucceeded), wantKeep: true},
		{name: "deleted while the copy runs: abort", st: withPhase(banlieuev1.MigrationMigrating), deleting: true,
			machine: machine(request, infrav1.MachineMigrationMigrating), want: "m", wantAbort: true},
		{name: "deleted before the provider started: withdrawn", st: withPhase(banlieuev1.MigrationPreparingTarget), deleting: true, machine: machine(request, "")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, keep := machineMigration(running, tc.st, tc.machine, tc.deleting)
			if keep != tc.wantKeep {
				t.Fatalf("keep %v, want %v", keep, tc.wantKeep)
			}
			name := ""
			if got != nil {
				name = got.MigrationName
			}
			if name != tc.want || (got != nil && got.Abort != tc.wantAbort) {
				t.Errorf("request %+v, want %q abort %v", got, tc.want, tc.wantAbort)
			}
			if got != nil && (got.TargetProvider.Name != "kvm-b" || got.TargetFailureDomain != "kvm-b") {
				t.Errorf("request targets %+v, want t/kvm-b", got)
			}
		})
	}
}
