package controller

import (
	"context"
	"fmt"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	infrav1 "banlieue.io/banlieue/api/infrastructure/v1alpha1"
	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
)

// FinalizerProviderInUse keeps a Provider while machines reference it: the provider needs the
// Provider's credentials to tear a machine down (docs/decisions.md).
const FinalizerProviderInUse = "banlieue.io/provider-in-use"

// providerRefIndex indexes LibvirtMachines by spec.providerRef.name.
const providerRefIndex = "spec.providerRef.name"

// providerInUseReconciler adds and removes FinalizerProviderInUse.
type providerInUseReconciler struct {
	client client.Client
	// apiReader confirms "no machine left" uncached before the finalizer goes: a machine
	// created a moment ago may not be in the cache yet.
	apiReader client.Reader
}

func (r *providerInUseReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var p banlieuev1.Provider
	if err := r.client.Get(ctx, req.NamespacedName, &p); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	inUse, err := referenced(ctx, r.client, &p, client.MatchingFields{providerRefIndex: p.Name})
	if err != nil {
		return ctrl.Result{}, err
	}
	has := controllerutil.ContainsFinalizer(&p, FinalizerProviderInUse)
	if !inUse && has {
		// The API server cannot select on spec fields, so the uncached check lists the namespace.
		if inUse, err = referenced(ctx, r.apiReader, &p); err != nil {
			return ctrl.Result{}, err
		}
	}
	orig := p.DeepCopy()
	switch {
	case inUse && !has && p.DeletionTimestamp.IsZero():
		// The API server refuses new finalizers on an object being deleted; a machine created
		// that late is the user's race to lose.
		controllerutil.AddFinalizer(&p, FinalizerProviderInUse)
	case !inUse && has:
		controllerutil.RemoveFinalizer(&p, FinalizerProviderInUse)
	default:
		return ctrl.Result{}, nil
	}
	if err := r.client.Patch(ctx, &p, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); err != nil {
		return ctrl.Result{}, fmt.Errorf("updating finalizer %s on Provider %s/%s: %w", FinalizerProviderInUse, p.Namespace, p.Name, err)
	}
	return ctrl.Result{}, nil
}

// referenced reports whether a LibvirtMachine in p's namespace references p.
func referenced(ctx context.Context, reader client.Reader, p *banlieuev1.Provider, opts ...client.ListOption) (bool, error) {
	var machines infrav1.LibvirtMachineList
	if err := reader.List(ctx, &machines, append(opts, client.InNamespace(p.Namespace))...); err != nil {
		return false, fmt.Errorf("listing LibvirtMachines of Provider %s/%s: %w", p.Namespace, p.Name, err)
	}
	for _, m := range machines.Items {
		if m.Spec.ProviderRef.Name == p.Name {
			return true, nil
		}
	}
	return false, nil
}

// providerOfMachine maps a LibvirtMachine to the Provider it references; on an update both the
// old and the new reference are enqueued.
func providerOfMachine(_ context.Context, o client.Object) []reconcile.Request {
	m := o.(*infrav1.LibvirtMachine)
	return []reconcile.Request{{NamespacedName: client.ObjectKey{Namespace: m.Namespace, Name: m.Spec.ProviderRef.Name}}}
}
