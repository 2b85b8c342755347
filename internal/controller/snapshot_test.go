package controller

import (
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	infrav1 "banlieue.io/banlieue/api/infrastructure/v1alpha1"
	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
)

func testSnapshot(name string, mut ...func(*banlieuev1.VirtualMachineSnapshot)) *banlieuev1.VirtualMachineSnapshot {
	s := &banlieuev1.VirtualMachineSnapshot{ObjectMeta: metav1.ObjectMeta{Namespace: testNS, Name: name, Generation: 1,
		UID: types.UID("uid-" + name), CreationTimestamp: migT0}, Spec: banlieuev1.VirtualMachineSnapshotSpec{VMName: "web"}}
	for _, f := range mut {
		f(s)
	}
	return s
}

// snapMachine is web's LibvirtMachine with disks os and data, the named snapshots requested,
// and reports as its provider's record.
func snapMachine(requested []string, reports ...infrav1.LibvirtMachineSnapshotStatus) *infrav1.LibvirtMachine {
	lm := &infrav1.LibvirtMachine{ObjectMeta: metav1.ObjectMeta{Namespace: testNS, Name: "web"}}
	lm.Spec.Disks = []infrav1.LibvirtDisk{{Name: "os", SizeGiB: 10}, {Name: "data", SizeGiB: 5}}
	for _, n := range requested {
		lm.Spec.Snapshots = append(lm.Spec.Snapshots, infrav1.LibvirtMachineSnapshot{Name: n, UID: "uid-" + n})
	}
	lm.Status.Snapshots = reports
	return lm
}

func snapReadyOf(conds []metav1.Condition) (string, string) {
	for _, c := range conds {
		if c.Type == banlieuev1.ConditionReady {
			return string(c.Status) + "/" + c.Reason, c.Message
		}
	}
	return "", ""
}

func TestStepSnapshot(t *testing.T) {
	taken := infrav1.LibvirtMachineSnapshotStatus{Name: "s1", Phase: infrav1.SnapshotTaken, Consistency: banlieuev1.CrashConsistent,
		TakenAt: &migT0, Message: "the guest agent is not connected",
		Layers: []infrav1.SnapshotLayer{{Disk: "os", Volume: "ns-web-os.qcow2", Top: "ns-web-os.qcow2-uid-s1"}}}
	// eight snapshots of web older than s1, none requested yet.
	older := func() []banlieuev1.VirtualMachineSnapshot {
		var out []banlieuev1.VirtualMachineSnapshot
		for i := range banlieuev1.MaxSnapshotsPerVM {
			out = append(out, *testSnapshot(fmt.Sprintf("old-%d", i), func(s *banlieuev1.VirtualMachineSnapshot) {
				s.CreationTimestamp = metav1.NewTime(migT0.Add(-time.Hour))
			}))
		}
		return out
	}
	for _, tc := range []struct {
		name       string
		s          *banlieuev1.VirtualMachineSnapshot
		vm         *banlieuev1.VirtualMachine
		kind       string
		machine    *infrav1.LibvirtMachine
		siblings   []banlieuev1.VirtualMachineSnapshot
		phase      banlieuev1.SnapshotPhase
		ready      string
		keep       bool
		inMessage  string
		consistent banlieuev1.SnapshotConsistency
	}{
		{name: "no vm", s: testSnapshot("s1"), phase: banlieuev1.SnapshotFailed, ready: "False/VMNotFound", inMessage: "spec.vmName"},
		{name: "vm not placed", s: testSnapshot("s1"), vm: testVM("web"), phase: banlieuev1.SnapshotPending, ready: "False/VMNotPlaced"},
		{name: "vsphere vm", s: testSnapshot("s1"), vm: runningVM("never"), kind: "VSphereMachine",
			phase: banlieuev1.SnapshotFailed, ready: "False/SnapshotsUnsupported", inMessage: "only libvirt machines"},
		{name: "handed to the provider", s: testSnapshot("s1"), vm: runningVM("never"), kind: "LibvirtMachine", machine: snapMachine(nil),
			phase: banlieuev1.SnapshotInProgress, ready: "False/SnapshotInProgress", keep: true},
		{name: "recorded", s: testSnapshot("s1"), vm: runningVM("never"), kind: "LibvirtMachine",
			machine: snapMachine([]string{"s1"}, infrav1.LibvirtMachineSnapshotStatus{Name: "s1", Phase: infrav1.SnapshotRecorded}),
			phase:   banlieuev1.SnapshotInProgress, ready: "False/SnapshotInProgress", keep: true},
		{name: "taken, crash-consistent with the agent's refusal", s: testSnapshot("s1"), vm: runningVM("never"), kind: "LibvirtMachine",
			machine: snapMachine([]string{"s1"}, taken), phase: banlieuev1.SnapshotReady, ready: "True/SnapshotTaken", keep: true,
			inMessage: "CrashConsistent: the guest agent is not connected", consistent: banlieuev1.CrashConsistent},
		{name: "provider failed", s: testSnapshot("s1"), vm: runningVM("never"), kind: "LibvirtMachine",
			machine: snapMachine([]string{"s1"}, infrav1.LibvirtMachineSnapshotStatus{Name: "s1", Phase: infrav1.SnapshotFailed, Message: "step create layer: pool full"}),
			phase:   banlieuev1.SnapshotFailed, ready: "False/SnapshotFailed", inMessage: "step create layer: pool full"},
		{name: "ninth refused", s: testSnapshot("s1"), vm: runningVM("never"), kind: "LibvirtMachine", machine: snapMachine(nil),
			siblings: append(older(), *testSnapshot("s1")), phase: banlieuev1.SnapshotFailed, ready: "False/SnapshotLimitReached", inMessage: "8 snapshots"},
		{name: "ninth admitted once one older failed", s: testSnapshot("s1"), vm: runningVM("never"), kind: "LibvirtMachine", machine: snapMachine(nil),
			siblings: append(older()[1:], *testSnapshot("old-0", func(s *banlieuev1.VirtualMachineSnapshot) { s.Status.Phase = banlieuev1.SnapshotFailed }), *testSnapshot("s1")),
			phase:    banlieuev1.SnapshotInProgress, ready: "False/SnapshotInProgress", keep: true},
		{name: "already requested keeps its place", s: testSnapshot("s1"), vm: runningVM("never"), kind: "LibvirtMachine", machine: snapMachine([]string{"s1"}),
			siblings: append(older(), *testSnapshot("s1")), phase: banlieuev1.SnapshotInProgress, ready: "False/SnapshotInProgress", keep: true},
		{name: "ready, then the machine forgot it", s: testSnapshot("s1", func(s *banlieuev1.VirtualMachineSnapshot) { s.Status.Phase = banlieuev1.SnapshotReady }),
			vm: runningVM("never"), kind: "LibvirtMachine", machine: snapMachine(nil),
			phase: banlieuev1.SnapshotFailed, ready: "False/SnapshotFailed", inMessage: "no longer records"},
		{name: "failed stays failed", s: testSnapshot("s1", func(s *banlieuev1.VirtualMachineSnapshot) { s.Status.Phase = banlieuev1.SnapshotFailed }),
			vm: runningVM("never"), kind: "LibvirtMachine", machine: snapMachine(nil, taken), phase: banlieuev1.SnapshotFailed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			siblings := tc.siblings
			if siblings == nil {
				siblings = []banlieuev1.VirtualMachineSnapshot{*tc.s}
			}
			st, keep := stepSnapshot(snapshotInput{Snapshot: tc.s, VM: tc.vm, MachineKind: tc.kind, Machine: tc.machine, Siblings: siblings, Now: migT0})
			ready, msg := snapReadyOf(st.Conditions)
			if st.Phase != tc.phase || ready != tc.ready || keep != tc.keep || !strings.Contains(msg, tc.inMessage) || st.Consistency != tc.consistent {
				t.Errorf("got %s %s keep=%v %s %q, want %s %s keep=%v %s naming %q",
					st.Phase, ready, keep, st.Consistency, msg, tc.phase, tc.ready, tc.keep, tc.consistent, tc.inMessage)
			}
			if st.Phase == banlieuev1.SnapshotReady && (len(st.Disks) != 1 || st.Disks[0].Volume != "ns-web-os.qcow2" || st.CreationTime == nil) {
				t.Errorf("Ready without the layers: %+v", st)
			}
		})
	}
}

func TestMachineSnapshots(t *testing.T) {
	for _, tc := range []struct {
		name    string
		cur     []string
		snap    string
		uid     string
		keep    bool
		want    []string
		changed bool
	}{
		{"appended last", []string{"a", "b"}, "c", "uid-c", true, []string{"a", "b", "c"}, true},
		{"already there", []string{"a", "b"}, "a", "uid-a", true, nil, false},
		{"dropped", []string{"a", "b", "c"}, "b", "uid-b", false, []string{"a", "c"}, true},
		{"already gone", []string{"a"}, "b", "uid-b", false, nil, false},
		// The same name, another object: the old entry goes, the new one is taken anew, last.
		{"recreated under the same name", []string{"a", "b"}, "a", "uid-a2", true, []string{"b", "a"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lm := snapMachine(tc.cur)
			got, changed := machineSnapshots(lm, tc.snap, tc.uid, tc.keep)
			var names []string
			for _, s := range got {
				names = append(names, s.Name)
			}
			if changed != tc.changed || fmt.Sprint(names) != fmt.Sprint(tc.want) {
				t.Errorf("got %v changed=%v, want %v changed=%v", names, changed, tc.want, tc.changed)
			}
			if len(lm.Spec.Snapshots) != len(tc.cur) {
				t.Errorf("the machine's own list was modified: %v", lm.Spec.Snapshots)
			}
		})
	}
}

func testRestore(mut ...func(*banlieuev1.VirtualMachineRestore)) *banlieuev1.VirtualMachineRestore {
	r := &banlieuev1.VirtualMachineRestore{ObjectMeta: metav1.ObjectMeta{Namespace: testNS, Name: "r1", Generation: 1, CreationTimestamp: migT0},
		Spec: banlieuev1.VirtualMachineRestoreSpec{SnapshotName: "s1", RunStrategy: banlieuev1.RestoreRunAsVM}}
	for _, f := range mut {
		f(r)
	}
	return r
}

func readySnapshot(disks ...string) *banlieuev1.VirtualMachineSnapshot {
	return testSnapshot("s1", func(s *banlieuev1.VirtualMachineSnapshot) {
		s.Status.Phase = banlieuev1.SnapshotReady
		for _, d := range disks {
			s.Status.Disks = append(s.Status.Disks, banlieuev1.SnapshotDisk{Name: d, Volume: "v-" + d})
		}
	})
}

func TestStepRestore(t *testing.T) {
	inProgress := func(r *banlieuev1.VirtualMachineRestore) { r.Status.Phase = banlieuev1.RestoreInProgress }
	withRestore := func(name string, report *infrav1.LibvirtMachineRestoreStatus) *infrav1.LibvirtMachine {
		lm := snapMachine([]string{"s1"})
		lm.Spec.Restore = &infrav1.LibvirtMachineRestore{RestoreName: name, SnapshotName: "s1"}
		lm.Status.Restore = report
		return lm
	}
	for _, tc := range []struct {
		name      string
		r         *banlieuev1.VirtualMachineRestore
		snap      *banlieuev1.VirtualMachineSnapshot
		vm        *banlieuev1.VirtualMachine
		machine   *infrav1.LibvirtMachine
		phase     banlieuev1.RestorePhase
		ready     string
		request   bool
		inMessage string
	}{
		{name: "no snapshot", r: testRestore(), phase: banlieuev1.RestoreFailed, ready: "False/SnapshotNotFound", inMessage: "spec.snapshotName"},
		{name: "snapshot being taken", r: testRestore(), snap: testSnapshot("s1", func(s *banlieuev1.VirtualMachineSnapshot) { s.Status.Phase = banlieuev1.SnapshotInProgress }),
			vm: runningVM("never"), machine: snapMachine([]string{"s1"}), phase: banlieuev1.RestorePending, ready: "False/SnapshotNotReady", inMessage: "waits"},
		{name: "snapshot failed", r: testRestore(), snap: testSnapshot("s1", func(s *banlieuev1.VirtualMachineSnapshot) { s.Status.Phase = banlieuev1.SnapshotFailed }),
			phase: banlieuev1.RestoreFailed, ready: "False/SnapshotNotReady"},
		{name: "vm gone", r: testRestore(), snap: readySnapshot("os", "data"), phase: banlieuev1.RestoreFailed, ready: "False/VMNotFound"},
		{name: "a disk added since", r: testRestore(), snap: readySnapshot("os"), vm: runningVM("never"), machine: snapMachine([]string{"s1"}),
			phase: banlieuev1.RestoreFailed, ready: "False/SnapshotDoesNotMatch", inMessage: "[os data]"},
		{name: "requested", r: testRestore(), snap: readySnapshot("os", "data"), vm: runningVM("never"), machine: snapMachine([]string{"s1"}),
			phase: banlieuev1.RestoreInProgress, ready: "False/RestoreInProgress", request: true},
		{name: "another restore runs", r: testRestore(), snap: readySnapshot("os", "data"), vm: runningVM("never"), machine: withRestore("r0", nil),
			phase: banlieuev1.RestorePending, ready: "False/AnotherRestoreActive", inMessage: "r0"},
		{name: "provider restores", r: testRestore(inProgress), snap: readySnapshot("os", "data"), vm: runningVM("never"),
			machine: withRestore("r1", &infrav1.LibvirtMachineRestoreStatus{RestoreName: "r1", Phase: infrav1.MachineRestoreInProgress}),
			phase:   banlieuev1.RestoreInProgress, ready: "False/RestoreInProgress", request: true},
		{name: "restored", r: testRestore(inProgress), snap: readySnapshot("os", "data"), vm: runningVM("never"),
			machine: withRestore("r1", &infrav1.LibvirtMachineRestoreStatus{RestoreName: "r1", Phase: infrav1.MachineRestoreSucceeded}),
			phase:   banlieuev1.RestoreSucceeded, ready: "True/Restored"},
		{name: "provider found the domain's disks changed", r: testRestore(inProgress), snap: readySnapshot("os", "data"), vm: runningVM("never"),
			machine: withRestore("r1", &infrav1.LibvirtMachineRestoreStatus{RestoreName: "r1", Phase: infrav1.MachineRestoreFailed,
				Reason: banlieuev1.ReasonSnapshotDoesNotMatch, Message: "disk vda's chain has no layer v-os"}),
			phase: banlieuev1.RestoreFailed, ready: "False/SnapshotDoesNotMatch", inMessage: "v-os"},
		{name: "provider failed", r: testRestore(inProgress), snap: readySnapshot("os", "data"), vm: runningVM("never"),
			machine: withRestore("r1", &infrav1.LibvirtMachineRestoreStatus{RestoreName: "r1", Phase: infrav1.MachineRestoreFailed, Message: "step redefine: boom"}),
			phase:   banlieuev1.RestoreFailed, ready: "False/RestoreFailed", inMessage: "step redefine"},
		// Once started, a snapshot deleted meanwhile does not stop the restore's report.
		{name: "started, snapshot gone", r: testRestore(inProgress, func(r *banlieuev1.VirtualMachineRestore) { r.Status.VMName = "web" }), vm: runningVM("never"),
			machine: withRestore("r1", &infrav1.LibvirtMachineRestoreStatus{RestoreName: "r1", Phase: infrav1.MachineRestoreSucceeded}),
			phase:   banlieuev1.RestoreSucceeded, ready: "True/Restored"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, want, _ := stepRestore(restoreInput{Restore: tc.r, Snapshot: tc.snap, VM: tc.vm, Machine: tc.machine, Now: migT0})
			ready, msg := snapReadyOf(st.Conditions)
			if st.Phase != tc.phase || ready != tc.ready || (want != nil) != tc.request || !strings.Contains(msg, tc.inMessage) {
				t.Errorf("got %s %s request=%v %q, want %s %s request=%v naming %q", st.Phase, ready, want != nil, msg,
					tc.phase, tc.ready, tc.request, tc.inMessage)
			}
			if want != nil && (want.RestoreName != "r1" || want.SnapshotName != "s1") {
				t.Errorf("request %+v, want r1 of s1", want)
			}
			if st.Phase.Final() && st.CompletionTime == nil {
				t.Error("final without completionTime")
			}
		})
	}
}
