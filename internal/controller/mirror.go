package controller

import (
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
)

// VirtualMachine condition types.
const (
	conditionReady               = "Ready"
	conditionScheduled           = "Scheduled"
	conditionPlacementValid      = "PlacementValid"
	conditionInfrastructureReady = "InfrastructureReady"
	conditionGuestReady          = "GuestReady"
)

// Aggregate Ready and InfrastructureReady reasons (docs/guides/libvirt-provider.md, "Who does what").
const (
	ReasonReconciled             = "Reconciled"
	ReasonScheduling             = "Scheduling"
	ReasonPlacementInvalid       = "PlacementInvalid"
	ReasonInfrastructureNotReady = "InfrastructureNotReady"
	ReasonPending                = "Pending"
)

// mirror copies the machine's observed state into the VM's status and recomputes the aggregate
// Ready (docs/guides/libvirt-provider.md, "Who does what"). Conditions go through meta.SetStatusCondition so an unchanged one keeps its
// lastTransitionTime and a repeated pass writes nothing.
func mirror(status *banlieuev1.VirtualMachineStatus, infra infraView, generation int64) {
	status.Initialization = infra.Initialization.DeepCopy()
	status.Addresses = append([]banlieuev1.MachineAddress(nil), infra.Addresses...)
	status.ObservedPowerState = infra.PowerState

	infraReady := metav1.Condition{Type: conditionInfrastructureReady, Status: metav1.ConditionFalse,
		Reason: ReasonPending, Message: "infrastructure has not reported a Ready condition yet"}
	if infra.Ready != nil {
		infraReady.Status, infraReady.Reason, infraReady.Message = infra.Ready.Status, infra.Ready.Reason, infra.Ready.Message
	}
	setCondition(status, generation, infraReady)

	// GuestReady is absent when the provider cannot evaluate the guest (agent unreachable);
	// inventing a False would claim an observation nobody made.
	if infra.GuestReady == nil {
		meta.RemoveStatusCondition(&status.Conditions, conditionGuestReady)
	} else {
		g := *infra.GuestReady
		setCondition(status, generation, metav1.Condition{Type: conditionGuestReady, Status: g.Status, Reason: g.Reason, Message: g.Message})
	}

	setAggregateReady(status, generation)
	status.ObservedGeneration = generation
}

// setAggregateReady derives Ready from Scheduled, PlacementValid and InfrastructureReady.
func setAggregateReady(status *banlieuev1.VirtualMachineStatus, generation int64) {
	scheduled := meta.FindStatusCondition(status.Conditions, conditionScheduled)
	placement := meta.FindStatusCondition(status.Conditions, conditionPlacementValid)
	infra := meta.FindStatusCondition(status.Conditions, conditionInfrastructureReady)
	ready := metav1.Condition{Type: conditionReady, Status: metav1.ConditionFalse}
	switch {
	case scheduled == nil || scheduled.Status != metav1.ConditionTrue:
		ready.Reason, ready.Message = ReasonScheduling, messageOf(scheduled, "the VM has not been scheduled yet")
	case placement != nil && placement.Status == metav1.ConditionFalse:
		ready.Reason, ready.Message = ReasonPlacementInvalid, placement.Message
	case infra == nil || infra.Status != metav1.ConditionTrue:
		ready.Reason, ready.Message = ReasonInfrastructureNotReady, messageOf(infra, "the infrastructure machine has not been observed yet")
	default:
		ready.Status, ready.Reason, ready.Message = metav1.ConditionTrue, ReasonReconciled, "the VM is scheduled and its infrastructure is ready"
	}
	setCondition(status, generation, ready)
}

func messageOf(c *metav1.Condition, fallback string) string {
	if c == nil || c.Message == "" {
		return fallback
	}
	return c.Message
}

// setCondition is the one way VM conditions are set, so it bounds every message: they carry
// provider and scheduler text of any length (banlieuev1.ConditionMessage).
func setCondition(status *banlieuev1.VirtualMachineStatus, generation int64, c metav1.Condition) {
	c.ObservedGeneration = generation
	c.Message = banlieuev1.ConditionMessage(c.Message)
	meta.SetStatusCondition(&status.Conditions, c)
}
