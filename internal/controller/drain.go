package controller

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
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
	case !movable(vm.Spec.MigrationPolicy) && !liveMigratable(vm.Spec.MigrationPolicy):
		return banlieuev1.ReasonDrainMigrationNever, "migrationPolicy never: banlieue does not carry a VM's disk to another host, " +
			"so moving it would lose its data; stop and move its data yourself, or set migrationPolicy recreate to recreate it " +
			"from its image (its disk is lost)"
	}
	return "", ""
}

// movable reports whether a migrationPolicy lets banlieue recreate the VM elsewhere (manual
// only with the approval unmovable checks). A drain moves live and liveOrRecreate VMs live
// instead (liveDrainMove); a changed placement still recreates a liveOrRecreate one
// (docs/guides/libvirt-provider.md, "Live migration").
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
// migrations holds, by drainKey, the VirtualMachineMigration this drain created for a VM
// (drainMigrationName), where it exists.
func planDrain(p *banlieuev1.Provider, placed []banlieuev1.VirtualMachine, migrations map[string]*banlieuev1.VirtualMachineMigration,
	now metav1.Time) *banlieuev1.ProviderDrainStatus {
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
		how, msg := "", ""
		if liveMigratable(vm.Spec.MigrationPolicy) {
			var blockReason string
			how, msg, blockReason = liveDrainMove(vm, migrations[key], drainMigrationName(p, next.StartedAt, vm.Name))
			if blockReason != "" {
				block(vm, blockReason, msg)
				continue
			}
		}
		if prev, ok := prevMoving[key]; ok {
			prev.Reason, prev.Message = how, msg
			next.Moving = append(next.Moving, prev)
			continue
		}
		waiting = append(waiting, banlieuev1.DrainVM{Namespace: vm.Namespace, Name: vm.Name, Reason: how, Message: msg, Since: now})
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

// liveDrainImpossible are the refusals of a migration that say no live move can happen now,
// whatever the target: only these let the drain recreate a liveOrRecreate VM.
var liveDrainImpossible = []string{banlieuev1.ReasonVMNotRunning, banlieuev1.ReasonLiveMigrationUnsupported}

// liveDrainMove is how the drain moves a live or liveOrRecreate VM, given the migration named
// name it created for it (nil: none yet): live (ReasonDrainMovingLive, the migration to create
// or follow), recreated (ReasonDrainLiveImpossible, liveOrRecreate only, when the migration
// was refused as impossible), or blocked with blockReason once the migration ended otherwise.
// A live move never falls back to a recreate after a failure of the move itself: the disk
// would be lost for a move that may succeed later.
func liveDrainMove(vm *banlieuev1.VirtualMachine, m *banlieuev1.VirtualMachineMigration, name string) (how, msg, blockReason string) {
	live := fmt.Sprintf("VirtualMachineMigration %s/%s moves it live", vm.Namespace, name)
	if m == nil || !m.Status.Phase.Final() || m.Status.Phase == banlieuev1.MigrationSucceeded {
		return banlieuev1.ReasonDrainMovingLive, live, ""
	}
	c := meta.FindStatusCondition(m.Status.Conditions, banlieuev1.ConditionReady)
	reason, cmsg := "", ""
	if c != nil {
		reason, cmsg = c.Reason, c.Message
	}
	if vm.Spec.MigrationPolicy == migrationLiveOrRecreate && m.Status.Phase == banlieuev1.MigrationFailed &&
		slices.Contains(liveDrainImpossible, reason) {
		return banlieuev1.ReasonDrainLiveImpossible, fmt.Sprintf("migrationPolicy liveOrRecreate: VirtualMachineMigration %s/%s was refused (%s: %s); "+
			"recreating the VM on another host from its image (its disk is not carried)", vm.Namespace, name, reason, cmsg), ""
	}
	return "", fmt.Sprintf("VirtualMachineMigration %s/%s ended %s (%s: %s); the VM stays here. Delete that migration to let the drain try again",
		vm.Namespace, name, m.Status.Phase, reason, cmsg), banlieuev1.ReasonDrainLiveMigrationFailed
}

// drainMigrationName is the VirtualMachineMigration a drain of p started at startedAt creates
// for VM vmName: fixed for the drain, so a restarted controller finds the one it created, and
// new for the next drain, so an ended migration of an earlier one is not taken for this one's.
func drainMigrationName(p *banlieuev1.Provider, startedAt metav1.Time, vmName string) string {
	h := sha256.Sum256([]byte(fmt.Sprintf("%s/%s@%d", p.Namespace, p.Name, startedAt.Unix())))
	return fmt.Sprintf("%s-drain-%s", vmName, hex.EncodeToString(h[:4]))
}

// evicting reports whether the drain of the VM's Provider is recreating it now: the Provider
// is drained and lists the VM in status.drain.moving, other than as a live move.
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
			return v.Namespace == vm.Namespace && v.Name == vm.Name && v.Reason != banlieuev1.ReasonDrainMovingLive
		})
	}
	return false
}
