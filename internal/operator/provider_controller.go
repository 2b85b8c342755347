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
	"banlieue.io/banlieue/internal/app"
	"banlieue.io/banlieue/internal/finalizer"
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
		if controllerutil.ContainsFinalizer(&p, banlieuev1.FinalizerProviderInUse) {
			// Machines still reference this Provider, and only its workload can tear their
			// domains down: keep the workload running until they are gone.
			return ctrl.Result{RequeueAfter: app.RequeueDefault}, nil
		}
		return ctrl.Result{}, r.cleanup(ctx, &p)
	}
	if err := finalizer.Ensure(ctx, r.client, &p, banlieuev1.FinalizerProviderWorkload); err != nil {
		return ctrl.Result{}, err
	}

	var class banlieuev1.ProviderClass
	if err := r.client.Get(ctx, client.ObjectKey{Name: p.Spec.ProviderClassRef.Name}, &class); err != nil {
		if !apierrors.IsNotFound(err) {
			return ctrl.Result{}, err
		}
		r.recorder.Eventf(&p, nil, corev1.EventTypeWarning, banlieuev1.ReasonProviderClassNotFound, "Reconcile",
			"ProviderClass %q not found", p.Spec.ProviderClassRef.Name)
		return ctrl.Result{RequeueAfter: app.RequeueDefault}, nil
	}
	if paused := pausedObject(&p, &class); paused != "" {
		r.recorder.Eventf(&p, nil, corev1.EventTypeNormal, banlieuev1.ReasonReconcileSkipped, "Reconcile", "%s is paused", paused)
		return ctrl.Result{RequeueAfter: app.RequeueDefault}, nil
	}

	// The admission params first: the provider's import Jobs are refused until its entry exists.
	if err := r.applyProviderAccounts(ctx); err != nil {
		return ctrl.Result{}, err
	}
	grants, err := r.machineUserDataGrants(ctx, &p, userDataName(workloadName(class.Name, p.Namespace, p.Name)))
	if err != nil {
		return ctrl.Result{}, err
	}
	w := desiredWorkload(&p, &class, r.opts, grants)
	next, err := fingerprint(w)
	if err != nil {
		return ctrl.Result{}, err
	}
	prev, err := r.appliedFingerprint(ctx, w)
	if err != nil {
		return ctrl.Result{}, err
	}
	w.deployment.WithAnnotations(map[string]string{banlieuev1.AnnotationWorkloadFingerprint: next})
	for _, obj := range w.objects() {
		if err := r.client.Apply(ctx, obj, client.FieldOwner(banlieuev1.FieldManagerOperator), client.ForceOwnership); err != nil {
			return ctrl.Result{}, fmt.Errorf("applying %s %s: %w", *obj.GetKind(), *obj.GetName(), err)
		}
	}
	if err := r.prune(ctx, &p, keepSet(w), *w.deployment.GetName()); err != nil {
		return ctrl.Result{}, err
	}
	if prev != next {
		// Only a first or changed apply is news; the 30-second re-apply that repairs nothing is not.
		r.recorder.Eventf(&p, nil, corev1.EventTypeNormal, banlieuev1.ReasonWorkloadApplied, "Reconcile",
			"workload %s applied in namespace %s (fingerprint %s)", *w.deployment.GetName(), *w.deployment.GetNamespace(), next)
	}
	if err := r.applyWorkloadStatus(ctx, &p, w); err != nil {
		return ctrl.Result{}, err
	}
	return ctrl.Result{RequeueAfter: app.RequeueDefault}, nil
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

func (r *providerReconciler) cleanup(ctx context.Context, p *banlieuev1.Provider) error {
	if !controllerutil.ContainsFinalizer(p, banlieuev1.FinalizerProviderWorkload) {
		return nil
	}
	if _, err := r.deleteWorkload(ctx, p, nil); err != nil {
		return err
	}
	if err := r.applyProviderAccounts(ctx); err != nil {
		return err
	}
	removed, err := finalizer.Remove(ctx, r.client, p, banlieuev1.FinalizerProviderWorkload)
	if removed {
		r.recorder.Eventf(p, nil, corev1.EventTypeNormal, banlieuev1.ReasonWorkloadDeleted, "Delete", "workload deleted")
	}
	return err
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
