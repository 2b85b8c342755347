package controller

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
)

// drainRetry is how long a VM that no other host could hold stays blocked before the drain
// tries it again: long enough that a drain never spins on a VM that cannot move, short enough
// that a host added or freed meanwhile is used.
const drainRetry = 5 * time.Minute

// maxDrainBlocked bounds status.drain.blocked (its CRD maxItems); the count still covers all.
const maxDrainBlocked = 4096

// onProvider reports whether vm's recorded placement is Provider p.
func onProvider(vm *banlieuev1.VirtualMachine, p *banlieuev1.Provider) bool {
	s := vm.Status.Scheduled
	return s != nil && s.ProviderName == p.Name && cmp.Or(s.ProviderNamespace, vm.Namespace) == p.Namespace
}

// drainKey names a VM in a drain's lists.
func drainKey(namespace, name string) string { return namespace + "/" + name }

// unmovable is why the drain cannot move vm by its own spec, or "" when it may move it.
func unmovable(vm *banlieuev1.VirtualMachine) (reason, message string) {
	switch {
	case vm.Spec.Paused:
		return banlieuev1.ReasonDrainPaused, "the VM is paused (spec.paused): nothing reconciles it until it is resumed"
	case vm.Spec.MigrationPolicy == migrationManual && vm.Annotations[banlieuev1.AnnotationMigrate] != "true":
		return banlieuev1.ReasonDrainAwaitingApproval, fmt.Sprintf("migrationPolicy manual: annotate the VM %s=true to let the drain "+
			"recreate it on another host from its image (its disk is not carried)", banlieuev1.AnnotationMigrate)
	case vm.Spec.MigrationPolicy == migrationLive:
		return banlieuev1.ReasonDrainLiveOnly, "migrationPolicy live: the drain does not create live migrations yet and " +
			"must not recreate the VM; create a VirtualMachineMigration for it, or set migrationPolicy liveOrRecreate"
	case !movable(vm.Spec.MigrationPolicy):
		return banlieuev1.ReasonDrainMigrationNever, "migrationPolicy never: banlieue does not carry a VM's disk to another host, " +
			"so moving it would lose its data; stop and move its data yourself, or set migrationPolicy recreate to recreate it " +
			"from its image (its disk is lost)"
	}
	return "", ""
}

// movable reports whether a migrationPolicy lets banlieue recreate the VM elsewhere (manual
// only with the approval unmovable checks). liveOrRecreate recreates until the drain and a
// changed placement move VMs live (docs/guides/libvirt-provider.md, "Live migration").
func movable(policy string) bool {
	return recreates(policy) || policy == migrationManual
}

// recreates reports whether a migrationPolicy recreates the VM elsewhere without approval.
func recreates(policy string) bool {
	return policy == migrationRecreate || policy == migrationAutomatic || policy == migrationLiveOrRecreate
}

// planDrain is the drain's next status for Provider p from the VMs placed on it, at now; nil
// when p is not being drained. It is pure: the same Provider (with the status last written),
// VMs and time give the same plan, so a controller restarted mid-drain resumes it where the
// status says. A VM keeps its slot while it moves; free slots go to the movable VMs in
// namespace/name order; a VM that cannot move is listed with why, never retried in a loop.
func planDrain(p *banlieuev1.Provider, placed []banlieuev1.VirtualMachine, now metav1.Time) *banlieuev1.ProviderDrainStatus {
	if p.Spec.Drain == nil {
		return nil
	}
	next := &banlieuev1.ProviderDrainStatus{StartedAt: now, Total: int32(len(placed)), Remaining: int32(len(placed))}
	prevMoving, prevBlocked := map[string]banlieuev1.DrainVM{}, map[string]banlieuev1.DrainVM{}
	if prev := p.Status.Drain; prev != nil {
		next.StartedAt, next.Total = prev.StartedAt, max(prev.Total, next.Remaining)
		for _, v := range prev.Moving {
			prevMoving[drainKey(v.Namespace, v.Name)] = v
		}
		for _, v := range prev.Blocked {
			prevBlocked[drainKey(v.Namespace, v.Name)] = v
		}
	}
	vms := slices.Clone(placed)
	slices.SortFunc(vms, func(a, b banlieuev1.VirtualMachine) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})

	var blocked, waiting []banlieuev1.DrainVM
	block := func(vm *banlieuev1.VirtualMachine, reason, message string) {
		since := now
		if prev, ok := prevBlocked[drainKey(vm.Namespace, vm.Name)]; ok && prev.Reason == reason {
			since = prev.Since
		}
		blocked = append(blocked, banlieuev1.DrainVM{Namespace: vm.Namespace, Name: vm.Name, Reason: reason, Message: message, Since: since})
	}
	for i := range vms {
		vm := &vms[i]
		key := drainKey(vm.Namespace, vm.Name)
		if reason, message := unmovable(vm); reason != "" {
			block(vm, reason, message)
			continue
		}
		if c := meta.FindStatusCondition(vm.Status.Conditions, banlieuev1.ConditionPlacementValid); c != nil &&
			c.Reason == banlieuev1.ReasonNoHostFits {
			if _, wasMoving := prevMoving[key]; wasMoving {
				block(vm, banlieuev1.ReasonDrainNoHostFits, c.Message)
				continue
			}
		}
		if prev, ok := prevBlocked[key]; ok && prev.Reason == banlieuev1.ReasonDrainNoHostFits && now.Sub(prev.Since.Time) < drainRetry {
			blocked = append(blocked, prev)
			continue
		}
		if prev, ok := prevMoving[key]; ok {
			next.Moving = append(next.Moving, prev)
			continue
		}
		waiting = append(waiting, banlieuev1.DrainVM{Namespace: vm.Namespace, Name: vm.Name, Since: now})
	}
	free := int(ptr.Deref(p.Spec.Drain.MaxConcurrent, 1)) - len(next.Moving)
	if free > 0 {
		next.Moving = append(next.Moving, waiting[:min(free, len(waiting))]...)
	}
	next.Blocked = blocked[:min(len(blocked), maxDrainBlocked)]
	switch {
	case len(vms) == 0:
		next.Phase = banlieuev1.DrainDrained
	case len(next.Moving) == 0 && len(waiting) == 0:
		next.Phase = banlieuev1.DrainBlocked
	default:
		next.Phase = banlieuev1.DrainDraining
	}
	return next
}

// nextDrainRetry is when the earliest NoHostFits VM of st may be tried again (zero: none).
func nextDrainRetry(st *banlieuev1.ProviderDrainStatus, now time.Time) time.Duration {
	var soonest time.Duration
	if st == nil {
		return 0
	}
	for _, v := range st.Blocked {
		if v.Reason != banlieuev1.ReasonDrainNoHostFits {
			continue
		}
		if d := max(v.Since.Add(drainRetry).Sub(now), time.Second); soonest == 0 || d < soonest {
			soonest = d
		}
	}
	return soonest
}

// evicting reports whether the drain of the VM's Provider is moving it now: the Provider is
// drained and lists the VM in status.drain.moving.
func evicting(vm *banlieuev1.VirtualMachine, providers []banlieuev1.Provider) bool {
	for i := range providers {
		p := &providers[i]
		if !onProvider(vm, p) {
			continue
		}
		if p.Spec.Drain == nil || p.Status.Drain == nil {
			return false
		}
		return slices.ContainsFunc(p.Status.Drain.Moving, func(v banlieuev1.DrainVM) bool {
			return v.Namespace == vm.Namespace && v.Name == vm.Name
		})
	}
	return false
}
