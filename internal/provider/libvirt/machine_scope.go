package libvirt

import (
	"cmp"
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/equality"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	infrav1 "banlieue.io/banlieue/api/infrastructure/v1alpha1"
	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
	"banlieue.io/banlieue/internal/app"
	"banlieue.io/banlieue/internal/ssa"
)

// Phases of a pass over a machine, in order. A pass goes through those that apply to it and
// stops at the first that ends it; the phase it ended in is logged and names the step of an
// error returned to the manager.
const (
	phaseClusterAPI = "reading the owner Machine"
	phaseProvider   = "reading the Provider"
	phaseAdmission  = "admitting the machine's namespace"
	phaseAuthority  = "checking the machine's authority"
	phaseConnect    = "connecting to the host"
	phaseIdentity   = "claiming the machine's identity"
	phaseUserData   = "reading the user-data"
	phaseConverge   = "converging the domain"
	phaseTeardown   = "tearing the domain down"
	phaseWrite      = "writing the machine"
)

// machineScope is one pass over a machine, carried through its phases: what the pass read,
// whether the machine in memory is the stored one, and the writes it makes.
//
// A pass writes once, at its end (finish, or fail when it stops early), with two documented
// exceptions that must reach the API server before the host changes: the identity (finalizer,
// spec.providerID, and a Cluster API machine's spec.domainName, before any host name is used)
// and the volume record (before each volume is created; machine_converge.go). Until the first
// of those, every write carries the resourceVersion read (ssa.IfUnchanged): a pass that started
// from a cache lagging behind the API server then fails with a Conflict and runs again on a
// fresh read, instead of dropping what the provider recorded since (domainUuid, volumes,
// bootVolume). From the identity on, the pass owns what it writes and applies it as it is.
type machineScope struct {
	r       *MachineReconciler
	machine *infrav1.LibvirtMachine
	// provider is the machine's Provider, read in phaseProvider.
	provider banlieuev1.Provider
	// capi is the owner Machine's word for a Cluster API machine, nil for any other.
	capi *capiPass
	// phase is the step the pass is in.
	phase string
	// claimed is set once the identity phase is through: later writes need no precondition.
	claimed bool
}

// writeOptions are the options of the pass's status writes at its current point.
func (s *machineScope) writeOptions() []ssa.Option {
	if s.claimed {
		return nil
	}
	return []ssa.Option{ssa.IfUnchanged}
}

// fail ends the pass on err: Ready=False with err's reason and message (so a deletion that
// blocks says why), written unless it is the one already stored, and a retry on the error
// interval. This is the pass's one retry policy; a host that does not answer, or a refusal of
// the authority check, never costs a machine its record (writeOptions).
func (s *machineScope) fail(ctx context.Context, err error) (ctrl.Result, error) {
	log.FromContext(ctx).Info("machine not reconciled", "phase", s.phase, "error", err.Error())
	status := failedStatus(s.machine, err)
	if equality.Semantic.DeepEqual(status, s.machine.Status) {
		// The same failure as last time: nothing to write.
		return ctrl.Result{RequeueAfter: cmp.Or(s.r.Resync, app.ErrorRetry)}, nil
	}
	if werr := s.writeStatus(ctx, &status); client.IgnoreNotFound(werr) != nil {
		return ctrl.Result{}, werr
	}
	return ctrl.Result{RequeueAfter: cmp.Or(s.r.Resync, hostRetry(err), app.ErrorRetry)}, nil
}

// stop ends the pass with status written when it differs from the stored one, and a look again
// after requeue: a pass that waits (paused, refused) rather than fails.
func (s *machineScope) stop(ctx context.Context, status *infrav1.LibvirtMachineStatus, requeue ctrl.Result) (ctrl.Result, error) {
	if !equality.Semantic.DeepEqual(*status, s.machine.Status) {
		if err := s.writeStatus(ctx, status); err != nil {
			return ctrl.Result{}, err
		}
	}
	return requeue, nil
}

// writeStatus applies status whole, under the provider's field manager, with the options of the
// pass's current point.
func (s *machineScope) writeStatus(ctx context.Context, status *infrav1.LibvirtMachineStatus) error {
	if err := ssa.ApplyStatus(ctx, s.r.Client, s.machine, ownStatus(status), banlieuev1.FieldManagerProviderLibvirt, s.writeOptions()...); err != nil {
		return fmt.Errorf("%s: status: %w", s.phase, err)
	}
	return nil
}

// ownStatus is st as the machine's own provider applies it: status.migrationTarget is a live
// move's target Provider's, under its own field manager, so it is never sent: a copy read with
// the machine would take the field over and could put back a stale record.
func ownStatus(st *infrav1.LibvirtMachineStatus) *infrav1.LibvirtMachineStatus {
	own := *st
	own.MigrationTarget = nil
	return &own
}

// patchSpec writes what mutate changes in the machine's spec or metadata, and reads the stored
// machine back into it.
func (s *machineScope) patchSpec(ctx context.Context, what string, mutate func(*infrav1.LibvirtMachine)) error {
	patch := client.MergeFrom(s.machine.DeepCopy())
	mutate(s.machine)
	if err := s.r.Client.Patch(ctx, s.machine, patch, client.FieldOwner(banlieuev1.FieldManagerProviderLibvirt)); err != nil {
		return fmt.Errorf("%s: setting %s: %w", s.phase, what, err)
	}
	return nil
}
