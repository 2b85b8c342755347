package controller

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	infrav1 "banlieue.io/banlieue/api/infrastructure/v1alpha1"
	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
)

// Live migration, the controller's half (docs/guides/libvirt-provider.md, "Live migration"):
// pure decisions over a VirtualMachineMigration, its VM, the VM's LibvirtMachine and the
// scheduler's answer. The reconciler (migration_controller.go) only reads and writes.

// liveMigratable reports whether a migrationPolicy lets a VM move live.
func liveMigratable(policy string) bool {
	return policy == migrationLive || policy == migrationLiveOrRecreate
}

// migrationRefusal is why a Pending migration cannot start, by the VM's own state; "" when
// it may. kind is the VM's machine kind (its Provider's class), "" when unknown; machine its
// LibvirtMachine, nil when absent.
func migrationRefusal(vm *banlieuev1.VirtualMachine, kind string, machine *infrav1.LibvirtMachine) (phase banlieuev1.MigrationPhase, reason, message string) {
	switch {
	case vm == nil:
		return banlieuev1.MigrationFailed, banlieuev1.ReasonVMNotFound, ""
	case !vm.DeletionTimestamp.IsZero():
		return banlieuev1.MigrationCancelled, banlieuev1.ReasonVMDeleted,
			fmt.Sprintf("VirtualMachine %s is being deleted; the migration is cancelled", vm.Name)
	case !liveMigratable(vm.Spec.MigrationPolicy):
		return banlieuev1.MigrationFailed, banlieuev1.ReasonMigrationPolicyNotLive, fmt.Sprintf(
			"spec.vmName: VirtualMachine %s has migrationPolicy %s; a live move needs migrationPolicy live or liveOrRecreate",
			vm.Name, cmp.Or(vm.Spec.MigrationPolicy, "never"))
	case vm.Status.Scheduled == nil || vm.Status.InfrastructureRef == nil:
		return banlieuev1.MigrationFailed, banlieuev1.ReasonVMNotPlaced, fmt.Sprintf(
			"spec.vmName: VirtualMachine %s has no placement or no machine yet (status.scheduled, status.infrastructureRef)", vm.Name)
	case kind != "LibvirtMachine":
		s := vm.Status.Scheduled
		return banlieuev1.MigrationFailed, banlieuev1.ReasonLiveMigrationUnsupported, fmt.Sprintf(
			"spec.vmName: VirtualMachine %s runs on Provider %s/%s of ProviderClass %s, whose machines cannot move live; only libvirt machines can",
			vm.Name, cmp.Or(s.ProviderNamespace, vm.Namespace), s.ProviderName, s.ProviderClass)
	case vm.Spec.Paused || vm.Status.Phase != banlieuev1.VMPhaseReady || vm.Status.ObservedPowerState != banlieuev1.PoweredOn:
		return banlieuev1.MigrationFailed, banlieuev1.ReasonVMNotRunning, fmt.Sprintf(
			"spec.vmName: VirtualMachine %s is not running (phase %s); only a running guest moves live", vm.Name, cmp.Or(string(vm.Status.Phase), "unset"))
	}
	if names := snapshotLayers(machine); len(names) > 0 {
		return banlieuev1.MigrationFailed, banlieuev1.ReasonVMHasSnapshots, fmt.Sprintf(
			"spec.vmName: VirtualMachine %s keeps snapshot layers on its host (VirtualMachineSnapshots %v): a live move carries "+
				"the running disks only, and their snapshots' layers would stay behind; delete the snapshots (their layers merge "+
				"into the disks) and create another migration", vm.Name, names)
	}
	return "", "", ""
}

// snapshotLayers are the snapshots whose layers machine keeps on its host, asked (spec) or
// recorded by the provider (status), each once.
func snapshotLayers(machine *infrav1.LibvirtMachine) []string {
	if machine == nil {
		return nil
	}
	var names []string
	for _, s := range machine.Spec.Snapshots {
		names = append(names, s.Name)
	}
	for _, s := range machine.Status.Snapshots {
		if !slices.Contains(names, s.Name) {
			names = append(names, s.Name)
		}
	}
	return names
}

// activeMigration names the migration of a VM that may run: the one already started, else the
// oldest Pending one (creation time, then name). migrations are those naming the VM.
func activeMigration(migrations []banlieuev1.VirtualMachineMigration) string {
	var live []*banlieuev1.VirtualMachineMigration
	for i := range migrations {
		m := &migrations[i]
		if m.Status.Phase.Final() || !m.DeletionTimestamp.IsZero() {
			continue
		}
		if m.Status.Phase == banlieuev1.MigrationPreparingTarget || m.Status.Phase == banlieuev1.MigrationMigrating {
			return m.Name
		}
		live = append(live, m)
	}
	if len(live) == 0 {
		return ""
	}
	return slices.MinFunc(live, func(a, b *banlieuev1.VirtualMachineMigration) int {
		return cmp.Or(a.CreationTimestamp.Compare(b.CreationTimestamp.Time), cmp.Compare(a.Name, b.Name))
	}).Name
}

// endpointOf is a VM's recorded placement as a migration's source.
func endpointOf(vm *banlieuev1.VirtualMachine) *banlieuev1.MigrationEndpoint {
	s := vm.Status.Scheduled
	return &banlieuev1.MigrationEndpoint{ProviderName: s.ProviderName, ProviderNamespace: cmp.Or(s.ProviderNamespace, vm.Namespace),
		FailureDomain: s.FailureDomain}
}

func endpointName(e *banlieuev1.MigrationEndpoint) string {
	if e == nil {
		return ""
	}
	return e.ProviderNamespace + "/" + e.ProviderName
}

// migrationTarget chooses where a VM moves with the scheduler: in's VM placed afresh on its
// candidate Providers other than the one it runs on (capacity, cordons, anti-affinity as for a
// new VM), or on requested only. A refusal is returned as its reason and message.
func migrationTarget(in scheduleInput, requested *banlieuev1.MigrationProviderReference) (*banlieuev1.MigrationEndpoint, string, string) {
	source := endpointOf(in.VM)
	var cands []banlieuev1.Provider
	for _, p := range in.Providers {
		if p.Namespace == source.ProviderNamespace && p.Name == source.ProviderName {
			continue
		}
		cands = append(cands, p)
	}
	var wanted string
	if requested != nil {
		ns := cmp.Or(requested.Namespace, in.VM.Namespace)
		wanted = ns + "/" + requested.Name
		if wanted == endpointName(source) {
			return nil, banlieuev1.ReasonTargetIsSource, fmt.Sprintf("spec.targetProvider: Provider %s is the Provider the VM runs on", wanted)
		}
		cands = slices.DeleteFunc(cands, func(p banlieuev1.Provider) bool { return p.Namespace != ns || p.Name != requested.Name })
		if len(cands) == 0 {
			return nil, banlieuev1.ReasonTargetUnfit, fmt.Sprintf(
				"spec.targetProvider: Provider %s is not a candidate Provider of the VM: it does not exist, or does not admit namespace %s",
				wanted, in.VM.Namespace)
		}
		// The VM's providerSelector chose where it was placed, not where it may be moved by hand.
		vm := in.VM.DeepCopy()
		if vm.Spec.Placement != nil {
			vm.Spec.Placement.ProviderSelector = nil
		}
		in.VM = vm
	}
	in.Providers, in.Evict = cands, true
	d, err := schedule(in)
	if err != nil {
		reason, msg := banlieuev1.ReasonNoHostFits, err.Error()
		var se *scheduleError
		if errors.As(err, &se) {
			msg = se.Reason + ": " + se.Message
		}
		if requested != nil {
			return nil, banlieuev1.ReasonTargetUnfit, fmt.Sprintf("spec.targetProvider: Provider %s cannot hold the VM: %s", wanted, msg)
		}
		return nil, reason, fmt.Sprintf("no Provider other than %s can hold the VM: %s", endpointName(source), msg)
	}
	target := &banlieuev1.MigrationEndpoint{ProviderName: d.Provider.Name, ProviderNamespace: d.Provider.Namespace,
		FailureDomain: d.FailureDomain.Name}
	if len(d.ResolvedStorage) > 0 {
		target.Pool = d.ResolvedStorage[0].BackendID
	}
	return target, "", ""
}

// migrationInput is what one step of a migration is decided from.
type migrationInput struct {
	Migration *banlieuev1.VirtualMachineMigration
	// VM is the migration's VM, nil when it does not exist.
	VM *banlieuev1.VirtualMachine
	// MachineKind is the kind of the VM's machine, by its Provider's class ("" unknown).
	MachineKind string
	// Machine is the VM's LibvirtMachine, nil when absent or of another kind.
	Machine *infrav1.LibvirtMachine
	// Active is the migration of the VM that may run (activeMigration).
	Active string
	// Target is the scheduler's choice (or the checked spec.targetProvider) for a Pending
	// migration that may start; nil with TargetReason set when refused, both unset when not
	// asked.
	Target       *banlieuev1.MigrationEndpoint
	TargetReason string
	TargetMsg    string
	Now          metav1.Time
}

// stepMigration is the migration's next status from in. It is pure: the same input gives the
// same status, so a restarted controller resumes from what the status and the machine say.
func stepMigration(in migrationInput) banlieuev1.VirtualMachineMigrationStatus {
	m := in.Migration
	st := *m.Status.DeepCopy()
	st.ObservedGeneration = m.Generation
	if st.Phase == "" {
		st.Phase = banlieuev1.MigrationPending
	}
	if st.Phase.Final() {
		return st
	}
	ready := func(status metav1.ConditionStatus, reason, msg string) {
		banlieuev1.SetCondition(&st.Conditions, m.Generation, metav1.Condition{Type: banlieuev1.ConditionReady,
			Status: status, Reason: reason, Message: msg})
	}
	end := func(phase banlieuev1.MigrationPhase, reason, msg string) banlieuev1.VirtualMachineMigrationStatus {
		st.Phase, st.CompletedAt = phase, &in.Now
		ready(metav1.ConditionFalse, reason, msg)
		return st
	}
	if in.VM == nil && st.Phase != banlieuev1.MigrationPending {
		return end(banlieuev1.MigrationCancelled, banlieuev1.ReasonVMDeleted,
			fmt.Sprintf("VirtualMachine %s is being deleted; the migration is cancelled", m.Spec.VMName))
	}
	if in.VM == nil {
		return end(banlieuev1.MigrationFailed, banlieuev1.ReasonVMNotFound,
			fmt.Sprintf("spec.vmName: VirtualMachine %s/%s does not exist", m.Namespace, m.Spec.VMName))
	}
	if st.Phase == banlieuev1.MigrationPending {
		if m.Spec.Cancel {
			return end(banlieuev1.MigrationCancelled, banlieuev1.ReasonMigrationCancelled,
				fmt.Sprintf("spec.cancel was set; the provider was asked to stop and the VM runs on Provider %s", endpointName(endpointOrNil(in.VM))))
		}
		if phase, reason, msg := migrationRefusal(in.VM, in.MachineKind, in.Machine); reason != "" {
			return end(phase, reason, msg)
		}
		if in.Active != m.Name {
			ready(metav1.ConditionFalse, banlieuev1.ReasonMigrationWaiting, fmt.Sprintf(
				"VirtualMachineMigration %s of VirtualMachine %s is active; this one starts when it ends", in.Active, in.VM.Name))
			return st
		}
		if in.TargetReason != "" {
			st.Source = endpointOf(in.VM)
			return end(banlieuev1.MigrationFailed, in.TargetReason, in.TargetMsg)
		}
		if in.Target == nil {
			return st
		}
		st.Source, st.Target, st.StartedAt = endpointOf(in.VM), in.Target, &in.Now
		st.Phase = banlieuev1.MigrationPreparingTarget
		ready(metav1.ConditionFalse, banlieuev1.ReasonMigrationPreparingTarget, fmt.Sprintf(
			"the provider prepares the move to Provider %s, failure domain %s", endpointName(st.Target), st.Target.FailureDomain))
		return st
	}

	// Started: PreparingTarget or Migrating.
	if !in.VM.DeletionTimestamp.IsZero() {
		return end(banlieuev1.MigrationCancelled, banlieuev1.ReasonVMDeleted,
			fmt.Sprintf("VirtualMachine %s is being deleted; the migration is cancelled", in.VM.Name))
	}
	r := providerReport(in.Machine, m.Name)
	if r != nil {
		st.DowntimeMilliseconds, st.TotalMilliseconds = r.DowntimeMilliseconds, r.TotalMilliseconds
		switch r.Phase {
		case infrav1.MachineMigrationSucceeded:
			st.Phase, st.CompletedAt = banlieuev1.MigrationSucceeded, &in.Now
			ready(metav1.ConditionTrue, banlieuev1.ReasonMigrationSucceeded, fmt.Sprintf("the VM runs on Provider %s", endpointName(st.Target)))
			return st
		case infrav1.MachineMigrationFailed:
			return end(banlieuev1.MigrationFailed, banlieuev1.ReasonMigrationFailed, "the provider reported the move failed: "+r.Message)
		case infrav1.MachineMigrationAborted:
			return end(banlieuev1.MigrationFailed, banlieuev1.ReasonMigrationFailed, "the provider aborted the move: "+r.Message)
		case infrav1.MachineMigrationMigrating:
			// A message on a report under way is the provider saying why it cannot go on.
			msg := fmt.Sprintf("the provider copies the VM's memory and disk overlays to Provider %s", endpointName(st.Target))
			if r.Message != "" {
				msg = "the provider reports: " + r.Message
			}
			st.Phase = banlieuev1.MigrationMigrating
			ready(metav1.ConditionFalse, banlieuev1.ReasonMigrationMigrating, msg)
		}
	}
	if m.Spec.Cancel {
		return end(banlieuev1.MigrationCancelled, banlieuev1.ReasonMigrationCancelled,
			fmt.Sprintf("spec.cancel was set; the provider was asked to stop and the VM runs on Provider %s", endpointName(st.Source)))
	}
	if d := migrationDeadline(m, &st); !d.IsZero() && !in.Now.Time.Before(d) {
		// A report under way with a message is a provider that cannot tell where the VM runs
		// (it says so, and touches nothing): its words, not the source's name, end the message.
		where := "the VM runs on Provider " + endpointName(st.Source)
		if r != nil && r.Message != "" {
			where = "the provider reports: " + r.Message
		}
		return end(banlieuev1.MigrationFailed, banlieuev1.ReasonMigrationTimeout, fmt.Sprintf(
			"the move did not complete within spec.timeoutSeconds (%ds); the provider was asked to stop and %s",
			ptr.Deref(m.Spec.TimeoutSeconds, defaultMigrationTimeout), where))
	}
	return st
}

// defaultMigrationTimeout is spec.timeoutSeconds' CRD default, for objects read without it.
const defaultMigrationTimeout = 600

func endpointOrNil(vm *banlieuev1.VirtualMachine) *banlieuev1.MigrationEndpoint {
	if vm.Status.Scheduled == nil {
		return nil
	}
	return endpointOf(vm)
}

// migrationDeadline is when a started migration times out (zero: not started).
func migrationDeadline(m *banlieuev1.VirtualMachineMigration, st *banlieuev1.VirtualMachineMigrationStatus) time.Time {
	if st.StartedAt == nil {
		return time.Time{}
	}
	return st.StartedAt.Add(time.Duration(ptr.Deref(m.Spec.TimeoutSeconds, defaultMigrationTimeout)) * time.Second)
}

// providerReport is the provider's status.migration of machine for migration name, or nil.
func providerReport(machine *infrav1.LibvirtMachine, name string) *infrav1.LibvirtMachineMigrationStatus {
	if machine == nil || machine.Status.Migration == nil || machine.Status.Migration.MigrationName != name {
		return nil
	}
	return machine.Status.Migration
}

// machineMigration is what the machine's spec.migration must be for migration m with status
// st, given what it is now (cur): the request while m runs; the request with abort while m
// ended Failed or Cancelled but the provider reports the move under way; nil once nothing is
// under way. A request of another migration, or one the provider reported Succeeded (for the
// handover), is left alone (keep reports so).
func machineMigration(m *banlieuev1.VirtualMachineMigration, st *banlieuev1.VirtualMachineMigrationStatus,
	machine *infrav1.LibvirtMachine, deleting bool) (want *infrav1.LibvirtMachineMigration, keep bool) {
	cur := machine.Spec.Migration
	if cur != nil && cur.MigrationName != m.Name {
		return nil, true
	}
	if r := providerReport(machine, m.Name); cur != nil && r != nil && r.Phase == infrav1.MachineMigrationSucceeded {
		// The domain runs on the target and the source keeps nothing of it: withdrawn alone,
		// the request would leave the machine its source Provider's, whose provider would make
		// a new domain over new, empty volumes. Only the handover, the one update that also
		// moves providerRef (ADR-0154), removes it.
		return nil, true
	}
	started := st.Target != nil && st.StartedAt != nil
	if !started {
		return nil, cur == nil
	}
	req := &infrav1.LibvirtMachineMigration{MigrationName: m.Name, TargetFailureDomain: st.Target.FailureDomain,
		TargetProvider: infrav1.ProviderReference{Name: st.Target.ProviderName, Namespace: st.Target.ProviderNamespace},
		TargetPool:     st.Target.Pool}
	underway := false
	if r := providerReport(machine, m.Name); r != nil {
		underway = r.Phase == infrav1.MachineMigrationPreparingTarget || r.Phase == infrav1.MachineMigrationMigrating
	}
	switch {
	case !deleting && !st.Phase.Final():
		return req, false
	case underway && st.Phase != banlieuev1.MigrationSucceeded:
		req.Abort = true
		return req, false
	}
	return nil, false
}
