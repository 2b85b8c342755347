package controller

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
	"banlieue.io/banlieue/internal/app"
	"banlieue.io/banlieue/internal/ssa"
	"banlieue.io/banlieue/internal/vmexport/exportjob"
)

// VirtualMachineExports are read, made owned by their VM (a metadata patch) and their status
// written; the controller never creates them (users do).
// +kubebuilder:rbac:groups=banlieue.io,resources=virtualmachineexports,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=banlieue.io,resources=virtualmachineexports/status,verbs=get;update;patch

// exportVMIndex indexes VirtualMachineExports by spec.virtualMachineName.
const exportVMIndex = "spec.virtualMachineName"

// exportReconciler runs an export: made owned by its VM, refused while the VM is missing or not
// stopped, then copied by a Job in the build namespace whose result it reads and writes into
// the export's status, the only writer of it (ADR-0157).
type exportReconciler struct {
	client    client.Client
	apiReader client.Reader
	jobs      ExportJobs
}

// setupExports registers the export controller; in scope as the other controllers.
func setupExports(mgr manager.Manager, opts Options, inScope builder.Predicates) error {
	if err := mgr.GetFieldIndexer().IndexField(context.Background(), &banlieuev1.VirtualMachineExport{}, exportVMIndex,
		func(o client.Object) []string {
			return []string{o.(*banlieuev1.VirtualMachineExport).Spec.VirtualMachineName}
		}); err != nil {
		return fmt.Errorf("indexing VirtualMachineExports by %s: %w", exportVMIndex, err)
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named("virtualmachineexport").
		For(&banlieuev1.VirtualMachineExport{}, inScope).
		Watches(&banlieuev1.VirtualMachine{}, handler.EnqueueRequestsFromMapFunc(exportsOfVM(mgr.GetClient())), inScope).
		WithOptions(app.ControllerOptions(opts.Workers)).
		Complete(&exportReconciler{client: mgr.GetClient(), apiReader: mgr.GetAPIReader(), jobs: opts.Export})
}

func (r *exportReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var e banlieuev1.VirtualMachineExport
	if err := r.client.Get(ctx, req.NamespacedName, &e); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !e.DeletionTimestamp.IsZero() || e.Status.Phase.Final() {
		return ctrl.Result{}, nil
	}
	var vm *banlieuev1.VirtualMachine
	var got banlieuev1.VirtualMachine
	switch err := r.client.Get(ctx, types.NamespacedName{Namespace: e.Namespace, Name: e.Spec.VirtualMachineName}, &got); {
	case err == nil:
		vm = &got
	case !apierrors.IsNotFound(err):
		return ctrl.Result{}, fmt.Errorf("export %s/%s: reading VirtualMachine %s: %w", e.Namespace, e.Name, e.Spec.VirtualMachineName, err)
	}
	if vm != nil && vm.DeletionTimestamp.IsZero() {
		if err := r.ownByVM(ctx, &e, vm); err != nil {
			return ctrl.Result{}, err
		}
	}
	next, requeue, err := r.next(ctx, &e, vm)
	if err != nil {
		return ctrl.Result{}, err
	}
	if !equality.Semantic.DeepEqual(e.Status, next) {
		if err := ssa.ApplyStatus(ctx, r.client, &e, &next, banlieuev1.FieldManagerController); err != nil {
			return ctrl.Result{}, client.IgnoreNotFound(err)
		}
	}
	// A VM's change enqueues its exports; a Job is polled (exportPoll), and the resync is a
	// safety net only.
	return ctrl.Result{RequeueAfter: requeue}, nil
}

// next is the export's next status: from its Job once the Job exists or the export started
// one, else from its VM (stepExport), starting the Job when the VM is stopped and Jobs are
// configured.
func (r *exportReconciler) next(ctx context.Context, e *banlieuev1.VirtualMachineExport, vm *banlieuev1.VirtualMachine) (
	banlieuev1.VirtualMachineExportStatus, time.Duration, error) {
	now := metav1.Now()
	if r.jobs.Image == "" {
		return stepExport(e, vm, now, false), app.RequeueDefault, nil
	}
	job, msg, err := r.readExportJob(ctx, e)
	if err != nil {
		return e.Status, 0, err
	}
	if job != nil || e.Status.JobName != "" {
		return exportJobStatus(e, job, msg, now), exportPoll, nil
	}
	next := stepExport(e, vm, now, true)
	if next.Phase != banlieuev1.ExportPending || vm == nil || vm.Status.Phase != banlieuev1.VMPhaseStopped {
		return next, app.RequeueDefault, nil
	}
	refusal, err := r.startExportJob(ctx, e, vm)
	if err != nil {
		return e.Status, 0, err
	}
	if refusal != "" {
		next.Phase = banlieuev1.ExportFailed
		next.CompletedAt = &now
		banlieuev1.SetCondition(&next.Conditions, e.Generation, metav1.Condition{Type: banlieuev1.ConditionReady,
			Status: metav1.ConditionFalse, Reason: banlieuev1.ReasonExportTargetInvalid, Message: refusal})
		return next, app.RequeueDefault, nil
	}
	// Exporting from here: the VM controller holds the VM off while the phase says so.
	next.Phase, next.JobName, next.StartedAt = banlieuev1.ExportExporting, exportjob.JobName(string(e.UID)), &now
	banlieuev1.SetCondition(&next.Conditions, e.Generation, metav1.Condition{Type: banlieuev1.ConditionReady,
		Status: metav1.ConditionFalse, Reason: banlieuev1.ReasonExporting, Message: fmt.Sprintf(
			"Job %s/%s copies the disk; the VM is held stopped until the export ends", r.jobs.Namespace, next.JobName)})
	return next, exportPoll, nil
}

// ownByVM adds the VM as the export's owner, so deleting the VM deletes its exports (never what
// they published), with a merge patch conditional on the export's resourceVersion.
func (r *exportReconciler) ownByVM(ctx context.Context, e *banlieuev1.VirtualMachineExport, vm *banlieuev1.VirtualMachine) error {
	for _, o := range e.OwnerReferences {
		if o.UID == vm.UID {
			return nil
		}
	}
	patch := client.MergeFromWithOptions(e.DeepCopy(), client.MergeFromWithOptimisticLock{})
	if err := controllerutil.SetOwnerReference(vm, e, r.client.Scheme()); err != nil {
		return fmt.Errorf("export %s/%s: owner reference to VirtualMachine %s: %w", e.Namespace, e.Name, vm.Name, err)
	}
	if err := r.client.Patch(ctx, e, patch); err != nil {
		return fmt.Errorf("export %s/%s: writing its owner reference to VirtualMachine %s: %w", e.Namespace, e.Name, vm.Name, err)
	}
	return nil
}

// stepExport is the export's next status from its VM (nil: none of that name). A missing VM is
// final (the spec cannot change to name another); a VM that is not stopped holds the export
// Pending until it stops.
func stepExport(e *banlieuev1.VirtualMachineExport, vm *banlieuev1.VirtualMachine, now metav1.Time, jobs bool) banlieuev1.VirtualMachineExportStatus {
	st := *e.Status.DeepCopy()
	st.ObservedGeneration = e.Generation
	set := func(phase banlieuev1.ExportPhase, reason, msg string) {
		st.Phase = phase
		banlieuev1.SetCondition(&st.Conditions, e.Generation, metav1.Condition{Type: banlieuev1.ConditionReady,
			Status: metav1.ConditionFalse, Reason: reason, Message: msg})
		if phase.Final() && st.CompletedAt == nil {
			st.CompletedAt = &now
		}
	}
	switch {
	case vm == nil:
		set(banlieuev1.ExportFailed, banlieuev1.ReasonExportTargetInvalid, fmt.Sprintf(
			"spec.virtualMachineName: VirtualMachine %s/%s does not exist", e.Namespace, e.Spec.VirtualMachineName))
	case !vm.DeletionTimestamp.IsZero():
		set(banlieuev1.ExportFailed, banlieuev1.ReasonExportTargetInvalid, fmt.Sprintf(
			"spec.virtualMachineName: VirtualMachine %s is being deleted", vm.Name))
	case vm.Status.Phase != banlieuev1.VMPhaseStopped:
		phase := string(vm.Status.Phase)
		if phase == "" {
			phase = "unknown"
		}
		set(banlieuev1.ExportPending, banlieuev1.ReasonExportVMRunning, fmt.Sprintf(
			"spec.virtualMachineName: VirtualMachine %s is %s, not Stopped: an export copies a stopped disk; "+
				"stop it (desiredPowerState: PoweredOff) and the export goes on", vm.Name, phase))
	case jobs:
		set(banlieuev1.ExportPending, banlieuev1.ReasonExportPending, "the VM is stopped; the Job that copies its disk is being created")
	default:
		set(banlieuev1.ExportPending, banlieuev1.ReasonExportPending,
			"the VM is stopped; export Jobs are not configured (banlieue-controller --export-image): export with banlieue provider libvirt export")
	}
	return st
}

// exportsOfVM enqueues the exports naming a VM.
func exportsOfVM(c client.Client) func(context.Context, client.Object) []reconcile.Request {
	return func(ctx context.Context, o client.Object) []reconcile.Request {
		var list banlieuev1.VirtualMachineExportList
		if err := c.List(ctx, &list, client.InNamespace(o.GetNamespace()), client.MatchingFields{exportVMIndex: o.GetName()}); err != nil {
			ctrl.LoggerFrom(ctx).Error(err, "listing VirtualMachineExports to requeue")
			return nil
		}
		out := make([]reconcile.Request, 0, len(list.Items))
		for i := range list.Items {
			out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
		}
		return out
	}
}

// vmOfExport enqueues the VM an export names.
func vmOfExport(_ context.Context, o client.Object) []reconcile.Request {
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(),
		Name: o.(*banlieuev1.VirtualMachineExport).Spec.VirtualMachineName}}}
}
