package controller

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
	"banlieue.io/banlieue/internal/finalizer"
)

// providerRefIndex indexes every infrastructure machine kind by the Provider it references, as
// namespace/name: a machine may reference a Provider shared from another namespace.
const providerRefIndex = "spec.providerRef"

// providerInUseReconciler adds and removes banlieuev1.FinalizerProviderInUse.
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
	// Only read, so the cache's machines are not copied: a Provider with a thousand machines
	// would otherwise copy them all on every pass.
	inUse, err := referenced(ctx, r.client, &p, client.MatchingFields{providerRefIndex: client.ObjectKeyFromObject(&p).String()},
		client.UnsafeDisableDeepCopy)
	if err != nil {
		return ctrl.Result{}, err
	}
	has := controllerutil.ContainsFinalizer(&p, banlieuev1.FinalizerProviderInUse)
	if !inUse && has {
		// The API server cannot select on spec fields, so the uncached check lists every
		// namespace: a shared Provider's machines live in the namespaces it admits.
		if inUse, err = referenced(ctx, r.apiReader, &p); err != nil {
			return ctrl.Result{}, err
		}
	}
	switch {
	case inUse && !has && p.DeletionTimestamp.IsZero():
		// The API server refuses new finalizers on an object being deleted; a machine created
		// that late is the user's race to lose.
		err = finalizer.Ensure(ctx, r.client, &p, banlieuev1.FinalizerProviderInUse)
	case !inUse && has:
		_, err = finalizer.Remove(ctx, r.client, &p, banlieuev1.FinalizerProviderInUse)
	}
	if err != nil {
		return ctrl.Result{}, fmt.Errorf("provider %s/%s: %w", p.Namespace, p.Name, err)
	}
	return ctrl.Result{}, nil
}

// referenced reports whether a machine of any infrastructure kind, in any namespace, references p.
func referenced(ctx context.Context, reader client.Reader, p *banlieuev1.Provider, opts ...client.ListOption) (bool, error) {
	key := client.ObjectKeyFromObject(p)
	for _, k := range allInfraKinds() {
		list := k.newList()
		if err := reader.List(ctx, list, opts...); err != nil {
			return false, fmt.Errorf("listing %ss of Provider %s/%s: %w", k.GVK.Kind, p.Namespace, p.Name, err)
		}
		machines, err := meta.ExtractList(list)
		if err != nil {
			return false, fmt.Errorf("reading the %s list: %w", k.GVK.Kind, err)
		}
		for _, m := range machines {
			if k.providerOf(m.(client.Object)) == key {
				return true, nil
			}
		}
	}
	return false, nil
}

// providerRefChanged passes the machine events that can change whether a Provider is in use: a
// machine created or deleted, or moved to another Provider (a Cluster API machine placed after
// its creation). Any other update (a status write, a finalizer) leaves the answer as it was, and
// would make a machine wake its Provider several times on its way to realised.
func providerRefChanged(k infraKind) predicate.Funcs {
	return predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		return k.providerOf(e.ObjectOld) != k.providerOf(e.ObjectNew)
	}}
}

// providerOfMachine maps a machine of kind k to the Provider it references; on an update both
// the old and the new reference are enqueued.
func providerOfMachine(k infraKind) handler.MapFunc {
	return func(_ context.Context, o client.Object) []reconcile.Request {
		return []reconcile.Request{{NamespacedName: k.providerOf(o)}}
	}
}
