package operator

import (
	"context"
	"fmt"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
	"banlieue.io/banlieue/internal/ssa"
)

// ProviderClass Ready condition (docs/reference/api.md).
const (
	providerClusterRolePrefix = "banlieue-provider-"
)

// providerClassReconciler reports whether a class is usable and how many Providers use it.
type providerClassReconciler struct {
	client client.Client
}

func (r *providerClassReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var class banlieuev1.ProviderClass
	if err := r.client.Get(ctx, req.NamespacedName, &class); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	hasRole, err := r.clusterRoleExists(ctx, providerClusterRole(class.Spec.Backend))
	if err != nil {
		return ctrl.Result{}, err
	}
	var providers banlieuev1.ProviderList
	if err := r.client.List(ctx, &providers, client.MatchingFields{classRefIndex: class.Name}); err != nil {
		return ctrl.Result{}, fmt.Errorf("listing providers of class %s: %w", class.Name, err)
	}

	status := classStatus(&class, hasRole, int32(len(providers.Items)))
	if equality.Semantic.DeepEqual(status, class.Status) {
		return ctrl.Result{}, nil
	}
	return ctrl.Result{}, r.applyStatus(ctx, &class, status)
}

// classStatus is the whole status of class. The Ready condition keeps its lastTransitionTime
// while its status does not change.
func classStatus(class *banlieuev1.ProviderClass, hasClusterRole bool, providers int32) banlieuev1.ProviderClassStatus {
	status := banlieuev1.ProviderClassStatus{
		Conditions:         append([]metav1.Condition(nil), class.Status.Conditions...),
		Providers:          providers,
		ObservedGeneration: class.Generation,
	}
	if imageValid(class.Spec.Image) {
		status.Image = imageRef(class.Spec.Image)
	}
	banlieuev1.SetCondition(&status.Conditions, class.Generation, readyCondition(class, hasClusterRole))
	return status
}

// readyCondition checks the ClusterRole first: without it no workload of the class can run,
// whatever its image.
func readyCondition(class *banlieuev1.ProviderClass, hasClusterRole bool) metav1.Condition {
	c := metav1.Condition{Type: banlieuev1.ConditionReady, ObservedGeneration: class.Generation}
	switch {
	case !hasClusterRole:
		c.Status, c.Reason = metav1.ConditionFalse, banlieuev1.ReasonMissingClusterRole
		c.Message = fmt.Sprintf("ClusterRole %s does not exist", providerClusterRole(class.Spec.Backend))
	case !imageValid(class.Spec.Image):
		c.Status, c.Reason = metav1.ConditionFalse, banlieuev1.ReasonInvalidImage
		c.Message = "image repository and tag must both be set"
	default:
		c.Status, c.Reason = metav1.ConditionTrue, banlieuev1.ReasonReady
		c.Message = fmt.Sprintf("class is usable; image %s", imageRef(class.Spec.Image))
	}
	return c
}

// applyStatus sends the whole status, so fields it no longer holds are dropped (docs/architecture.md, "Field managers (server-side apply)").
func (r *providerClassReconciler) applyStatus(ctx context.Context, class *banlieuev1.ProviderClass, status banlieuev1.ProviderClassStatus) error {
	if err := ssa.ApplyStatus(ctx, r.client, class, &status, banlieuev1.FieldManagerOperator); err != nil {
		return fmt.Errorf("applying ProviderClass %s status: %w", class.Name, err)
	}
	return nil
}

// clusterRoleExists reads the metadata-only cache the ClusterRole watch fills.
func (r *providerClassReconciler) clusterRoleExists(ctx context.Context, name string) (bool, error) {
	role := &metav1.PartialObjectMetadata{}
	role.SetGroupVersionKind(rbacv1.SchemeGroupVersion.WithKind("ClusterRole"))
	err := r.client.Get(ctx, client.ObjectKey{Name: name}, role)
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("getting ClusterRole %s: %w", name, err)
	}
	return true, nil
}

// classesOfClusterRole maps a provider ClusterRole to the classes of its backend.
func (r *providerClassReconciler) classesOfClusterRole(ctx context.Context, o client.Object) []reconcile.Request {
	backend, ok := strings.CutPrefix(o.GetName(), providerClusterRolePrefix)
	if !ok {
		return nil
	}
	var classes banlieuev1.ProviderClassList
	if err := r.client.List(ctx, &classes); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "listing provider classes")
		return nil
	}
	var reqs []reconcile.Request
	for _, c := range classes.Items {
		if c.Spec.Backend == backend {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKey{Name: c.Name}})
		}
	}
	return reqs
}
