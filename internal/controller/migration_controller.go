package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	infrav1 "banlieue.io/banlieue/api/infrastructure/v1alpha1"
	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
	"banlieue.io/banlieue/internal/app"
	"banlieue.io/banlieue/internal/finalizer"
	"banlieue.io/banlieue/internal/ssa"
)

// migrationVMIndex indexes VirtualMachineMigrations by spec.vmName.
const migrationVMIndex = "spec.vmName"

// fieldManagerMigration owns a LibvirtMachine's spec.migration, apart from the fields the
// VirtualMachine reconciler applies, so neither removes the other's.
const fieldManagerMigration = "banlieue.io/controller-migration"

// migrationReconciler runs the controller's half of a live migration: it decides with
// stepMigration and machineMigration, then writes the machine's spec.migration and the
// migration's status, each at most once a pass.
type migrationReconciler struct {
	client client.Client
	// vms reads a VM's scheduling inputs as the VirtualMachine reconciler does.
	vms *virtualMachineReconciler
}

func (r *migrationReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var m banlieuev1.VirtualMachineMigration
	if err := r.client.Get(ctx, req.NamespacedName, &m); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	deleting := !m.DeletionTimestamp.IsZero()
	if !deleting && !m.Status.Phase.Final() {
		if err := finalizer.Ensure(ctx, r.client, &m, banlieuev1.FinalizerVirtualMachineMigration); err != nil {
			return ctrl.Result{}, err
		}
	}
	in := migrationInput{Migration: &m, Now: metav1.Now()}
	var vm banlieuev1.VirtualMachine
	switch err := r.client.Get(ctx, types.NamespacedName{Namespace: m.Namespace, Name: m.Spec.VMName}, &vm); {
	case err == nil:
		in.VM = &vm
	case !apierrors.IsNotFound(err):
		return ctrl.Result{}, fmt.Errorf("migration %s/%s: reading VirtualMachine %s: %w", m.Namespace, m.Name, m.Spec.VMName, err)
	}
	if in.VM != nil && vm.Status.Scheduled != nil {
		if kind, err := infraKindFor(vm.Status.Scheduled.ProviderClass); err == nil {
			in.MachineKind = kind.GVK.Kind
		}
		var machine infrav1.LibvirtMachine
		switch err := r.client.Get(ctx, client.ObjectKeyFromObject(&vm), &machine); {
		case err == nil:
			in.Machine = &machine
		case !apierrors.IsNotFound(err) && in.MachineKind == "LibvirtMachine":
			return ctrl.Result{}, fmt.Errorf("migration %s/%s: reading LibvirtMachine %s: %w", m.Namespace, m.Name, vm.Name, err)
		}
	}
	if !deleting && (m.Status.Phase == "" || m.Status.Phase == banlieuev1.MigrationPending) {
		if err := r.decideTarget(ctx, &in); err != nil {
			return ctrl.Result{}, err
		}
	}
	// The domain runs on the target alone: the placement and the machine follow it, whatever
	// became of the migration meanwhile (cancelled, deleted).
	if in.Machine != nil && in.VM != nil && handoverDue(&m, in.Machine) {
		if err := r.handover(ctx, in.VM, in.Machine); err != nil {
			return ctrl.Result{}, fmt.Errorf("migration %s/%s: the handover: %w", m.Namespace, m.Name, err)
		}
	}
	next := m.Status
	if !deleting {
		next = stepMigration(in)
	}
	if in.Machine != nil {
		want, keep := machineMigration(&m, &next, in.Machine, deleting)
		if !keep && !equality.Semantic.DeepEqual(want, in.Machine.Spec.Migration) {
			if err := r.requestMove(ctx, in.Machine, want); err != nil {
				return ctrl.Result{}, err
			}
		}
	}
	if deleting {
		_, err := finalizer.Remove(ctx, r.client, &m, banlieuev1.FinalizerVirtualMachineMigration)
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !equality.Semantic.DeepEqual(m.Status, next) {
		if err := ssa.ApplyStatus(ctx, r.client, &m, &next, banlieuev1.FieldManagerController); err != nil {
			return ctrl.Result{}, client.IgnoreNotFound(err)
		}
		recordMigrationEnd(&m, &m.Status, &next)
	}
	if next.Phase.Final() {
		// Nothing holds a final migration: its request is withdrawn above.
		_, err := finalizer.Remove(ctx, r.client, &m, banlieuev1.FinalizerVirtualMachineMigration)
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if d := migrationDeadline(&m, &next); !d.IsZero() {
		return ctrl.Result{RequeueAfter: min(max(time.Until(d), time.Second), app.RequeueDefault)}, nil
	}
	return ctrl.Result{RequeueAfter: app.RequeueDefault}, nil
}

// decideTarget fills in's active migration and, for the active one that passes its checks,
// the scheduler's target.
func (r *migrationReconciler) decideTarget(ctx context.Context, in *migrationInput) error {
	m := in.Migration
	if in.VM == nil {
		return nil
	}
	var siblings banlieuev1.VirtualMachineMigrationList
	if err := r.client.List(ctx, &siblings, client.InNamespace(m.Namespace), client.MatchingFields{migrationVMIndex: m.Spec.VMName}); err != nil {
		return fmt.Errorf("migration %s/%s: listing the migrations of VirtualMachine %s: %w", m.Namespace, m.Name, m.Spec.VMName, err)
	}
	in.Active = activeMigration(siblings.Items)
	if _, reason, _ := migrationRefusal(in.VM, in.MachineKind, in.Machine); reason != "" || in.Active != m.Name || m.Spec.Cancel {
		return nil
	}
	vmIn, err := r.vms.readInputs(ctx, in.VM)
	if err != nil {
		return fmt.Errorf("migration %s/%s: reading the VM's scheduling inputs: %w", m.Namespace, m.Name, err)
	}
	in.Target, in.TargetReason, in.TargetMsg = migrationTarget(scheduleInput{VM: in.VM, Class: &vmIn.class, Image: &vmIn.image,
		Providers: vmIn.providers, NamespaceLabels: vmIn.nsLabels, Siblings: vmIn.siblings, Elsewhere: vmIn.elsewhere,
		Classes: vmIn.placedClasses}, m.Spec.TargetProvider)
	return nil
}

// requestMove sets (want) or removes (nil) the machine's spec.migration with a merge patch of
// that field alone, conditional on the machine's resourceVersion.
func (r *migrationReconciler) requestMove(ctx context.Context, machine *infrav1.LibvirtMachine, want *infrav1.LibvirtMachineMigration) error {
	body, err := json.Marshal(map[string]any{"metadata": map[string]any{"resourceVersion": machine.ResourceVersion},
		"spec": map[string]any{"migration": want}})
	if err != nil {
		return fmt.Errorf("encoding the migration request of LibvirtMachine %s/%s: %w", machine.Namespace, machine.Name, err)
	}
	if err := r.client.Patch(ctx, machine, client.RawPatch(types.MergePatchType, body), client.FieldOwner(fieldManagerMigration)); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("writing spec.migration of LibvirtMachine %s/%s: %w", machine.Namespace, machine.Name, err)
	}
	return nil
}

// migrationsOfVM enqueues the migrations naming a VM (or its machine, of the same name), and
// for a migration those of its VM, so one that waits starts as soon as the active one ends.
func migrationsOfVM(c client.Client) func(context.Context, client.Object) []reconcile.Request {
	return func(ctx context.Context, o client.Object) []reconcile.Request {
		vm := o.GetName()
		if m, ok := o.(*banlieuev1.VirtualMachineMigration); ok {
			vm = m.Spec.VMName
		}
		var list banlieuev1.VirtualMachineMigrationList
		if err := c.List(ctx, &list, client.InNamespace(o.GetNamespace()), client.MatchingFields{migrationVMIndex: vm}); err != nil {
			ctrl.LoggerFrom(ctx).Error(err, "listing VirtualMachineMigrations to requeue")
			return nil
		}
		out := make([]reconcile.Request, 0, len(list.Items))
		for i := range list.Items {
			out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
		}
		return out
	}
}
