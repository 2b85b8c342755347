package pool

import (
	"net/netip"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"

	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
)

// memberPhase is what a member is to its pool (SPEC §3.8 step 3).
type memberPhase int

const (
	phaseProvisioning memberPhase = iota
	phaseReady
	phaseClaimed
	phaseDeleting
)

func (p memberPhase) String() string {
	return [...]string{"Provisioning", "Ready", "Claimed", "Deleting"}[p]
}

// member is the planner's view of one member VM: everything it needs and nothing it could
// misuse, so the plan is a pure function of these values.
type member struct {
	Name  string
	Phase memberPhase
	// Age is the time since creation; ReadyFor the time since the readiness condition last
	// turned True (zero unless Ready).
	Age, ReadyFor time.Duration
	// Revision is the image revision the member was created for.
	Revision string
	// Address is the member's static address, if any; it stays in use until the member is gone.
	Address netip.Addr
	// Signalled says the member carries the readiness condition at all, True or not.
	Signalled bool
}

// projectMember views vm as a member of a pool whose readiness signal is readiness, at now.
// The phase is the first that applies: Deleting, Claimed, Ready, Provisioning.
func projectMember(vm *banlieuev1.VirtualMachine, readiness banlieuev1.PoolReadiness, now time.Time) member {
	m := member{
		Name:     vm.Name,
		Age:      now.Sub(vm.CreationTimestamp.Time),
		Revision: vm.Labels[LabelPoolImageRevision],
	}
	if len(vm.Spec.NetworkOverrides) > 0 {
		if a, err := netip.ParseAddr(vm.Spec.NetworkOverrides[0].Static.Address); err == nil && a.Is4() {
			m.Address = a
		}
	}
	cond := meta.FindStatusCondition(vm.Status.Conditions, string(readiness))
	m.Signalled = cond != nil
	_, claimed := vm.Labels[LabelClaim]
	switch {
	case !vm.DeletionTimestamp.IsZero():
		m.Phase = phaseDeleting
	case claimed:
		m.Phase = phaseClaimed
	case cond != nil && cond.Status == "True":
		m.Phase = phaseReady
		m.ReadyFor = now.Sub(cond.LastTransitionTime.Time)
	default:
		m.Phase = phaseProvisioning
	}
	return m
}
