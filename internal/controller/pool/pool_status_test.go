package pool

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
)

func TestBlockedBy(t *testing.T) {
	unsignalled := provisioningM("p", 0)
	unsignalled.Signalled = false
	tests := []struct {
		name    string
		members []member
		plan    plan
		want    blockage
	}{
		{"nothing blocked", []member{ready("a", 0)}, plan{}, blockage{}},
		{"an empty pool has no signal to miss", nil, plan{BlockedOnCapacity: 1},
			blockage{banlieuev1.ReasonMaxReplicasReached, "1 member(s) not created: maxReplicas reached"}},
		{"no member reports the signal: first", []member{unsignalled}, plan{BlockedOnAddresses: 2},
			blockage{banlieuev1.ReasonReadinessSignalAbsent, "no member carries the GuestReady condition; check that spec.readiness matches what the image reports"}},
		{"addresses before capacity", []member{ready("a", 0)}, plan{BlockedOnAddresses: 2, BlockedOnCapacity: 1},
			blockage{banlieuev1.ReasonAddressRangeExhausted, "2 member(s) not created: address range exhausted"}},
	}
	for _, tc := range tests {
		if got := blockedBy(tc.members, banlieuev1.ReadinessGuestReady, tc.plan); got != tc.want {
			t.Errorf("%s: %+v, want %+v", tc.name, got, tc.want)
		}
	}
}

func TestPoolStatus(t *testing.T) {
	pool := &banlieuev1.VirtualMachinePool{ObjectMeta: metav1.ObjectMeta{Name: "web", Generation: 4},
		Spec: banlieuev1.VirtualMachinePoolSpec{WarmReplicas: 2}}
	members := []member{ready("a", 0), provisioningM("b", 0), claimedM("c"), claimedM("d"), withPhase(ready("e", 0), phaseDeleting)}

	s := poolStatus(pool, members, rev, blockage{})
	if s.Replicas != 4 || s.Available != 1 || s.Provisioning != 1 || s.Claimed != 2 || s.ImageRevision != rev || s.ObservedGeneration != 4 ||
		s.Selector != "banlieue.io/pool=web" {
		t.Errorf("status = %+v", s)
	}
	assertCondition(t, s.Conditions, banlieuev1.ConditionWarm, metav1.ConditionFalse, banlieuev1.ReasonFilling, "1/2 warm member(s) available")
	assertCondition(t, s.Conditions, banlieuev1.ConditionCapacity, metav1.ConditionTrue, banlieuev1.ReasonWarm, "no creation blocked")

	b := blockage{banlieuev1.ReasonReadinessSignalAbsent, "no signal"}
	s = poolStatus(pool, members, rev, b)
	assertCondition(t, s.Conditions, banlieuev1.ConditionWarm, metav1.ConditionFalse, banlieuev1.ReasonReadinessSignalAbsent, "1/2 warm member(s) available; no signal")
	assertCondition(t, s.Conditions, banlieuev1.ConditionCapacity, metav1.ConditionFalse, banlieuev1.ReasonReadinessSignalAbsent, "no signal")

	pool.Spec.WarmReplicas = 1
	s = poolStatus(pool, members, rev, blockage{banlieuev1.ReasonMaxReplicasReached, "1 member(s) not created: maxReplicas reached"})
	assertCondition(t, s.Conditions, banlieuev1.ConditionWarm, metav1.ConditionTrue, banlieuev1.ReasonWarm, "1/1 warm member(s) available")
	assertCondition(t, s.Conditions, banlieuev1.ConditionCapacity, metav1.ConditionFalse, banlieuev1.ReasonMaxReplicasReached, "1 member(s) not created: maxReplicas reached")
}

// TestStatusMessagesBounded: a blockage's text and a claim message quoting the pool's Warm
// condition (at the CRD's 32 768 characters, plus the claim's own words) stay within the bound.
func TestStatusMessagesBounded(t *testing.T) {
	huge := strings.Repeat("x", 1<<20)
	pool := &banlieuev1.VirtualMachinePool{ObjectMeta: metav1.ObjectMeta{Name: "web"}, Spec: banlieuev1.VirtualMachinePoolSpec{WarmReplicas: 1}}
	s := poolStatus(pool, nil, rev, blockage{banlieuev1.ReasonReadinessSignalAbsent, huge})
	for _, c := range s.Conditions {
		if len(c.Message) > banlieuev1.MaxConditionMessage {
			t.Errorf("pool %s message: %d bytes", c.Type, len(c.Message))
		}
	}

	pool.Status.Conditions = []metav1.Condition{{Type: banlieuev1.ConditionWarm, Reason: banlieuev1.ReasonFilling, Message: huge[:32768]}}
	claim := &banlieuev1.VirtualMachineClaim{}
	setBound(&claim.Status, claim, metav1.ConditionFalse, banlieuev1.ReasonNoMemberAvailable, noMemberMessage(pool))
	if c := claim.Status.Conditions[0]; len(c.Message) > banlieuev1.MaxConditionMessage ||
		!strings.HasPrefix(c.Message, "no Ready, unclaimed member in pool web (pool: Filling: xxx") {
		t.Errorf("claim message: %d bytes, %q", len(c.Message), c.Message[:60])
	}
}

func assertCondition(t *testing.T, conds []metav1.Condition, typ string, status metav1.ConditionStatus, reason, msg string) {
	t.Helper()
	c := meta.FindStatusCondition(conds, typ)
	if c == nil || c.Status != status || c.Reason != reason || c.Message != msg {
		t.Errorf("%s = %+v, want %s %s %q", typ, c, status, reason, msg)
	}
}
