package controller

import (
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
)

// mirror copies the machine's observed state into the VM's status and recomputes the aggregate
// Ready (docs/guides/libvirt-provider.md, "Who does what"). Conditions go through meta.SetStatusCondition so an unchanged one keeps its
// lastTransitionTime and a repeated pass writes nothing.
func mirror(status *banlieuev1.VirtualMachineStatus, infra infraView, generation int64) {
	status.Initialization = infra.Initialization.DeepCopy()
	status.Addresses = append([]banlieuev1.MachineAddress(nil), infra.Addresses...)
	status.ObservedPowerState = infra.PowerState
	status.LastRestartTime = infra.LastRestartTime.DeepCopy()

	infraReady := metav1.Condition{Type: banlieuev1.ConditionInfrastructureReady, Status: metav1.ConditionFalse,
		Reason: banlieuev1.ReasonPending, Message: "infrastructure has not reported a Ready condition yet"}
	if infra.Ready != nil {
		infraReady.Status, infraReady.Reason, infraReady.Message = infra.Ready.Status, infra.Ready.Reason, infra.Ready.Message
	}
	banlieuev1.SetCondition(&status.Conditions, generation, infraReady)

	// GuestReady is absent when the provider cannot evaluate the guest (agent unreachable);
	// inventing a False would claim an observation nobody made.
	if infra.GuestReady == nil {
		meta.RemoveStatusCondition(&status.Conditions, banlieuev1.ConditionGuestReady)
	} else {
		g := *infra.GuestReady
		banlieuev1.SetCondition(&status.Conditions, generation, metav1.Condition{Type: banlieuev1.ConditionGuestReady, Status: g.Status, Reason: g.Reason, Message: g.Message})
	}

	// DisksGrown, like GuestReady, is there only while the machine reports it: a host that
	// cannot grow a disk says so on the VM whose size was raised.
	if infra.DisksGrown == nil {
		meta.RemoveStatusCondition(&status.Conditions, banlieuev1.ConditionDisksGrown)
	} else {
		d := *infra.DisksGrown
		banlieuev1.SetCondition(&status.Conditions, generation, metav1.Condition{Type: banlieuev1.ConditionDisksGrown, Status: d.Status, Reason: d.Reason, Message: d.Message})
	}

	setAggregateReady(status, generation)
	status.ObservedGeneration = generation
}

// setAggregateReady derives Ready from Scheduled, PlacementValid and InfrastructureReady.
func setAggregateReady(status *banlieuev1.VirtualMachineStatus, generation int64) {
	scheduled := meta.FindStatusCondition(status.Conditions, banlieuev1.ConditionScheduled)
	placement := meta.FindStatusCondition(status.Conditions, banlieuev1.ConditionPlacementValid)
	infra := meta.FindStatusCondition(status.Conditions, banlieuev1.ConditionInfrastructureReady)
	ready := metav1.Condition{Type: banlieuev1.ConditionReady, Status: metav1.ConditionFalse}
	switch {
	case scheduled == nil || scheduled.Status != metav1.ConditionTrue:
		ready.Reason, ready.Message = banlieuev1.ReasonScheduling, messageOf(scheduled, "the VM has not been scheduled yet")
	case placement != nil && placement.Status == metav1.ConditionFalse:
		ready.Reason, ready.Message = banlieuev1.ReasonPlacementInvalid, placement.Message
	case infra == nil || infra.Status != metav1.ConditionTrue:
		ready.Reason, ready.Message = banlieuev1.ReasonInfrastructureNotReady, messageOf(infra, "the infrastructure machine has not been observed yet")
	default:
		ready.Status, ready.Reason, ready.Message = metav1.ConditionTrue, banlieuev1.ReasonReconciled, "the VM is scheduled and its infrastructure is ready"
	}
	banlieuev1.SetCondition(&status.Conditions, generation, ready)
}

func messageOf(c *metav1.Condition, fallback string) string {
	if c == nil || c.Message == "" {
		return fallback
	}
	return c.Message
}
