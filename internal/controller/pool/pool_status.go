package pool

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
)

// blockage is why members are missing, if anything blocks them; the zero value means nothing.
type blockage struct {
	Reason, Message string
}

// blockedBy is the first blockage that applies (docs/guides/virtualmachine-pools.md). A readiness signal no member
// reports comes first: it is a misconfiguration no amount of capacity fixes.
func blockedBy(members []member, readiness banlieuev1.PoolReadiness, p plan) blockage {
	signalled := false
	for _, m := range members {
		signalled = signalled || m.Signalled
	}
	switch {
	case len(members) > 0 && !signalled:
		return blockage{banlieuev1.ReasonReadinessSignalAbsent, signalAbsentMessage(readiness)}
	case p.BlockedOnAddresses > 0:
		return blockage{banlieuev1.ReasonAddressRangeExhausted,
			fmt.Sprintf("%d member(s) not created: address range exhausted", p.BlockedOnAddresses)}
	case p.BlockedOnCapacity > 0:
		return blockage{banlieuev1.ReasonMaxReplicasReached,
			fmt.Sprintf("%d member(s) not created: maxReplicas reached", p.BlockedOnCapacity)}
	}
	return blockage{}
}

func signalAbsentMessage(readiness banlieuev1.PoolReadiness) string {
	return fmt.Sprintf("no member carries the %s condition; check that spec.readiness matches what the image reports", readiness)
}

// poolStatus is the pool's next status: counts from the members as they were before the plan,
// the revision new members get, and the Warm and Capacity conditions.
func poolStatus(pool *banlieuev1.VirtualMachinePool, members []member, revision string, b blockage) *banlieuev1.VirtualMachinePoolStatus {
	status := pool.Status.DeepCopy()
	status.Available, status.Provisioning, status.Claimed = 0, 0, 0
	for _, m := range members {
		switch m.Phase {
		case phaseReady:
			status.Available++
		case phaseProvisioning:
			status.Provisioning++
		case phaseClaimed:
			status.Claimed++
		}
	}
	status.Replicas = status.Available + status.Provisioning + status.Claimed
	status.ImageRevision = revision
	status.Selector = labels.SelectorFromSet(labels.Set{banlieuev1.LabelPool: pool.Name}).String()
	status.ObservedGeneration = pool.Generation

	warm := metav1.Condition{Type: banlieuev1.ConditionWarm, Status: metav1.ConditionTrue, Reason: banlieuev1.ReasonWarm,
		Message: fmt.Sprintf("%d/%d warm member(s) available", status.Available, pool.Spec.WarmReplicas)}
	if status.Available < pool.Spec.WarmReplicas {
		warm.Status, warm.Reason = metav1.ConditionFalse, banlieuev1.ReasonFilling
		if b.Reason == banlieuev1.ReasonReadinessSignalAbsent {
			warm.Reason = banlieuev1.ReasonReadinessSignalAbsent
			warm.Message += "; " + b.Message
		}
	}
	capacity := metav1.Condition{Type: banlieuev1.ConditionCapacity, Status: metav1.ConditionTrue, Reason: banlieuev1.ReasonWarm,
		Message: "no creation blocked"}
	if b.Reason != "" {
		capacity.Status, capacity.Reason, capacity.Message = metav1.ConditionFalse, b.Reason, b.Message
	}
	banlieuev1.SetCondition(&status.Conditions, pool.Generation, warm)
	banlieuev1.SetCondition(&status.Conditions, pool.Generation, capacity)
	return status
}
