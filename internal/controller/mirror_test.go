package controller

import (
	"reflect"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
)

func TestMirror(t *testing.T) {
	scheduled := metav1.Condition{Type: banlieuev1.ConditionScheduled, Status: metav1.ConditionTrue, Reason: banlieuev1.ReasonScheduled, Message: "scheduled"}
	notScheduled := metav1.Condition{Type: banlieuev1.ConditionScheduled, Status: metav1.ConditionFalse, Reason: banlieuev1.ReasonImageNotReady, Message: "image not ready"}
	placementBad := metav1.Condition{Type: banlieuev1.ConditionPlacementValid, Status: metav1.ConditionFalse, Reason: banlieuev1.ReasonProviderChanged, Message: "moved"}
	running := &metav1.Condition{Type: banlieuev1.ConditionReady, Status: metav1.ConditionTrue, Reason: "DomainRunning", Message: "domain is running"}
	stopped := &metav1.Condition{Type: banlieuev1.ConditionReady, Status: metav1.ConditionFalse, Reason: "DomainNotRunning", Message: "domain is defined but Shutoff"}
	guest := &metav1.Condition{Type: banlieuev1.ConditionGuestReady, Status: metav1.ConditionTrue, Reason: "GuestAnnounced", Message: "installed"}
	type cond struct {
		status  metav1.ConditionStatus
		reason  string
		message string
	}
	tests := []struct {
		name       string
		before     []metav1.Condition
		infra      infraView
		infraReady cond
		guest      *cond
		ready      cond
	}{
		{
			name: "no Ready on the machine yet", before: []metav1.Condition{scheduled},
			infraReady: cond{metav1.ConditionFalse, banlieuev1.ReasonPending, "infrastructure has not reported a Ready condition yet"},
			ready:      cond{metav1.ConditionFalse, banlieuev1.ReasonInfrastructureNotReady, "infrastructure has not reported a Ready condition yet"},
		},
		{
			name: "running machine makes the VM Ready", before: []metav1.Condition{scheduled},
			infra:      infraView{Ready: running},
			infraReady: cond{metav1.ConditionTrue, "DomainRunning", "domain is running"},
			ready:      cond{metav1.ConditionTrue, banlieuev1.ReasonReconciled, "the VM is scheduled and its infrastructure is ready"},
		},
		{
			name: "stopped machine", before: []metav1.Condition{scheduled},
			infra:      infraView{Ready: stopped},
			infraReady: cond{metav1.ConditionFalse, "DomainNotRunning", "domain is defined but Shutoff"},
			ready:      cond{metav1.ConditionFalse, banlieuev1.ReasonInfrastructureNotReady, "domain is defined but Shutoff"},
		},
		{
			name: "GuestReady copied when present", before: []metav1.Condition{scheduled},
			infra:      infraView{Ready: running, GuestReady: guest},
			infraReady: cond{metav1.ConditionTrue, "DomainRunning", "domain is running"},
			guest:      &cond{metav1.ConditionTrue, "GuestAnnounced", "installed"},
			ready:      cond{metav1.ConditionTrue, banlieuev1.ReasonReconciled, "the VM is scheduled and its infrastructure is ready"},
		},
		{
			name:       "GuestReady removed when the machine drops it",
			before:     []metav1.Condition{scheduled, {Type: banlieuev1.ConditionGuestReady, Status: metav1.ConditionTrue, Reason: "GuestAnnounced"}},
			infra:      infraView{Ready: running},
			infraReady: cond{metav1.ConditionTrue, "DomainRunning", "domain is running"},
			ready:      cond{metav1.ConditionTrue, banlieuev1.ReasonReconciled, "the VM is scheduled and its infrastructure is ready"},
		},
		{
			name: "Scheduled false wins", before: []metav1.Condition{notScheduled},
			infra:      infraView{Ready: running},
			infraReady: cond{metav1.ConditionTrue, "DomainRunning", "domain is running"},
			ready:      cond{metav1.ConditionFalse, banlieuev1.ReasonScheduling, "image not ready"},
		},
		{
			name: "no Scheduled condition", infra: infraView{Ready: running},
			infraReady: cond{metav1.ConditionTrue, "DomainRunning", "domain is running"},
			ready:      cond{metav1.ConditionFalse, banlieuev1.ReasonScheduling, "the VM has not been scheduled yet"},
		},
		{
			name: "placement invalid beats infrastructure", before: []metav1.Condition{scheduled, placementBad},
			infra:      infraView{Ready: stopped},
			infraReady: cond{metav1.ConditionFalse, "DomainNotRunning", "domain is defined but Shutoff"},
			ready:      cond{metav1.ConditionFalse, banlieuev1.ReasonPlacementInvalid, "moved"},
		},
		{
			name: "placement valid true does not block", before: []metav1.Condition{scheduled, {Type: banlieuev1.ConditionPlacementValid, Status: metav1.ConditionTrue, Reason: banlieuev1.ReasonReconciled}},
			infra:      infraView{Ready: running},
			infraReady: cond{metav1.ConditionTrue, "DomainRunning", "domain is running"},
			ready:      cond{metav1.ConditionTrue, banlieuev1.ReasonReconciled, "the VM is scheduled and its infrastructure is ready"},
		},
	}
	check := func(t *testing.T, conds []metav1.Condition, typ string, want cond) {
		t.Helper()
		c := meta.FindStatusCondition(conds, typ)
		if c == nil || c.Status != want.status || c.Reason != want.reason || c.Message != want.message || c.ObservedGeneration != 7 {
			t.Errorf("%s = %+v, want %+v (generation 7)", typ, c, want)
		}
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status := &banlieuev1.VirtualMachineStatus{Conditions: append([]metav1.Condition(nil), tt.before...)}
			mirror(status, tt.infra, 7)
			check(t, status.Conditions, banlieuev1.ConditionInfrastructureReady, tt.infraReady)
			check(t, status.Conditions, banlieuev1.ConditionReady, tt.ready)
			if tt.guest == nil {
				if g := meta.FindStatusCondition(status.Conditions, banlieuev1.ConditionGuestReady); g != nil {
					t.Errorf("GuestReady = %+v, want absent", g)
				}
			} else {
				check(t, status.Conditions, banlieuev1.ConditionGuestReady, *tt.guest)
			}
			if status.ObservedGeneration != 7 {
				t.Errorf("observedGeneration = %d", status.ObservedGeneration)
			}
		})
	}
}

func TestMirrorCopiesObservedState(t *testing.T) {
	addrs := []banlieuev1.MachineAddress{{Type: banlieuev1.MachineInternalIP, Address: "10.0.0.5"}}
	status := &banlieuev1.VirtualMachineStatus{
		Addresses:          []banlieuev1.MachineAddress{{Type: banlieuev1.MachineInternalIP, Address: "10.9.9.9"}},
		ObservedPowerState: banlieuev1.PoweredOff,
	}
	restarted := &metav1.Time{Time: time.Date(2026, 12, 1, 22, 0, 0, 0, time.UTC)}
	mirror(status, infraView{Initialization: &banlieuev1.InitializationStatus{Provisioned: ptr.To(true)}, Addresses: addrs, PowerState: banlieuev1.PoweredOn,
		LastRestartTime: restarted}, 1)
	if !reflect.DeepEqual(status.Addresses, addrs) || status.ObservedPowerState != banlieuev1.PoweredOn || !ptr.Deref(status.Initialization.Provisioned, false) ||
		!status.LastRestartTime.Equal(restarted) {
		t.Errorf("status = %+v", status)
	}
	mirror(status, infraView{}, 1)
	if status.Addresses != nil || status.ObservedPowerState != "" || status.Initialization != nil || status.LastRestartTime != nil {
		t.Errorf("cleared status = %+v", status)
	}
}

func TestMirrorKeepsTransitionTimeWhenUnchanged(t *testing.T) {
	status := &banlieuev1.VirtualMachineStatus{}
	mirror(status, infraView{Ready: &metav1.Condition{Type: banlieuev1.ConditionReady, Status: metav1.ConditionTrue, Reason: "DomainRunning"}}, 1)
	before := status.DeepCopy()
	mirror(status, infraView{Ready: &metav1.Condition{Type: banlieuev1.ConditionReady, Status: metav1.ConditionTrue, Reason: "DomainRunning"}}, 1)
	if !reflect.DeepEqual(before, status) {
		t.Errorf("a repeated mirror changed the status:\n%+v\n%+v", before, status)
	}
}

// A machine's refusal to grow a disk reaches the VM whose size was raised, beside a Ready the
// refusal leaves alone, and goes with the machine's.
func TestMirrorDisksGrown(t *testing.T) {
	status := &banlieuev1.VirtualMachineStatus{Conditions: []metav1.Condition{
		{Type: banlieuev1.ConditionScheduled, Status: metav1.ConditionTrue, Reason: banlieuev1.ReasonScheduled}}}
	ready := &metav1.Condition{Type: banlieuev1.ConditionReady, Status: metav1.ConditionTrue, Reason: "DomainRunning"}
	refused := &metav1.Condition{Type: banlieuev1.ConditionDisksGrown, Status: metav1.ConditionFalse, Reason: "DiskGrowUnsupported",
		Message: "the host cannot grow spec.disks[0] (os): …; the disk keeps its size"}
	mirror(status, infraView{Ready: ready, DisksGrown: refused}, 3)
	d := meta.FindStatusCondition(status.Conditions, banlieuev1.ConditionDisksGrown)
	if d == nil || d.Status != metav1.ConditionFalse || d.Reason != refused.Reason || d.Message != refused.Message || d.ObservedGeneration != 3 {
		t.Fatalf("DisksGrown = %+v, want the machine's refusal for generation 3", d)
	}
	if r := meta.FindStatusCondition(status.Conditions, banlieuev1.ConditionReady); r == nil || r.Status != metav1.ConditionTrue {
		t.Errorf("Ready = %+v, want True: the VM runs on", r)
	}
	mirror(status, infraView{Ready: ready}, 3)
	if d := meta.FindStatusCondition(status.Conditions, banlieuev1.ConditionDisksGrown); d != nil {
		t.Errorf("DisksGrown = %+v after the machine's went, want it gone", d)
	}
}
