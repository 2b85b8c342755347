package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	infrav1 "banlieue.io/banlieue/api/infrastructure/v1alpha1"
	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
	"banlieue.io/banlieue/internal/app"
	"banlieue.io/banlieue/internal/finalizer"
	"banlieue.io/banlieue/internal/ssa"
)

// snapshotVMIndex indexes VirtualMachineSnapshots by spec.vmName.
const snapshotVMIndex = "spec.vmName"

// fieldManagerSnapshot owns a LibvirtMachine's spec.snapshots and spec.restore, apart from the
// fields the VirtualMachine reconciler applies.
const fieldManagerSnapshot = "banlieue.io/controller-snapshot"

// vmOwnerReference makes vm an owner of obj, so the garbage collector deletes obj with the VM;
// it reports whether obj changed.
func vmOwnerReference(obj client.Object, vm *banlieuev1.VirtualMachine) bool {
	refs := obj.GetOwnerReferences()
	if slices.ContainsFunc(refs, func(r metav1.OwnerReference) bool { return r.UID == vm.UID }) {
		return false
	}
	obj.SetOwnerReferences(append(refs, metav1.OwnerReference{APIVersion: banlieuev1.GroupVersion.String(),
		Kind: "VirtualMachine", Name: vm.Name, UID: vm.UID}))
	return true
}

// readVMAndMachine reads the VM named name in ns and, once placed on a libvirt Provider, its
// LibvirtMachine; either is nil when absent. kind is the VM's machine kind, "" when unknown.
func readVMAndMachine(ctx context.Context, c client.Client, ns, name string) (*banlieuev1.VirtualMachine, string, *infrav1.LibvirtMachine, error) {
	var vm banlieuev1.VirtualMachine
	switch err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, &vm); {
	case apierrors.IsNotFound(err):
		return nil, "", nil, nil
	case err != nil:
		return nil, "", nil, fmt.Errorf("reading VirtualMachine %s: %w", name, err)
	}
	if vm.Status.Scheduled == nil {
		return &vm, "", nil, nil
	}
	kind := ""
	if k, err := infraKindFor(vm.Status.Scheduled.ProviderClass); err == nil {
		kind = k.GVK.Kind
	}
	if kind != "LibvirtMachine" {
		return &vm, kind, nil, nil
	}
	var machine infrav1.LibvirtMachine
	switch err := c.Get(ctx, client.ObjectKeyFromObject(&vm), &machine); {
	case apierrors.IsNotFound(err):
		return &vm, kind, nil, nil
	case err != nil:
		return nil, "", nil, fmt.Errorf("reading LibvirtMachine %s: %w", name, err)
	}
	return &vm, kind, &machine, nil
}

// patchMachineSpec sets fields of the machine's spec with a merge patch of those fields alone,
// conditional on the machine's resourceVersion (spec.snapshots is replaced whole).
func patchMachineSpec(ctx context.Context, c client.Client, machine *infrav1.LibvirtMachine, fields map[string]any) error {
	body, err := json.Marshal(map[string]any{"metadata": map[string]any{"resourceVersion": machine.ResourceVersion}, "spec": fields})
	if err != nil {
		return fmt.Errorf("encoding the request to LibvirtMachine %s/%s: %w", machine.Namespace, machine.Name, err)
	}
	if err := c.Patch(ctx, machine, client.RawPatch(types.MergePatchType, body), client.FieldOwner(fieldManagerSnapshot)); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("writing the snapshot request of LibvirtMachine %s/%s: %w", machine.Namespace, machine.Name, err)
	}
	return nil
}

// snapshotReconciler runs the controller's half of a snapshot: it decides with stepSnapshot,
// then writes the machine's spec.snapshots and the snapshot's status, each at most once a pass.
type snapshotReconciler struct {
	client   client.Client
	recorder events.EventRecorder
}

func (r *snapshotReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var s banlieuev1.VirtualMachineSnapshot
	if err := r.client.Get(ctx, req.NamespacedName, &s); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	vm, kind, machine, err := readVMAndMachine(ctx, r.client, s.Namespace, s.Spec.VMName)
	if err != nil {
		return ctrl.Result{}, fmt.Errorf("snapshot %s/%s: %w", s.Namespace, s.Name, err)
	}
	if !s.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, r.release(ctx, &s, machine)
	}
	if err := finalizer.EnsureWith(ctx, r.client, &s, banlieuev1.FinalizerVirtualMachineSnapshot, func() bool {
		return vm != nil && vmOwnerReference(&s, vm)
	}); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	in := snapshotInput{Snapshot: &s, VM: vm, MachineKind: kind, Machine: machine, Now: metav1.Now()}
	if vm != nil {
		var siblings banlieuev1.VirtualMachineSnapshotList
		if err := r.client.List(ctx, &siblings, client.InNamespace(s.Namespace), client.MatchingFields{snapshotVMIndex: vm.Name}); err != nil {
			return ctrl.Result{}, fmt.Errorf("snapshot %s/%s: listing the snapshots of VirtualMachine %s: %w", s.Namespace, s.Name, vm.Name, err)
		}
		in.Siblings = siblings.Items
	}
	next, keep := stepSnapshot(in)
	if machine != nil && machine.DeletionTimestamp.IsZero() {
		if list, changed := machineSnapshots(machine, s.Name, string(s.UID), keep); changed {
			if err := patchMachineSpec(ctx, r.client, machine, map[string]any{"snapshots": list}); err != nil {
				return ctrl.Result{}, err
			}
		}
	}
	if !equality.Semantic.DeepEqual(s.Status, next) {
		if err := ssa.ApplyStatus(ctx, r.client, &s, &next, banlieuev1.FieldManagerController, announced(s.Status.Conditions, next.Conditions)...); err != nil {
			return ctrl.Result{}, client.IgnoreNotFound(err)
		}
		announce(r.recorder, &s, vm, s.Status.Conditions, next.Conditions, next.Phase == banlieuev1.SnapshotFailed, "Snapshot")
	}
	if next.Phase == banlieuev1.SnapshotReady || next.Phase == banlieuev1.SnapshotFailed {
		// Machine changes requeue it through the watch; nothing polls a settled snapshot.
		return ctrl.Result{}, nil
	}
	return ctrl.Result{RequeueAfter: app.RequeueDefault}, nil
}

// release ends a deleted snapshot: its name withdrawn from the machine, then the finalizer
// removed once the provider no longer records it (its layer merged away). A restore of it under
// way holds it; a machine gone or going takes every layer with it.
func (r *snapshotReconciler) release(ctx context.Context, s *banlieuev1.VirtualMachineSnapshot, machine *infrav1.LibvirtMachine) error {
	if machine != nil && machine.DeletionTimestamp.IsZero() {
		if rs := machine.Spec.Restore; rs != nil && rs.SnapshotName == s.Name {
			return nil
		}
		if list, changed := machineSnapshots(machine, s.Name, string(s.UID), false); changed {
			return patchMachineSpec(ctx, r.client, machine, map[string]any{"snapshots": list})
		}
		if snapshotReport(machine, s.Name) != nil {
			return nil // the provider merges the layer; its status update requeues us
		}
	}
	_, err := finalizer.Remove(ctx, r.client, s, banlieuev1.FinalizerVirtualMachineSnapshot)
	return client.IgnoreNotFound(err)
}

// restoreReconciler runs the controller's half of a restore with stepRestore.
type restoreReconciler struct {
	client   client.Client
	recorder events.EventRecorder
}

func (r *restoreReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var rs banlieuev1.VirtualMachineRestore
	if err := r.client.Get(ctx, req.NamespacedName, &rs); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	in := restoreInput{Restore: &rs, Now: metav1.Now()}
	var snap banlieuev1.VirtualMachineSnapshot
	switch err := r.client.Get(ctx, types.NamespacedName{Namespace: rs.Namespace, Name: rs.Spec.SnapshotName}, &snap); {
	case err == nil:
		in.Snapshot = &snap
	case !apierrors.IsNotFound(err):
		return ctrl.Result{}, fmt.Errorf("restore %s/%s: reading VirtualMachineSnapshot %s: %w", rs.Namespace, rs.Name, rs.Spec.SnapshotName, err)
	}
	vmName := rs.Status.VMName
	if in.Snapshot != nil {
		vmName = snap.Spec.VMName
	}
	if vmName != "" {
		vm, _, machine, err := readVMAndMachine(ctx, r.client, rs.Namespace, vmName)
		if err != nil {
			return ctrl.Result{}, fmt.Errorf("restore %s/%s: %w", rs.Namespace, rs.Name, err)
		}
		in.VM, in.Machine = vm, machine
	}
	next, want, mine := stepRestore(in)
	deleting := !rs.DeletionTimestamp.IsZero()
	started := in.Machine != nil && in.Machine.Spec.Restore != nil && in.Machine.Spec.Restore.RestoreName == rs.Name
	if deleting && started && want != nil && rs.Status.Phase == banlieuev1.RestoreInProgress {
		// The provider is between stopping the VM and starting it again: it finishes first.
		return ctrl.Result{RequeueAfter: app.RequeueDefault}, nil
	}
	if deleting {
		want = nil
	}
	if !deleting && !next.Phase.Final() {
		if err := finalizer.EnsureWith(ctx, r.client, &rs, banlieuev1.FinalizerVirtualMachineRestore, func() bool {
			return in.VM != nil && vmOwnerReference(&rs, in.VM)
		}); err != nil {
			return ctrl.Result{}, client.IgnoreNotFound(err)
		}
	}
	if want != nil && !started && rs.Spec.RunStrategy == banlieuev1.RestorePoweredOff && in.VM.Spec.DesiredPowerState != banlieuev1.PoweredOff {
		// The VM is asked to stay off before the provider restores, so it is not started after.
		patch := []byte(`{"spec":{"desiredPowerState":"PoweredOff"}}`)
		if err := r.client.Patch(ctx, in.VM, client.RawPatch(types.MergePatchType, patch), client.FieldOwner(fieldManagerSnapshot)); err != nil {
			return ctrl.Result{}, fmt.Errorf("restore %s/%s: powering VirtualMachine %s off (runStrategy PoweredOff): %w", rs.Namespace, rs.Name, in.VM.Name, err)
		}
		return ctrl.Result{RequeueAfter: app.RequeueDefault}, nil
	}
	if in.Machine != nil && mine && in.Machine.DeletionTimestamp.IsZero() && !equality.Semantic.DeepEqual(want, in.Machine.Spec.Restore) {
		if err := patchMachineSpec(ctx, r.client, in.Machine, map[string]any{"restore": want}); err != nil {
			return ctrl.Result{}, err
		}
	}
	if deleting || next.Phase.Final() {
		if !deleting && !equality.Semantic.DeepEqual(rs.Status, next) {
			if err := ssa.ApplyStatus(ctx, r.client, &rs, &next, banlieuev1.FieldManagerController, announced(rs.Status.Conditions, next.Conditions)...); err != nil {
				return ctrl.Result{}, client.IgnoreNotFound(err)
			}
			announce(r.recorder, &rs, in.VM, rs.Status.Conditions, next.Conditions, next.Phase == banlieuev1.RestoreFailed, "Restore")
		}
		_, err := finalizer.Remove(ctx, r.client, &rs, banlieuev1.FinalizerVirtualMachineRestore)
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !equality.Semantic.DeepEqual(rs.Status, next) {
		if err := ssa.ApplyStatus(ctx, r.client, &rs, &next, banlieuev1.FieldManagerController, announced(rs.Status.Conditions, next.Conditions)...); err != nil {
			return ctrl.Result{}, client.IgnoreNotFound(err)
		}
		announce(r.recorder, &rs, in.VM, rs.Status.Conditions, next.Conditions, false, "Restore")
	}
	return ctrl.Result{RequeueAfter: app.RequeueDefault}, nil
}

// announced are the options of a status write that moves Ready, which announce then reports:
// applied only over the status read (ssa.IfUnchanged), so a pass from a cache lagging behind
// its own last write gets a Conflict and is retried on a fresh read instead of announcing the
// same transition twice.
func announced(before, after []metav1.Condition) []ssa.Option {
	if _, moved := app.Transition(before, after, banlieuev1.ConditionReady); moved {
		return []ssa.Option{ssa.IfUnchanged}
	}
	return nil
}

// announce records one event when Ready's reason changed between before and after, after the
// status carrying it was written: a Warning for a failure, regarding obj, related to its VM.
func announce(rec events.EventRecorder, obj runtime.Object, vm *banlieuev1.VirtualMachine, before, after []metav1.Condition, failed bool, action string) {
	now := meta.FindStatusCondition(after, banlieuev1.ConditionReady)
	if now == nil {
		return
	}
	if _, moved := app.Transition(before, after, banlieuev1.ConditionReady); !moved {
		return
	}
	kind := corev1.EventTypeNormal
	if failed {
		kind = corev1.EventTypeWarning
	}
	var related runtime.Object
	if vm != nil {
		related = vm
	}
	rec.Eventf(obj, related, kind, now.Reason, action, "%s", now.Message)
}

// snapshotsOfVM enqueues the snapshots and restores naming a VM (or its machine, of the same
// name); for a snapshot, its siblings, so one refused by the limit is not retried but a
// deletion frees a place for a Pending one.
func snapshotsOfVM(c client.Client, restores bool) func(context.Context, client.Object) []reconcile.Request {
	return func(ctx context.Context, o client.Object) []reconcile.Request {
		vm := o.GetName()
		if s, ok := o.(*banlieuev1.VirtualMachineSnapshot); ok {
			vm = s.Spec.VMName
		}
		var out []reconcile.Request
		if restores {
			var list banlieuev1.VirtualMachineRestoreList
			if err := c.List(ctx, &list, client.InNamespace(o.GetNamespace())); err != nil {
				ctrl.LoggerFrom(ctx).Error(err, "listing VirtualMachineRestores to requeue")
				return nil
			}
			for i := range list.Items {
				if list.Items[i].Status.VMName == vm || list.Items[i].Spec.SnapshotName == o.GetName() || list.Items[i].Status.VMName == "" {
					out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
				}
			}
			return out
		}
		var list banlieuev1.VirtualMachineSnapshotList
		if err := c.List(ctx, &list, client.InNamespace(o.GetNamespace()), client.MatchingFields{snapshotVMIndex: vm}); err != nil {
			ctrl.LoggerFrom(ctx).Error(err, "listing VirtualMachineSnapshots to requeue")
			return nil
		}
		for i := range list.Items {
			out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
		}
		return out
	}
}

// setupSnapshots registers the snapshot and restore reconcilers.
func setupSnapshots(mgr ctrl.Manager, inScope builder.Predicates, opts Options) error {
	c := mgr.GetClient()
	if err := ctrl.NewControllerManagedBy(mgr).
		Named("virtualmachinesnapshot").
		For(&banlieuev1.VirtualMachineSnapshot{}, inScope).
		Watches(&banlieuev1.VirtualMachine{}, handler.EnqueueRequestsFromMapFunc(snapshotsOfVM(c, false)), inScope).
		Watches(&infrav1.LibvirtMachine{}, handler.EnqueueRequestsFromMapFunc(snapshotsOfVM(c, false)), inScope).
		WithOptions(app.ControllerOptions(opts.Workers)).
		Complete(&snapshotReconciler{client: c, recorder: mgr.GetEventRecorder("banlieue-controller")}); err != nil {
		return fmt.Errorf("creating virtualmachinesnapshot controller: %w", err)
	}
	if err := ctrl.NewControllerManagedBy(mgr).
		Named("virtualmachinerestore").
		For(&banlieuev1.VirtualMachineRestore{}, inScope).
		Watches(&banlieuev1.VirtualMachineSnapshot{}, handler.EnqueueRequestsFromMapFunc(snapshotsOfVM(c, true)), inScope).
		Watches(&infrav1.LibvirtMachine{}, handler.EnqueueRequestsFromMapFunc(snapshotsOfVM(c, true)), inScope).
		WithOptions(app.ControllerOptions(opts.Workers)).
		Complete(&restoreReconciler{client: c, recorder: mgr.GetEventRecorder("banlieue-controller")}); err != nil {
		return fmt.Errorf("creating virtualmachinerestore controller: %w", err)
	}
	return nil
}
