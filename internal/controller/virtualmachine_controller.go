package controller

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
	"banlieue.io/banlieue/internal/app"
	"banlieue.io/banlieue/internal/finalizer"
	"banlieue.io/banlieue/internal/ssa"
	"banlieue.io/banlieue/pkg/nocloud"
)

// Migration policies.
const (
	migrationRecreate = "recreate"
	// migrationAutomatic is the former name of migrationRecreate.
	migrationAutomatic = "automatic"
	migrationManual    = "manual"
	// migrationLive lets a VirtualMachineMigration move the VM live and nothing recreate it.
	migrationLive = "live"
	// migrationLiveOrRecreate moves live, and recreates where a live move is impossible.
	migrationLiveOrRecreate = "liveOrRecreate"
)

// virtualMachineReconciler turns a VirtualMachine into its backend's machine (docs/guides/libvirt-provider.md, "7. Run a VM").
type virtualMachineReconciler struct {
	client client.Client
	// apiReader reads what must not come from the cache: userData sources (get-only RBAC) and
	// a machine deletion finds absent (a stale "absent" would drop the finalizer too early).
	apiReader client.Reader
	// recorder emits the VM's transitions (docs/guides/libvirt-provider.md, "Troubleshooting with
	// events").
	recorder events.EventRecorder
	// assumed are the placements decided and not yet in the cache, which every decision of
	// the namespace sees (assumed.go); they make several workers safe for anti-affinity.
	assumed *assumedPlacements
	// applied are the machines applied last, so a pass that would change nothing skips the
	// apply (applied.go).
	applied *appliedMachines
}

// Reconcile reads like every reconciler of banlieue: fetch, then delete or normal; the normal
// path runs named phases that each record their outcome in one status, which is written once.
func (r *virtualMachineReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var vm banlieuev1.VirtualMachine
	if err := r.client.Get(ctx, req.NamespacedName, &vm); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	// Deletion goes first even for a paused VM: pausing must not make a VM undeletable.
	if !vm.DeletionTimestamp.IsZero() {
		return r.finalize(ctx, &vm)
	}
	if vm.Spec.Paused {
		// Only the phase changes: a paused VM is left alone, and says so.
		return r.writeStatus(ctx, &vm, vm.Status.DeepCopy(), app.RequeueLong)
	}
	if err := finalizer.Ensure(ctx, r.client, &vm, banlieuev1.FinalizerVirtualMachine); err != nil {
		return ctrl.Result{}, err
	}
	status := vm.Status.DeepCopy()
	status.ObservedGeneration = vm.Generation
	if status.Scheduled != nil && status.Scheduled.ProviderNamespace == "" {
		// Recorded before providerNamespace existed, when every placement was in the VM's own
		// namespace: saying so is no move, and the next status write records it.
		status.Scheduled.ProviderNamespace = vm.Namespace
	}
	requeue, assumed, err := r.reconcileNormal(ctx, &vm, status)
	// A placement this pass assumed stays assumed only if the pass writes it.
	var written *banlieuev1.ScheduledPlacement
	defer func() { assumed.settle(written) }()
	switch {
	case errors.Is(err, errStaleRead):
		// The watch brings the newer version, and with it another pass.
		return ctrl.Result{RequeueAfter: app.ErrorRetry}, nil
	case errors.Is(err, reconcile.TerminalError(nil)):
		// Recorded, and not retried: an edit of the VM, its class, image or Provider wakes it.
		if _, werr := r.writeStatus(ctx, &vm, status, 0); werr != nil {
			return ctrl.Result{}, werr
		}
		written = status.Scheduled
		return ctrl.Result{}, err
	case err != nil:
		return ctrl.Result{}, err
	}
	res, err := r.writeStatus(ctx, &vm, status, requeue)
	if err == nil {
		written = status.Scheduled
	}
	return res, err
}

// errStaleRead ends a pass that worked from a cached VM older than the API server's.
var errStaleRead = errors.New("the cached VirtualMachine is stale")

// vmInputs is everything a VM's placement and machine are decided from.
type vmInputs struct {
	class     banlieuev1.VMClass
	image     banlieuev1.VMImage
	providers []banlieuev1.Provider
	// nsLabels are the labels of the VM's namespace, which shared Providers' allowedNamespaces
	// select on.
	nsLabels map[string]string
	siblings []banlieuev1.VirtualMachine
	// elsewhere are the VMs of other namespaces placed on the candidate Providers.
	elsewhere []banlieuev1.VirtualMachine
	// placedClasses are the classes of placements recorded without cpus and memoryMiB and of
	// placements not yet provisioned.
	placedClasses map[string]*banlieuev1.VMClass
}

// reconcileNormal runs the phases of a live VM, recording each outcome in status; it returns
// when to look again, and the placement it assumed (nil: none), which the caller settles. An
// error means status must not be written, except a terminal one (reconcile.TerminalError): the
// outcome is recorded and will not change without an edit.
func (r *virtualMachineReconciler) reconcileNormal(ctx context.Context, vm *banlieuev1.VirtualMachine,
	status *banlieuev1.VirtualMachineStatus) (time.Duration, *assumption, error) {
	in, err := r.readInputs(ctx, vm)
	if err != nil {
		return 0, nil, fmt.Errorf("reading the VM's inputs: %w", err)
	}
	if msg := imageClassMismatch(&in.class, &in.image); msg != "" {
		// Scheduled is left alone: the pairing is wrong whatever the placement.
		banlieuev1.SetCondition(&status.Conditions, vm.Generation, metav1.Condition{Type: banlieuev1.ConditionReady, Status: metav1.ConditionFalse,
			Reason: banlieuev1.ReasonImageClassMismatch, Message: msg})
		return 0, nil, reconcile.TerminalError(errors.New(msg))
	}

	// A VM its Provider's drain is moving is placed afresh; when no other host can hold it, it
	// stays where it is and says why (the drain then lists it as blocked).
	evict := evicting(vm, in.providers)
	var noHost error
	d, assumed, err := r.assumed.decide(vm, status.Scheduled, in.siblings, in.elsewhere, func(siblings, elsewhere []banlieuev1.VirtualMachine) (decision, error) {
		si := scheduleInput{VM: vm, Class: &in.class, Image: &in.image, Providers: in.providers,
			NamespaceLabels: in.nsLabels, Siblings: siblings, Elsewhere: elsewhere, Classes: in.placedClasses, Evict: evict}
		if evict {
			d, err := schedule(si)
			if err == nil {
				return d, nil
			}
			noHost, si.Evict = err, false
		}
		return schedule(si)
	})
	if err != nil {
		var se *scheduleError
		if !errors.As(err, &se) {
			return 0, nil, fmt.Errorf("scheduling: %w", err)
		}
		notScheduled(vm, status, se.Reason, se.Message, banlieuev1.ReasonScheduling)
		return app.RequeueDefault, nil, nil
	}
	requeue, err := r.realise(ctx, vm, status, &in, d, evict)
	if err == nil && noHost != nil {
		banlieuev1.SetCondition(&status.Conditions, vm.Generation, metav1.Condition{Type: banlieuev1.ConditionPlacementValid, Status: metav1.ConditionFalse,
			Reason: banlieuev1.ReasonNoHostFits, Message: fmt.Sprintf("Provider %s/%s is being drained and no other host can hold the VM: %s",
				status.Scheduled.ProviderNamespace, status.Scheduled.ProviderName, noHost)})
	}
	return requeue, assumed, err
}

// realise acts on decision d, taken from in: it creates or updates the VM's machine and
// records the placement, or handles the drift from the recorded one.
func (r *virtualMachineReconciler) realise(ctx context.Context, vm *banlieuev1.VirtualMachine,
	status *banlieuev1.VirtualMachineStatus, in *vmInputs, d decision, evict bool) (time.Duration, error) {
	kind, err := infraKindFor(d.Provider.Spec.ProviderClassRef.Name)
	if err != nil {
		notScheduled(vm, status, banlieuev1.ReasonInfraBuildFailed, err.Error(), banlieuev1.ReasonInfraBuildFailed)
		return 0, reconcile.TerminalError(err)
	}

	next := d.placement()
	if err := r.confirmFresh(ctx, vm, status, next); err != nil {
		return 0, err
	}
	existing := kind.newObject()
	exists := true
	if err := r.client.Get(ctx, client.ObjectKeyFromObject(vm), existing); apierrors.IsNotFound(err) {
		exists = false
	} else if err != nil {
		return 0, fmt.Errorf("reading %s %s/%s: %w", kind.GVK.Kind, vm.Namespace, vm.Name, err)
	}
	// Drift only matters while a machine realises the old placement; once it is gone (deleted
	// by a migration or by hand) the new decision is simply applied.
	if drift := placementDrift(status.Scheduled, next); drift != "" && exists {
		if evict {
			drift = banlieuev1.ReasonProviderDraining
		}
		return app.RequeueDefault, r.drifted(ctx, vm, status, kind, existing, drift, next)
	}

	held, err := r.heldByExport(ctx, vm)
	if err != nil {
		return 0, err
	}
	build := buildInput{VM: vm, Class: &in.class, Image: &in.image, Decision: d, HeldOff: held}
	if exists {
		build.Existing = existing
	}
	machine, refused, err := r.applyMachine(ctx, kind, build)
	if err != nil {
		return 0, err
	}
	if refused != nil {
		notScheduled(vm, status, refused.Reason, refused.Message, refused.Reason)
		return app.ErrorRetry, nil
	}
	if !exists {
		r.recorder.Eventf(vm, machine, corev1.EventTypeNormal, banlieuev1.ReasonMachineCreated, "Create",
			"created %s %s on Provider %s, failure domain %s", kind.GVK.Kind, vm.Name, next.ProviderName, next.FailureDomain)
	}

	banlieuev1.SetCondition(&status.Conditions, vm.Generation, metav1.Condition{Type: banlieuev1.ConditionScheduled, Status: metav1.ConditionTrue,
		Reason: banlieuev1.ReasonScheduled, Message: fmt.Sprintf("scheduled on Provider %s/%s, failure domain %s", next.ProviderNamespace, next.ProviderName, next.FailureDomain)})
	banlieuev1.SetCondition(&status.Conditions, vm.Generation, metav1.Condition{Type: banlieuev1.ConditionPlacementValid, Status: metav1.ConditionTrue,
		Reason: banlieuev1.ReasonReconciled, Message: fmt.Sprintf("%s %s matches the placement", kind.GVK.Kind, vm.Name)})
	mirror(status, kind.view(machine), vm.Generation)
	status.Scheduled = stamped(status.Scheduled, next)
	status.InfrastructureRef = infrastructureRef(kind, vm)
	return convergedRequeue(vm), nil
}

// heldByExport reports whether an export of vm is copying its disk (phase Exporting), which
// holds the VM off.
func (r *virtualMachineReconciler) heldByExport(ctx context.Context, vm *banlieuev1.VirtualMachine) (bool, error) {
	// Filtered here rather than by the cache's index, so that a pass with an uncached client
	// (the API server has no field selector for it) reads the same; a namespace holds few exports.
	var exports banlieuev1.VirtualMachineExportList
	if err := r.client.List(ctx, &exports, client.InNamespace(vm.Namespace)); err != nil {
		return false, fmt.Errorf("listing the VM's VirtualMachineExports: %w", err)
	}
	return exportHolds(vm.Name, exports.Items), nil
}

// exportHolds reports whether one of the exports of the VM named vm holds it off: one in phase
// Exporting.
func exportHolds(vm string, exports []banlieuev1.VirtualMachineExport) bool {
	for i := range exports {
		if exports[i].Spec.VirtualMachineName == vm && exports[i].DeletionTimestamp.IsZero() &&
			exports[i].Status.Phase == banlieuev1.ExportExporting {
			return true
		}
	}
	return false
}

// readInputs reads the VM's class, image, the Providers it may go to (its namespace's and the
// shared ones elsewhere), its namespace's labels and its siblings.
func (r *virtualMachineReconciler) readInputs(ctx context.Context, vm *banlieuev1.VirtualMachine) (vmInputs, error) {
	var in vmInputs
	if err := r.client.Get(ctx, client.ObjectKey{Name: vm.Spec.ClassRef.Name}, &in.class); err != nil {
		return in, fmt.Errorf("getting VMClass %s: %w", vm.Spec.ClassRef.Name, err)
	}
	if err := r.client.Get(ctx, client.ObjectKey{Name: vm.Spec.ImageRef.Name}, &in.image); err != nil {
		return in, fmt.Errorf("getting VMImage %s: %w", vm.Spec.ImageRef.Name, err)
	}
	var providers banlieuev1.ProviderList
	if err := r.client.List(ctx, &providers); err != nil {
		return in, fmt.Errorf("listing Providers: %w", err)
	}
	in.providers = candidateProviders(vm.Namespace, providers.Items)
	var ns corev1.Namespace
	if err := r.client.Get(ctx, client.ObjectKey{Name: vm.Namespace}, &ns); err != nil {
		return in, fmt.Errorf("getting Namespace %s: %w", vm.Namespace, err)
	}
	in.nsLabels = ns.Labels
	// The siblings are only read (withAssumed copies before it changes one), and a pass of each
	// of a namespace's N VMs lists all N: copied, that was O(N²) work for a burst, most of the
	// controller's CPU with 1 000 VMs in one namespace (docs/performance.md, "The fleet bench").
	var siblings banlieuev1.VirtualMachineList
	if err := r.client.List(ctx, &siblings, client.InNamespace(vm.Namespace), client.UnsafeDisableDeepCopy); err != nil {
		return in, fmt.Errorf("listing VirtualMachines: %w", err)
	}
	in.siblings = siblings.Items
	elsewhere, err := r.placedElsewhere(ctx, vm.Namespace, in.providers)
	if err != nil {
		return in, err
	}
	in.elsewhere = elsewhere
	classes, err := r.placedClasses(ctx, in.siblings, elsewhere)
	in.placedClasses = classes
	return in, err
}

// placedElsewhere are the VMs of namespaces other than ns placed on the shared Providers among
// providers. Only a Provider with allowedNamespaces holds other namespaces' VMs, so a namespace
// whose candidates are its own unshared Providers lists nothing more.
func (r *virtualMachineReconciler) placedElsewhere(ctx context.Context, ns string, providers []banlieuev1.Provider) ([]banlieuev1.VirtualMachine, error) {
	shared := map[string]bool{}
	for i := range providers {
		if providers[i].Spec.AllowedNamespaces != nil || providers[i].Namespace != ns {
			shared[providers[i].Namespace+"/"+providers[i].Name] = true
		}
	}
	if len(shared) == 0 {
		return nil, nil
	}
	var all banlieuev1.VirtualMachineList
	if err := r.client.List(ctx, &all, client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("listing the VirtualMachines placed on shared Providers: %w", err)
	}
	var out []banlieuev1.VirtualMachine
	for _, vm := range all.Items {
		if s := vm.Status.Scheduled; vm.Namespace != ns && s != nil && shared[cmp.Or(s.ProviderNamespace, vm.Namespace)+"/"+s.ProviderName] {
			out = append(out, vm)
		}
	}
	return out, nil
}

// placedClasses reads the classes of the placements recorded before placements recorded their
// cpus and memoryMiB, so that the scheduler counts what those VMs take, and of the placements
// not yet provisioned, so that it counts their disks against the datastores' free space.
func (r *virtualMachineReconciler) placedClasses(ctx context.Context, lists ...[]banlieuev1.VirtualMachine) (map[string]*banlieuev1.VMClass, error) {
	var out map[string]*banlieuev1.VMClass
	for _, vms := range lists {
		for i := range vms {
			s := vms[i].Status.Scheduled
			name := vms[i].Spec.ClassRef.Name
			legacy := s != nil && s.CPUs == 0 && s.MemoryMiB == 0
			pending := s != nil && len(s.ResolvedStorage) > 0 && !machineProvisioned(&vms[i].Status)
			if (!legacy && !pending) || out[name] != nil {
				continue
			}
			var c banlieuev1.VMClass
			if err := r.client.Get(ctx, client.ObjectKey{Name: name}, &c); apierrors.IsNotFound(err) {
				continue
			} else if err != nil {
				return nil, fmt.Errorf("getting VMClass %s of a placed VM: %w", name, err)
			}
			if out == nil {
				out = map[string]*banlieuev1.VMClass{}
			}
			out[name] = &c
		}
	}
	return out, nil
}

// confirmFresh returns errStaleRead when a placement would be recorded or changed from a cached
// VM older than the API server's. The cache can lag far behind (after an API server restart the
// informers back off for up to a minute before they watch again), and a copy that missed the
// pass which scheduled the VM would schedule it again: a new scheduledAt or, among several
// failure domains, another placement applied over the existing machine. The applies carry no
// resourceVersion, so nothing else refuses them. A VM whose recorded placement holds skips the
// read.
func (r *virtualMachineReconciler) confirmFresh(ctx context.Context, vm *banlieuev1.VirtualMachine,
	status *banlieuev1.VirtualMachineStatus, next banlieuev1.ScheduledPlacement) error {
	if status.Scheduled != nil && placementDrift(status.Scheduled, next) == "" {
		return nil
	}
	var live banlieuev1.VirtualMachine
	if err := r.apiReader.Get(ctx, client.ObjectKeyFromObject(vm), &live); apierrors.IsNotFound(err) {
		return errStaleRead
	} else if err != nil {
		return fmt.Errorf("reading the VM past the cache: %w", err)
	}
	if live.ResourceVersion != vm.ResourceVersion {
		return errStaleRead
	}
	return nil
}

// applyMachine renders the user-data, builds the VM's machine and applies it, then its
// per-machine user-data Secret (which needs the machine's UID for its owner reference). A
// refusal the user must fix (unreadable, not opted-in or oversized user-data, a machine the
// build or the API server rejects) comes back as refused, with its reason; err is for what a
// retry may cure.
func (r *virtualMachineReconciler) applyMachine(ctx context.Context, kind infraKind, in buildInput) (machine client.Object, refused *refusal, err error) {
	vm := in.VM
	raw, err := readUserData(ctx, r.apiReader, vm)
	if rf := (*refusal)(nil); errors.As(err, &rf) {
		return nil, rf, nil
	} else if err != nil {
		return nil, buildRefusal(err.Error()), nil
	}
	rendered := renderUserData(raw, vm.Name, vm.Spec.NetworkOverrides)
	if n := len(rendered); n > nocloud.MaxPayloadSize {
		// Refused here, before any machine exists: the seed could never carry it.
		return nil, buildRefusal(fmt.Sprintf("invalid spec.userData: the rendered user-data is %d bytes, more than the %d-byte NoCloud seed maximum",
			n, nocloud.MaxPayloadSize)), nil
	}
	if vm.Spec.UserData != nil {
		var rf *refusal
		if in.UserData, rf, err = prepareUserData(ctx, r.apiReader, kind.GVK.Kind, vm.Namespace, vm.Name, rendered); err != nil || rf != nil {
			return nil, rf, err
		}
	}
	machine, err = kind.build(in)
	if rf := (*refusal)(nil); errors.As(err, &rf) {
		return nil, rf, nil
	} else if err != nil {
		return nil, buildRefusal(err.Error()), nil
	}
	key := client.ObjectKeyFromObject(vm)
	config, err := configDigest(machine)
	if err != nil {
		return nil, nil, fmt.Errorf("digesting %s %s/%s: %w", kind.GVK.Kind, vm.Namespace, vm.Name, err)
	}
	if r.applied.unchanged(key, in.Existing, config, banlieuev1.FieldManagerController) {
		machine = in.Existing
	} else {
		if err := ssa.Apply(ctx, r.client, machine, banlieuev1.FieldManagerController); err != nil {
			// The API server refusing the machine (a name too long for domainName, say) is a build
			// failure the user must fix, not a transient error.
			if apierrors.IsInvalid(err) {
				return nil, buildRefusal(err.Error()), nil
			}
			return nil, nil, fmt.Errorf("applying %s %s/%s: %w", kind.GVK.Kind, vm.Namespace, vm.Name, err)
		}
		r.applied.record(key, machine, config, banlieuev1.FieldManagerController)
	}
	switch {
	case in.UserData != nil:
		if err := applyUserDataSecret(ctx, r.client, machine, kind.GVK.GroupVersion().String(), kind.GVK.Kind, in.UserData); err != nil {
			return nil, nil, err
		}
	case in.Existing != nil && kind.userDataSecretOf(in.Existing) != "":
		// The VM's user-data was removed: its copy goes too, rather than wait for the machine.
		if err := deleteUserDataSecret(ctx, r.client, r.apiReader, kind.GVK.Kind, vm.Namespace, vm.Name); err != nil {
			return nil, nil, err
		}
	}
	return machine, nil, nil
}

// buildRefusal is a refusal reported as InfraBuildFailed.
func buildRefusal(msg string) *refusal {
	return &refusal{Reason: banlieuev1.ReasonInfraBuildFailed, Message: msg}
}

// drifted handles a placement that no longer matches the existing machine (docs/guides/libvirt-provider.md, "7. Run a VM").
func (r *virtualMachineReconciler) drifted(ctx context.Context, vm *banlieuev1.VirtualMachine,
	status *banlieuev1.VirtualMachineStatus, kind infraKind, existing client.Object, drift string,
	next banlieuev1.ScheduledPlacement) error {
	policy := vm.Spec.MigrationPolicy
	recreate := recreates(policy)
	approved := recreate || (policy == migrationManual && vm.Annotations[banlieuev1.AnnotationMigrate] == "true")
	if movable(policy) {
		msg := fmt.Sprintf("placement changed (%s): %s %s is on Provider %s, failure domain %s; the scheduler now picks Provider %s, failure domain %s",
			drift, kind.GVK.Kind, vm.Name, status.Scheduled.ProviderName, status.Scheduled.FailureDomain, next.ProviderName, next.FailureDomain)
		if approved {
			msg += "; recreating the machine there from its image (its disk is not carried)"
		} else {
			msg += fmt.Sprintf("; annotate the VM %s=true to recreate it", banlieuev1.AnnotationMigrate)
		}
		banlieuev1.SetCondition(&status.Conditions, vm.Generation, metav1.Condition{Type: banlieuev1.ConditionPlacementValid, Status: metav1.ConditionFalse, Reason: drift, Message: msg})
	}
	if approved && existing.GetDeletionTimestamp().IsZero() {
		if err := r.client.Delete(ctx, existing); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("deleting %s %s/%s for a migration: %w", kind.GVK.Kind, vm.Namespace, vm.Name, err)
		}
	}
	// Under never (or an unset policy) the machine stays where it is and is only mirrored.
	mirror(status, kind.view(existing), vm.Generation)
	return nil
}

// notScheduled records a VM that has no machine to converge: Scheduled=False with reason and
// msg, and Ready=False with readyReason.
func notScheduled(vm *banlieuev1.VirtualMachine, status *banlieuev1.VirtualMachineStatus, reason, msg, readyReason string) {
	banlieuev1.SetCondition(&status.Conditions, vm.Generation, metav1.Condition{Type: banlieuev1.ConditionScheduled, Status: metav1.ConditionFalse, Reason: reason, Message: msg})
	banlieuev1.SetCondition(&status.Conditions, vm.Generation, metav1.Condition{Type: banlieuev1.ConditionReady, Status: metav1.ConditionFalse, Reason: readyReason, Message: msg})
}

// stamped is next with a scheduledAt that only moves when the decision does, so a steady VM's
// status stays byte-identical and its reconciles write nothing.
func stamped(prev *banlieuev1.ScheduledPlacement, next banlieuev1.ScheduledPlacement) *banlieuev1.ScheduledPlacement {
	if prev != nil && prev.ScheduledAt != nil && placementDrift(prev, next) == "" {
		next.ScheduledAt = prev.ScheduledAt
	} else {
		now := metav1.Now()
		next.ScheduledAt = &now
	}
	return &next
}

// writeStatus applies the whole status with its phase, skipping the request when nothing
// changed, and then requeues after requeue; a failed write goes to the error policy instead.
// A written status that moved the Scheduled condition is announced by an event; the write comes
// first, so a failed write is retried without a second event for one transition. That write
// applies only over the status it read (ssa.IfUnchanged): from a cache that lags behind its own
// last write, "before" would lack the condition and announce the same transition twice, so such
// a pass gets a Conflict, which the error policy retries on a fresh read instead.
func (r *virtualMachineReconciler) writeStatus(ctx context.Context, vm *banlieuev1.VirtualMachine,
	status *banlieuev1.VirtualMachineStatus, requeue time.Duration) (ctrl.Result, error) {
	status.Phase = vmPhase(vm, status)
	if !equality.Semantic.DeepEqual(&vm.Status, status) {
		before := vm.Status.Conditions
		var opts []ssa.Option
		if _, moved := app.Transition(before, status.Conditions, banlieuev1.ConditionScheduled); moved {
			opts = append(opts, ssa.IfUnchanged)
		}
		if err := ssa.ApplyStatus(ctx, r.client, vm, status, banlieuev1.FieldManagerController, opts...); err != nil {
			return ctrl.Result{}, client.IgnoreNotFound(err)
		}
		app.EmitTransition(r.recorder, vm, before, status.Conditions, banlieuev1.ConditionScheduled, "Schedule")
		recordTimeToReady(vm, before, status.Conditions)
	}
	return ctrl.Result{RequeueAfter: requeue}, nil
}
