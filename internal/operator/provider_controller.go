package operator

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
)

// Finalizer holds a Provider until its workload, including the never-owned ClusterRoleBinding,
// is gone.
const Finalizer = "banlieue.io/provider-workload"

// Event reasons on the Provider (the troubleshooting tables of docs/guides).
const (
	ReasonWorkloadApplied       = "WorkloadApplied"
	ReasonWorkloadPruned        = "WorkloadPruned"
	ReasonWorkloadDeleted       = "WorkloadDeleted"
	ReasonReconcileSkipped      = "ReconcileSkipped"
	ReasonProviderClassNotFound = "ProviderClassNotFound"
)

// providerReconciler turns a Provider into its workload (docs/guides/libvirt-provider.md, "5. What the operator creates for it").
type providerReconciler struct {
	client client.Client
	// apiReader lists workload objects by label in every namespace without caching every
	// ServiceAccount and RBAC object of the cluster.
	apiReader client.Reader
	recorder  events.EventRecorder
	opts      Options
}

func (r *providerReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var p banlieuev1.Provider
	if err := r.client.Get(ctx, req.NamespacedName, &p); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !p.DeletionTimestamp.IsZero() {
		if controllerutil.ContainsFinalizer(&p, providerInUseFinalizer) {
			// Machines still reference this Provider, and only its workload can tear their
			// domains down: keep the workload running until they are gone.
			return ctrl.Result{RequeueAfter: requeueDefault}, nil
		}
		return ctrl.Result{}, r.cleanup(ctx, &p)
	}
	if err := r.ensureFinalizer(ctx, &p); err != nil {
		return ctrl.Result{}, err
	}

	var class banlieuev1.ProviderClass
	if err := r.client.Get(ctx, client.ObjectKey{Name: p.Spec.ProviderClassRef.Name}, &class); err != nil {
		if !apierrors.IsNotFound(err) {
			return ctrl.Result{}, err
		}
		r.recorder.Eventf(&p, nil, corev1.EventTypeWarning, ReasonProviderClassNotFound, "Reconcile",
			"ProviderClass %q not found", p.Spec.ProviderClassRef.Name)
		return ctrl.Result{RequeueAfter: requeueDefault}, nil
	}
	if paused := pausedObject(&p, &class); paused != "" {
		r.recorder.Eventf(&p, nil, corev1.EventTypeNormal, ReasonReconcileSkipped, "Reconcile", "%s is paused", paused)
		return ctrl.Result{RequeueAfter: requeueDefault}, nil
	}

	w := desiredWorkload(&p, &class, r.opts)
	for _, obj := range w.objects() {
		if err := r.client.Apply(ctx, obj, client.FieldOwner(FieldManager), client.ForceOwnership); err != nil {
			return ctrl.Result{}, fmt.Errorf("applying %s %s: %w", *obj.GetKind(), *obj.GetName(), err)
		}
	}
	if err := r.prune(ctx, &p, keepSet(w)); err != nil {
		return ctrl.Result{}, err
	}
	r.recorder.Eventf(&p, nil, corev1.EventTypeNormal, ReasonWorkloadApplied, "Reconcile",
		"workload %s applied in namespace %s", *w.deployment.GetName(), *w.deployment.GetNamespace())
	if err := r.applyWorkloadStatus(ctx, &p, w); err != nil {
		return ctrl.Result{}, err
	}
	return ctrl.Result{RequeueAfter: requeueDefault}, nil
}

// pausedObject names the paused object, Provider first, or returns "".
func pausedObject(p *banlieuev1.Provider, class *banlieuev1.ProviderClass) string {
	switch {
	case p.Spec.Paused:
		return fmt.Sprintf("Provider %s/%s", p.Namespace, p.Name)
	case class.Spec.Paused:
		return fmt.Sprintf("ProviderClass %s", class.Name)
	}
	return ""
}

// ensureFinalizer adds the finalizer with an optimistic lock, so a concurrent writer of other
// finalizers (the provider's banlieue.io/provider-in-use) is never overwritten.
func (r *providerReconciler) ensureFinalizer(ctx context.Context, p *banlieuev1.Provider) error {
	if controllerutil.ContainsFinalizer(p, Finalizer) {
		return nil
	}
	patch := client.MergeFromWithOptions(p.DeepCopy(), client.MergeFromWithOptimisticLock{})
	controllerutil.AddFinalizer(p, Finalizer)
	if err := r.client.Patch(ctx, p, patch); err != nil {
		return fmt.Errorf("adding finalizer: %w", err)
	}
	return nil
}

// cleanup deletes the workload of a Provider being deleted, then releases it.
// providerInUseFinalizer is held by banlieue-controller while LibvirtMachines reference the
// Provider (the name is the API contract; the operator does not import the controller).
const providerInUseFinalizer = "banlieue.io/provider-in-use"

func (r *providerReconciler) cleanup(ctx context.Context, p *banlieuev1.Provider) error {
	if !controllerutil.ContainsFinalizer(p, Finalizer) {
		return nil
	}
	if _, err := r.deleteWorkload(ctx, p, nil); err != nil {
		return err
	}
	r.recorder.Eventf(p, nil, corev1.EventTypeNormal, ReasonWorkloadDeleted, "Delete", "workload deleted")
	patch := client.MergeFromWithOptions(p.DeepCopy(), client.MergeFromWithOptimisticLock{})
	controllerutil.RemoveFinalizer(p, Finalizer)
	if err := r.client.Patch(ctx, p, patch); err != nil {
		return fmt.Errorf("removing finalizer: %w", err)
	}
	return nil
}

// providersOfClass maps a ProviderClass to every Provider that references it.
func (r *providerReconciler) providersOfClass(ctx context.Context, o client.Object) []reconcile.Request {
	var list banlieuev1.ProviderList
	if err := r.client.List(ctx, &list, client.MatchingFields{classRefIndex: o.GetName()}); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "listing providers of class", "class", o.GetName())
		return nil
	}
	reqs := make([]reconcile.Request, 0, len(list.Items))
	for _, p := range list.Items {
		reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&p)})
	}
	return reqs
}
