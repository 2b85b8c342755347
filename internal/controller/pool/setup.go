package pool

import (
	"context"
	"fmt"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
	"banlieue.io/banlieue/internal/app"
)

// Requeue intervals: default and long (docs/operations.md, "Requeue intervals"; errors: app.ErrorRateLimiter), and the
// claim's own short ones (docs/guides/virtualmachine-pools.md).
const (
	claimConflictRequeue = time.Second
	claimWaitRequeue     = 3 * time.Second
)

const (
	poolImageRefIndex = "spec.template.spec.imageRef.name"
	// One claim at a time per process; competing processes are still safe (optimistic locks).
	claimConcurrentReconciles = 1
)

// Options configure the pool and claim controllers.
type Options struct {
	// Namespace limits pools, claims and members to one namespace; empty means every namespace.
	Namespace string
	// Workers is how many pools are reconciled at once (--workers); zero means one. Claims are
	// always reconciled one at a time (claimConcurrentReconciles).
	Workers int
}

// Setup registers the VirtualMachinePool and VirtualMachineClaim controllers with mgr.
func Setup(mgr manager.Manager, opts Options) error {
	if err := setupPool(mgr, opts); err != nil {
		return err
	}
	return setupClaim(mgr, opts, claimConcurrentReconciles)
}

func setupPool(mgr manager.Manager, opts Options) error {
	// A VMImage's revision changing must recycle its pools now, not at the next long resync.
	if err := mgr.GetFieldIndexer().IndexField(context.Background(), &banlieuev1.VirtualMachinePool{}, poolImageRefIndex,
		func(o client.Object) []string {
			return []string{o.(*banlieuev1.VirtualMachinePool).Spec.Template.Spec.ImageRef.Name}
		}); err != nil {
		return fmt.Errorf("indexing VirtualMachinePool by %s: %w", poolImageRefIndex, err)
	}
	pools := func(ctx context.Context, image client.Object) []reconcile.Request {
		var list banlieuev1.VirtualMachinePoolList
		if err := mgr.GetClient().List(ctx, &list, client.InNamespace(opts.Namespace),
			client.MatchingFields{poolImageRefIndex: image.GetName()}); err != nil {
			ctrl.LoggerFrom(ctx).Error(err, "listing VirtualMachinePools to requeue")
			return nil
		}
		reqs := make([]reconcile.Request, 0, len(list.Items))
		for i := range list.Items {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
		}
		return reqs
	}
	err := ctrl.NewControllerManagedBy(mgr).
		Named("virtualmachinepool").
		// Only spec changes: the pool's own status writes must not wake it up again.
		For(&banlieuev1.VirtualMachinePool{}, inScope(opts), builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		// By label rather than owner: a claimed member is owned by its claim, yet its release
		// still frees room in the pool.
		Watches(&banlieuev1.VirtualMachine{}, handler.EnqueueRequestsFromMapFunc(poolOfMember), inScope(opts)).
		Watches(&banlieuev1.VMImage{}, handler.EnqueueRequestsFromMapFunc(pools)).
		WithOptions(app.ControllerOptions(opts.Workers)).
		Complete(&poolReconciler{client: mgr.GetClient(), apiReader: mgr.GetAPIReader()})
	if err != nil {
		return fmt.Errorf("creating virtualmachinepool controller: %w", err)
	}
	return nil
}

func poolOfMember(_ context.Context, vm client.Object) []reconcile.Request {
	name := vm.GetLabels()[banlieuev1.LabelPool]
	if name == "" {
		return nil
	}
	return []reconcile.Request{{NamespacedName: client.ObjectKey{Namespace: vm.GetNamespace(), Name: name}}}
}

// setupClaim is separate from Setup so a test can run a second, competing claim controller.
func setupClaim(mgr manager.Manager, opts Options, concurrency int) error {
	err := ctrl.NewControllerManagedBy(mgr).
		Named("virtualmachineclaim").
		For(&banlieuev1.VirtualMachineClaim{}, inScope(opts)).
		// A bound member is controlled by its claim, so losing it wakes the claim at once.
		Owns(&banlieuev1.VirtualMachine{}, inScope(opts)).
		WithOptions(app.ControllerOptions(concurrency)).
		Complete(&claimReconciler{client: mgr.GetClient(), apiReader: mgr.GetAPIReader()})
	if err != nil {
		return fmt.Errorf("creating virtualmachineclaim controller: %w", err)
	}
	return nil
}

func inScope(opts Options) builder.Predicates {
	return builder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool {
		return opts.Namespace == "" || o.GetNamespace() == opts.Namespace
	}))
}
