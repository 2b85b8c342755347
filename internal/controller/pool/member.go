package pool

import (
	"net/netip"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
)

// memberPhase is what a member is to its pool (docs/guides/virtualmachine-pools.md).
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

// poolMembers keeps the VMs of vms that are provably pool's members: those it controls, and
// those a claim took from it. Labels alone prove nothing, since anyone may set them: a VM that
// only carries the pool's label is not counted, deleted or offered to a claim.
func poolMembers(pool *banlieuev1.VirtualMachinePool, vms []banlieuev1.VirtualMachine) []banlieuev1.VirtualMachine {
	var out []banlieuev1.VirtualMachine
	for i := range vms {
		if controlledBy(&vms[i], pool) || claimedFrom(&vms[i], pool) {
			out = append(out, vms[i])
		}
	}
	return out
}

// controlledBy reports whether vm is an unclaimed member as newMember made it: the pool's label
// and the pool, by UID (so not an earlier pool of the same name), as controller. These are the
// only VMs the pool ever deletes.
func controlledBy(vm *banlieuev1.VirtualMachine, pool *banlieuev1.VirtualMachinePool) bool {
	owner := metav1.GetControllerOfNoCopy(vm)
	return owner != nil && owner.UID == pool.UID && vm.Labels[banlieuev1.LabelPool] == pool.Name
}

// claimedFrom reports whether vm is a member a claim took, as takeMember left it: the pool's
// label, and a VirtualMachineClaim as controller under the name its claim label gives. The pool
// cannot check the claim's UID without reading claims, and need not: it only counts these
// (they take room under maxReplicas) and never deletes them.
func claimedFrom(vm *banlieuev1.VirtualMachine, pool *banlieuev1.VirtualMachinePool) bool {
	owner := metav1.GetControllerOfNoCopy(vm)
	if owner == nil || owner.Kind != "VirtualMachineClaim" {
		return false
	}
	gv, err := schema.ParseGroupVersion(owner.APIVersion)
	return err == nil && gv.Group == banlieuev1.GroupVersion.Group &&
		vm.Labels[banlieuev1.LabelPool] == pool.Name && vm.Labels[banlieuev1.LabelClaim] == owner.Name
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
		Revision: vm.Labels[banlieuev1.LabelPoolImageRevision],
	}
	if len(vm.Spec.NetworkOverrides) > 0 {
		if a, err := netip.ParseAddr(vm.Spec.NetworkOverrides[0].Static.Address); err == nil && a.Is4() {
			m.Address = a
		}
	}
	cond := meta.FindStatusCondition(vm.Status.Conditions, string(readiness))
	m.Signalled = cond != nil
	_, claimed := vm.Labels[banlieuev1.LabelClaim]
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
