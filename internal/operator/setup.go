package operator

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	infrav1 "banlieue.io/banlieue/api/infrastructure/v1alpha1"
	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
	"banlieue.io/banlieue/internal/app"
)

// classRefIndex indexes Providers by spec.providerClassRef.name so a class maps to its Providers
// from the cache.
const classRefIndex = "spec.providerClassRef.name"

// Setup registers the Provider and ProviderClass controllers with mgr. The manager's cache
// should be built from CacheOptions(opts).
func Setup(mgr manager.Manager, opts Options) error {
	opts = opts.withDefaults()
	ctx := context.Background()
	if err := mgr.GetFieldIndexer().IndexField(ctx, &banlieuev1.Provider{}, classRefIndex, func(o client.Object) []string {
		return []string{o.(*banlieuev1.Provider).Spec.ProviderClassRef.Name}
	}); err != nil {
		return fmt.Errorf("indexing providers by class: %w", err)
	}
	if err := mgr.GetFieldIndexer().IndexField(ctx, &infrav1.LibvirtMachine{}, machineProviderIndex, machineProviderKey); err != nil {
		return fmt.Errorf("indexing libvirt machines by provider: %w", err)
	}
	if err := mgr.GetFieldIndexer().IndexField(ctx, &infrav1.VSphereMachine{}, machineProviderIndex, vsphereMachineProviderKey); err != nil {
		return fmt.Errorf("indexing vsphere machines by provider: %w", err)
	}
	recorder := mgr.GetEventRecorder("banlieue-operator")

	providers := &providerReconciler{client: mgr.GetClient(), apiReader: mgr.GetAPIReader(), recorder: recorder, opts: opts}
	if err := ctrl.NewControllerManagedBy(mgr).
		Named("operator-provider").
		For(&banlieuev1.Provider{}, builder.WithPredicates(predicate.Or[client.Object](
			// Provider status changes every probe; only spec edits and deletion matter here.
			predicate.GenerationChangedPredicate{},
			predicate.NewPredicateFuncs(func(o client.Object) bool { return !o.GetDeletionTimestamp().IsZero() }),
		))).
		// Deployments are mapped by label rather than owned: in a class's workloadNamespace they
		// carry no owner reference.
		Watches(&appsv1.Deployment{}, handler.EnqueueRequestsFromMapFunc(providerOfWorkload)).
		Watches(&banlieuev1.ProviderClass{}, handler.EnqueueRequestsFromMapFunc(providers.providersOfClass)).
		// A machine that gains or loses user-data changes its Provider's grants (machineUserDataGrants).
		Watches(&infrav1.LibvirtMachine{}, handler.EnqueueRequestsFromMapFunc(providerOfMachine), builder.WithPredicates(userDataRefChanged)).
		Watches(&infrav1.VSphereMachine{}, handler.EnqueueRequestsFromMapFunc(providerOfVSphereMachine), builder.WithPredicates(vsphereUserDataRefChanged)).
		WithOptions(app.ControllerOptions(opts.Workers)).
		Complete(providers); err != nil {
		return fmt.Errorf("creating provider controller: %w", err)
	}

	classes := &providerClassReconciler{client: mgr.GetClient()}
	if err := ctrl.NewControllerManagedBy(mgr).
		Named("operator-providerclass").
		For(&banlieuev1.ProviderClass{}).
		// Only the ClusterRole's existence matters, so its rules are not cached.
		Watches(&rbacv1.ClusterRole{}, handler.EnqueueRequestsFromMapFunc(classes.classesOfClusterRole), builder.OnlyMetadata).
		Watches(&banlieuev1.Provider{}, handler.EnqueueRequestsFromMapFunc(classOfProvider)).
		WithOptions(app.ControllerOptions(opts.Workers)).
		Complete(classes); err != nil {
		return fmt.Errorf("creating providerclass controller: %w", err)
	}
	return nil
}

// providerOfWorkload maps a workload object to its Provider (workloadOwner).
func providerOfWorkload(_ context.Context, o client.Object) []reconcile.Request {
	key, ok := workloadOwner(o)
	if !ok {
		return nil
	}
	return []reconcile.Request{{NamespacedName: key}}
}

// classOfProvider maps a Provider to its class; on an update both the old and the new class are
// enqueued, so both counts move.
func classOfProvider(_ context.Context, o client.Object) []reconcile.Request {
	return []reconcile.Request{{NamespacedName: client.ObjectKey{Name: o.(*banlieuev1.Provider).Spec.ProviderClassRef.Name}}}
}
