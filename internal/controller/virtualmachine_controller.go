package controller

import (
	"context"
	"errors"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
	"banlieue.io/banlieue/internal/app"
	"banlieue.io/banlieue/internal/finalizer"
	"banlieue.io/banlieue/internal/ssa"
	"banlieue.io/banlieue/pkg/nocloud"
)

// Migration policies.
const (
	migrationAutomatic = "automatic"
	migrationManual    = "manual"
)

// virtualMachineReconciler turns a VirtualMachine into its backend's machine (docs/guides/libvirt-provider.md, "7. Run a VM").
type virtualMachineReconciler struct {
	client client.Client
	// apiReader reads what must not come from the cache: userData sources (get-only RBAC) and
	// the machines deletion waits for (a stale "absent" would drop the finalizer too early).
	apiReader client.Reader
}

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
		return ctrl.Result{RequeueAfter: app.RequeueLong}, nil
	}
	if err := finalizer.Ensure(ctx, r.client, &vm, banlieuev1.FinalizerVirtualMachine); err != nil {
		return ctrl.Result{}, err
	}

	var class banlieuev1.VMClass
	if err := r.client.Get(ctx, client.ObjectKey{Name: vm.Spec.ClassRef.Name}, &class); err != nil {
		return ctrl.Result{}, fmt.Errorf("getting VMClass %s: %w", vm.Spec.ClassRef.Name, err)
	}
	var image banlieuev1.VMImage
	if err := r.client.Get(ctx, client.ObjectKey{Name: vm.Spec.ImageRef.Name}, &image); err != nil {
		return ctrl.Result{}, fmt.Errorf("getting VMImage %s: %w", vm.Spec.ImageRef.Name, err)
	}
	var providers banlieuev1.ProviderList
	if err := r.client.List(ctx, &providers, client.InNamespace(vm.Namespace)); err != nil {
		return ctrl.Result{}, err
	}
	var siblings banlieuev1.VirtualMachineList
	if err := r.client.List(ctx, &siblings, client.InNamespace(vm.Namespace)); err != nil {
		return ctrl.Result{}, err
	}

	status := vm.Status.DeepCopy()
	status.ObservedGeneration = vm.Generation
	if msg := imageClassMismatch(&class, &image); msg != "" {
		// Scheduled is left alone: the pairing is wrong whatever the placement.
		banlieuev1.SetCondition(&status.Conditions, vm.Generation, metav1.Condition{Type: banlieuev1.ConditionReady, Status: metav1.ConditionFalse,
			Reason: banlieuev1.ReasonImageClassMismatch, Message: msg})
		return r.writeStatus(ctx, &vm, status, app.RequeueLong)
	}

	d, err := schedule(scheduleInput{VM: &vm, Class: &class, Image: &image, Providers: providers.Items, Siblings: siblings.Items})
	if err != nil {
		var se *scheduleError
		if !errors.As(err, &se) {
			return ctrl.Result{}, err
		}
		return r.notScheduled(ctx, &vm, status, se.Reason, se.Message, banlieuev1.ReasonScheduling, app.RequeueDefault)
	}
	kind, err := infraKindFor(d.Provider.Spec.ProviderClassRef.Name)
	if err != nil {
		return r.notScheduled(ctx, &vm, status, banlieuev1.ReasonInfraBuildFailed, err.Error(), banlieuev1.ReasonInfraBuildFailed, app.RequeueLong)
	}

	next := d.placement()
	// A placement is recorded or changed only from the VM as the API server has it. The cache can
	// lag far behind (after an API server restart the informers back off for up to a minute
	// before they watch again), and a copy that missed the pass which scheduled the VM would
	// schedule it again: a new scheduledAt or, among several failure domains, another placement
	// applied over the existing machine. The applies carry no resourceVersion, so nothing else
	// refuses them. A VM whose recorded placement holds skips the read.
	if status.Scheduled == nil || placementDrift(status.Scheduled, next) != "" {
		var live banlieuev1.VirtualMachine
		if err := r.apiReader.Get(ctx, req.NamespacedName, &live); err != nil {
			return ctrl.Result{}, client.IgnoreNotFound(err)
		}
		if live.ResourceVersion != vm.ResourceVersion {
			// The watch brings the newer version, and with it another pass.
			return ctrl.Result{RequeueAfter: app.ErrorRetry}, nil
		}
	}
	existing := kind.newObject()
	exists := true
	if err := r.client.Get(ctx, client.ObjectKeyFromObject(&vm), existing); apierrors.IsNotFound(err) {
		exists = false
	} else if err != nil {
		return ctrl.Result{}, err
	}
	// Drift only matters while a machine realises the old placement; once it is gone (deleted
	// by a migration or by hand) the new decision is simply applied.
	if drift := placementDrift(status.Scheduled, next); drift != "" && exists {
		return r.drifted(ctx, &vm, status, kind, existing, drift, next)
	}

	raw, err := readUserData(ctx, r.apiReader, &vm)
	if err != nil {
		return r.notScheduled(ctx, &vm, status, banlieuev1.ReasonInfraBuildFailed, err.Error(), banlieuev1.ReasonInfraBuildFailed, app.ErrorRetry)
	}
	userData := renderUserData(raw, vm.Name, vm.Spec.NetworkOverrides)
	if n := len(userData); n > nocloud.MaxPayloadSize {
		// Refused here, before any machine exists: the seed could never carry it.
		return r.notScheduled(ctx, &vm, status, banlieuev1.ReasonInfraBuildFailed,
			fmt.Sprintf("invalid spec.userData: the rendered user-data is %d bytes, more than the %d-byte NoCloud seed maximum",
				n, nocloud.MaxPayloadSize), banlieuev1.ReasonInfraBuildFailed, app.ErrorRetry)
	}
	in := buildInput{VM: &vm, Class: &class, Image: &image, Decision: d, UserData: userData}
	if exists {
		in.Existing = existing
	}
	machine, err := kind.build(in)
	if err != nil {
		return r.notScheduled(ctx, &vm, status, banlieuev1.ReasonInfraBuildFailed, err.Error(), banlieuev1.ReasonInfraBuildFailed, app.ErrorRetry)
	}
	if err := ssa.Apply(ctx, r.client, machine, banlieuev1.FieldManagerController); err != nil {
		// The API server refusing the machine (a name too long for domainName, say) is a build
		// failure the user must fix, not a transient error.
		if apierrors.IsInvalid(err) {
			return r.notScheduled(ctx, &vm, status, banlieuev1.ReasonInfraBuildFailed, err.Error(), banlieuev1.ReasonInfraBuildFailed, app.ErrorRetry)
		}
		return ctrl.Result{}, fmt.Errorf("applying %s %s/%s: %w", kind.GVK.Kind, vm.Namespace, vm.Name, err)
	}

	banlieuev1.SetCondition(&status.Conditions, vm.Generation, metav1.Condition{Type: banlieuev1.ConditionScheduled, Status: metav1.ConditionTrue,
		Reason: banlieuev1.ReasonScheduled, Message: fmt.Sprintf("scheduled on Provider %s, failure domain %s", next.ProviderName, next.FailureDomain)})
	banlieuev1.SetCondition(&status.Conditions, vm.Generation, metav1.Condition{Type: banlieuev1.ConditionPlacementValid, Status: metav1.ConditionTrue,
		Reason: banlieuev1.ReasonReconciled, Message: fmt.Sprintf("%s %s matches the placement", kind.GVK.Kind, vm.Name)})
	mirror(status, kind.view(machine), vm.Generation)
	status.Scheduled = stamped(status.Scheduled, next)
	status.InfrastructureRef = infrastructureRef(kind, &vm)
	return r.writeStatus(ctx, &vm, status, app.RequeueDefault)
}

// drifted handles a placement that no longer matches the existing machine (docs/guides/libvirt-provider.md, "7. Run a VM").
func (r *virtualMachineReconciler) drifted(ctx context.Context, vm *banlieuev1.VirtualMachine,
	status *banlieuev1.VirtualMachineStatus, kind infraKind, existing client.Object, drift string,
	next banlieuev1.ScheduledPlacement) (ctrl.Result, error) {
	policy := vm.Spec.MigrationPolicy
	approved := policy == migrationAutomatic || (policy == migrationManual && vm.Annotations[banlieuev1.AnnotationMigrate] == "true")
	if policy == migrationAutomatic || policy == migrationManual {
		msg := fmt.Sprintf("placement changed (%s): %s %s is on Provider %s, failure domain %s; the scheduler now picks Provider %s, failure domain %s",
			drift, kind.GVK.Kind, vm.Name, status.Scheduled.ProviderName, status.Scheduled.FailureDomain, next.ProviderName, next.FailureDomain)
		if approved {
			msg += "; recreating the machine"
		} else {
			msg += fmt.Sprintf("; annotate the VM %s=true to recreate it", banlieuev1.AnnotationMigrate)
		}
		banlieuev1.SetCondition(&status.Conditions, vm.Generation, metav1.Condition{Type: banlieuev1.ConditionPlacementValid, Status: metav1.ConditionFalse, Reason: drift, Message: msg})
	}
	if approved && existing.GetDeletionTimestamp().IsZero() {
		if err := r.client.Delete(ctx, existing); client.IgnoreNotFound(err) != nil {
			return ctrl.Result{}, err
		}
	}
	// Under never (or an unset policy) the machine stays where it is and is only mirrored.
	mirror(status, kind.view(existing), vm.Generation)
	return r.writeStatus(ctx, vm, status, app.RequeueDefault)
}

// notScheduled records a VM that has no machine to converge: Scheduled=False with reason and
// msg, and Ready=False with readyReason.
func (r *virtualMachineReconciler) notScheduled(ctx context.Context, vm *banlieuev1.VirtualMachine,
	status *banlieuev1.VirtualMachineStatus, reason, msg, readyReason string, requeue time.Duration) (ctrl.Result, error) {
	banlieuev1.SetCondition(&status.Conditions, vm.Generation, metav1.Condition{Type: banlieuev1.ConditionScheduled, Status: metav1.ConditionFalse, Reason: reason, Message: msg})
	banlieuev1.SetCondition(&status.Conditions, vm.Generation, metav1.Condition{Type: banlieuev1.ConditionReady, Status: metav1.ConditionFalse, Reason: readyReason, Message: msg})
	return r.writeStatus(ctx, vm, status, requeue)
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

// writeStatus applies the whole status, skipping the request when nothing changed, and then
// requeues after requeue; a failed write goes to the error policy instead.
func (r *virtualMachineReconciler) writeStatus(ctx context.Context, vm *banlieuev1.VirtualMachine,
	status *banlieuev1.VirtualMachineStatus, requeue time.Duration) (ctrl.Result, error) {
	if !equality.Semantic.DeepEqual(&vm.Status, status) {
		if err := ssa.ApplyStatus(ctx, r.client, vm, status, banlieuev1.FieldManagerController); err != nil {
			return ctrl.Result{}, client.IgnoreNotFound(err)
		}
	}
	return ctrl.Result{RequeueAfter: requeue}, nil
}
