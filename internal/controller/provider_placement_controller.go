package controller

import (
	"cmp"
	"context"
	"fmt"
	"slices"
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
	"banlieue.io/banlieue/internal/ssa"
)

// providerPlacementReconciler writes the controller's part of a Provider's status: what is
// allocated on each failure domain (allocatedOn) and the drain (spec.drain), for which it
// decides with planDrain which VMs move now; the VirtualMachine reconciler reads status.drain
// to place those VMs afresh. It holds no state of its own, so a restart resumes a drain, and it
// writes both in one apply.
type providerPlacementReconciler struct {
	client    client.Client
	recorder  events.EventRecorder
	namespace string
}

// placedOnIndex indexes VirtualMachines by the Provider their placement records
// (namespace/name), so a Provider's pass reads only its own VMs.
const placedOnIndex = "status.scheduled.provider"

func placedOnKey(o client.Object) []string {
	vm, ok := o.(*banlieuev1.VirtualMachine)
	if !ok || vm.Status.Scheduled == nil {
		return nil
	}
	s := vm.Status.Scheduled
	return []string{client.ObjectKey{Namespace: cmp.Or(s.ProviderNamespace, vm.Namespace), Name: s.ProviderName}.String()}
}

func (r *providerPlacementReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var p banlieuev1.Provider
	if err := r.client.Get(ctx, req.NamespacedName, &p); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	var vms banlieuev1.VirtualMachineList
	if err := r.client.List(ctx, &vms, client.InNamespace(r.namespace), client.UnsafeDisableDeepCopy,
		client.MatchingFields{placedOnIndex: req.String()}); err != nil {
		return ctrl.Result{}, fmt.Errorf("status of Provider %s/%s: listing the VirtualMachines placed on it: %w", p.Namespace, p.Name, err)
	}
	var draining []banlieuev1.VirtualMachine
	figuresMissing := false
	for i := range vms.Items {
		vm := &vms.Items[i]
		if !onProvider(vm, &p) {
			continue
		}
		figuresMissing = figuresMissing || vm.Status.Scheduled.CPUs == 0 && vm.Status.Scheduled.MemoryMiB == 0
		if p.Spec.Drain != nil && vm.DeletionTimestamp.IsZero() {
			draining = append(draining, *vm)
		}
	}
	classes := map[string]*banlieuev1.VMClass{}
	if figuresMissing {
		// Placements recorded before their figures were count their class's.
		var list banlieuev1.VMClassList
		if err := r.client.List(ctx, &list); err != nil {
			return ctrl.Result{}, fmt.Errorf("status of Provider %s/%s: listing VMClasses: %w", p.Namespace, p.Name, err)
		}
		for i := range list.Items {
			classes[list.Items[i].Name] = &list.Items[i]
		}
	}
	now := metav1.Now()
	migrations, err := r.drainMigrations(ctx, &p, draining, now)
	if err != nil {
		return ctrl.Result{}, err
	}
	next := planDrain(&p, draining, migrations, now)
	allocated := allocatedOn(&p, vms.Items, classes)
	if !equality.Semantic.DeepEqual(p.Status.Drain, next) || !equality.Semantic.DeepEqual(p.Status.Allocated, allocated) {
		// Only the controller's fields are sent: the rest of the status is the provider's and the operator's.
		if err := ssa.ApplyStatus(ctx, r.client, &p, &banlieuev1.ProviderStatus{Drain: next, Allocated: allocated},
			banlieuev1.FieldManagerController, ssa.IfUnchanged); err != nil {
			return ctrl.Result{}, client.IgnoreNotFound(err)
		}
		r.announce(&p, p.Status.Drain, next)
	}
	if next == nil {
		return ctrl.Result{}, nil
	}
	if err := r.createDrainMigrations(ctx, &p, next, migrations); err != nil {
		return ctrl.Result{}, err
	}
	if d := nextDrainRetry(next, now.Time); d > 0 {
		return ctrl.Result{RequeueAfter: d}, nil
	}
	if next.Phase == banlieuev1.DrainDraining {
		// The moving VMs' own passes wake this one; the requeue only bounds a missed event.
		return ctrl.Result{RequeueAfter: app.RequeueDefault}, nil
	}
	return ctrl.Result{}, nil
}

// announce emits the drain's events for the change from prev to next, after it was written.
func (r *providerPlacementReconciler) announce(p *banlieuev1.Provider, prev, next *banlieuev1.ProviderDrainStatus) {
	if next == nil {
		return
	}
	if prev == nil {
		r.recorder.Eventf(p, nil, corev1.EventTypeNormal, banlieuev1.ReasonDrainStarted, "Drain",
			"drain of Provider %s/%s started: %d VM(s) placed on it", p.Namespace, p.Name, next.Total)
		prev = &banlieuev1.ProviderDrainStatus{}
	}
	for _, v := range next.Moving {
		if !slices.ContainsFunc(prev.Moving, sameVM(v)) {
			r.recorder.Eventf(p, nil, corev1.EventTypeNormal, banlieuev1.ReasonDrainMoving, "Drain",
				"moving VirtualMachine %s/%s to another host (%d of %d left)", v.Namespace, v.Name, next.Remaining, next.Total)
		}
	}
	for _, v := range next.Blocked {
		if !slices.ContainsFunc(prev.Blocked, func(o banlieuev1.DrainVM) bool { return sameVM(v)(o) && o.Reason == v.Reason }) {
			r.recorder.Eventf(p, nil, corev1.EventTypeWarning, banlieuev1.ReasonDrainBlocked, "Drain",
				"VirtualMachine %s/%s cannot move (%s): %s", v.Namespace, v.Name, v.Reason, v.Message)
		}
	}
	if next.Phase == banlieuev1.DrainDrained && prev.Phase != banlieuev1.DrainDrained {
		r.recorder.Eventf(p, nil, corev1.EventTypeNormal, banlieuev1.ReasonDrainCompleted, "Drain",
			"drain of Provider %s/%s completed: %d VM(s) moved away in %s", p.Namespace, p.Name, next.Total,
			time.Since(next.StartedAt.Time).Round(time.Second))
	}
}

func sameVM(v banlieuev1.DrainVM) func(banlieuev1.DrainVM) bool {
	return func(o banlieuev1.DrainVM) bool { return o.Namespace == v.Namespace && o.Name == v.Name }
}

// providerOfVM enqueues the Provider a VM is placed on. An update is mapped for the old and the
// new object both, so the Provider a VM left is told too.
func providerOfVM(_ context.Context, o client.Object) []reconcile.Request {
	vm, ok := o.(*banlieuev1.VirtualMachine)
	if !ok || vm.Status.Scheduled == nil {
		return nil
	}
	s := vm.Status.Scheduled
	return []reconcile.Request{{NamespacedName: client.ObjectKey{Namespace: cmp.Or(s.ProviderNamespace, vm.Namespace), Name: s.ProviderName}}}
}

// drainMigrations reads the VirtualMachineMigration the drain of p created (or will create)
// for each live-movable VM in vms, by drainKey; absent ones are left out.
func (r *providerPlacementReconciler) drainMigrations(ctx context.Context, p *banlieuev1.Provider, vms []banlieuev1.VirtualMachine,
	now metav1.Time) (map[string]*banlieuev1.VirtualMachineMigration, error) {
	out := map[string]*banlieuev1.VirtualMachineMigration{}
	if p.Spec.Drain == nil {
		return out, nil
	}
	startedAt := now
	if p.Status.Drain != nil {
		startedAt = p.Status.Drain.StartedAt
	}
	for i := range vms {
		vm := &vms[i]
		if !liveMigratable(vm.Spec.MigrationPolicy) {
			continue
		}
		var m banlieuev1.VirtualMachineMigration
		key := client.ObjectKey{Namespace: vm.Namespace, Name: drainMigrationName(p, startedAt, vm.Name)}
		switch err := r.client.Get(ctx, key, &m); {
		case apierrors.IsNotFound(err):
		case err != nil:
			return nil, fmt.Errorf("drain of Provider %s/%s: reading VirtualMachineMigration %s: %w", p.Namespace, p.Name, key, err)
		default:
			out[drainKey(vm.Namespace, vm.Name)] = &m
		}
	}
	return out, nil
}

// createDrainMigrations creates the VirtualMachineMigration of each VM next moves live that
// has none yet. The migration has no target: the scheduler chooses one, never the drained
// (cordoned) Provider.
func (r *providerPlacementReconciler) createDrainMigrations(ctx context.Context, p *banlieuev1.Provider, next *banlieuev1.ProviderDrainStatus,
	existing map[string]*banlieuev1.VirtualMachineMigration) error {
	for _, v := range next.Moving {
		if v.Reason != banlieuev1.ReasonDrainMovingLive || existing[drainKey(v.Namespace, v.Name)] != nil {
			continue
		}
		m := &banlieuev1.VirtualMachineMigration{
			ObjectMeta: metav1.ObjectMeta{Namespace: v.Namespace, Name: drainMigrationName(p, next.StartedAt, v.Name),
				Annotations: map[string]string{banlieuev1.AnnotationDrainedProvider: p.Namespace + "/" + p.Name}},
			Spec: banlieuev1.VirtualMachineMigrationSpec{VMName: v.Name},
		}
		if err := r.client.Create(ctx, m); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("drain of Provider %s/%s: creating VirtualMachineMigration %s/%s: %w", p.Namespace, p.Name, m.Namespace, m.Name, err)
		}
		r.recorder.Eventf(p, nil, corev1.EventTypeNormal, banlieuev1.ReasonDrainMoving, "Drain",
			"created VirtualMachineMigration %s/%s to move VirtualMachine %s/%s live", m.Namespace, m.Name, v.Namespace, v.Name)
	}
	return nil
}

// providerOfMigration enqueues the Provider a migration moves its VM away from, so a drain
// sees its migrations end.
func providerOfMigration(_ context.Context, o client.Object) []reconcile.Request {
	m, ok := o.(*banlieuev1.VirtualMachineMigration)
	if !ok || m.Status.Source == nil {
		return nil
	}
	return []reconcile.Request{{NamespacedName: client.ObjectKey{Namespace: m.Status.Source.ProviderNamespace, Name: m.Status.Source.ProviderName}}}
}
