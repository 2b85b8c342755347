package controller

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	infrav1 "banlieue.io/banlieue/api/infrastructure/v1alpha1"
	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
	"banlieue.io/banlieue/internal/app"
	"banlieue.io/banlieue/internal/capi"
	"banlieue.io/banlieue/internal/ssa"
	"banlieue.io/banlieue/internal/tenancy"
)

// The LibvirtCluster is Cluster API's InfraCluster (docs/adr/0136-cluster-api-machines.md). It
// makes nothing on a host: its failure domains are the Providers it names, and it is provisioned
// once the user's control plane endpoint is set. banlieue-controller serves it because it reads
// every Provider and Namespace already and never talks to a host (test/boundaries); a provider
// process serves one Provider only.

// clusterTimeout bounds one pass over a LibvirtCluster: a few reads and one status write.
const clusterTimeout = 30 * time.Second

// AttributeProviderNamespace is the failure domain attribute naming its Provider's namespace.
const AttributeProviderNamespace = "provider-namespace"

// libvirtClusterReconciler writes LibvirtCluster status.
type libvirtClusterReconciler struct {
	client    client.Client
	apiReader client.Reader
}

func setupLibvirtClusters(mgr ctrl.Manager) error {
	r := &libvirtClusterReconciler{client: mgr.GetClient(), apiReader: mgr.GetAPIReader()}
	return ctrl.NewControllerManagedBy(mgr).
		Named("libvirtcluster").
		For(&infrav1.LibvirtCluster{}).
		Watches(&banlieuev1.Provider{}, handler.EnqueueRequestsFromMapFunc(r.clustersOfProvider)).
		WithOptions(controller.Options{RateLimiter: app.ErrorRateLimiter()}).
		Complete(r)
}

// clustersOfProvider maps a Provider to every LibvirtCluster: a Provider appearing or going
// changes their failure domains, and LibvirtClusters are few.
func (r *libvirtClusterReconciler) clustersOfProvider(ctx context.Context, _ client.Object) []reconcile.Request {
	var list infrav1.LibvirtClusterList
	if err := r.client.List(ctx, &list); err != nil {
		return nil
	}
	reqs := make([]reconcile.Request, 0, len(list.Items))
	for i := range list.Items {
		reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
	}
	return reqs
}

// Reconcile: fetch, paused or not, read the Providers, write the status once. There is nothing
// to tear down, so no finalizer.
func (r *libvirtClusterReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var lc infrav1.LibvirtCluster
	if err := r.client.Get(ctx, req.NamespacedName, &lc); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !lc.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil
	}
	ctx, cancel := context.WithTimeout(ctx, clusterTimeout)
	defer cancel()

	paused, why, err := r.paused(ctx, &lc)
	if err != nil {
		return ctrl.Result{}, err
	}
	st := *lc.Status.DeepCopy()
	if paused {
		banlieuev1.SetCondition(&st.Conditions, lc.Generation, metav1.Condition{Type: infrav1.ConditionPaused,
			Status: metav1.ConditionTrue, Reason: infrav1.ReasonPaused, Message: why + ": nothing is reconciled"})
		// Unpausing changes no generation: looked at again.
		return ctrl.Result{RequeueAfter: app.RequeueDefault}, r.apply(ctx, &lc, &st)
	}
	found, err := r.providers(ctx, &lc)
	if err != nil {
		return ctrl.Result{}, err
	}
	st = libvirtClusterStatus(&lc, found)
	return ctrl.Result{RequeueAfter: app.RequeueDefault}, r.apply(ctx, &lc, &st)
}

func (r *libvirtClusterReconciler) apply(ctx context.Context, lc *infrav1.LibvirtCluster, st *infrav1.LibvirtClusterStatus) error {
	if err := ssa.ApplyStatus(ctx, r.client, lc, st, banlieuev1.FieldManagerController); err != nil {
		return fmt.Errorf("writing LibvirtCluster %s/%s status: %w", lc.Namespace, lc.Name, err)
	}
	return nil
}

// paused reports whether lc carries the paused annotation or its owner Cluster has spec.paused.
func (r *libvirtClusterReconciler) paused(ctx context.Context, lc *infrav1.LibvirtCluster) (bool, string, error) {
	if capi.Paused(lc) {
		return true, "the LibvirtCluster has the " + capi.AnnotationPaused + " annotation", nil
	}
	for _, ref := range lc.OwnerReferences {
		if ref.Kind != "Cluster" || !strings.HasPrefix(ref.APIVersion, capi.Group+"/") {
			continue
		}
		p, err := capi.ClusterPaused(ctx, r.apiReader, lc.Namespace, ref.Name)
		if apierrors.IsNotFound(err) {
			return false, "", nil
		}
		if err != nil {
			return false, "", err
		}
		return p, "Cluster " + ref.Name + " has spec.paused", nil
	}
	return false, "", nil
}

// providers reads each Provider of spec.providers (nil where it is missing, or does not admit
// the cluster's namespace: its machines would be refused there).
func (r *libvirtClusterReconciler) providers(ctx context.Context, lc *infrav1.LibvirtCluster) ([]*banlieuev1.Provider, error) {
	found := make([]*banlieuev1.Provider, len(lc.Spec.Providers))
	var ns corev1.Namespace
	if err := r.client.Get(ctx, client.ObjectKey{Name: lc.Namespace}, &ns); err != nil {
		return nil, fmt.Errorf("reading Namespace %s: %w", lc.Namespace, err)
	}
	for i, ref := range lc.Spec.Providers {
		var p banlieuev1.Provider
		key := client.ObjectKey{Namespace: providerNamespace(lc, ref), Name: ref.Name}
		if err := r.client.Get(ctx, key, &p); apierrors.IsNotFound(err) {
			continue
		} else if err != nil {
			return nil, fmt.Errorf("reading Provider %s: %w", key, err)
		}
		if ok, _ := tenancy.AdmitsNamespace(&p, lc.Namespace, ns.Labels); ok {
			found[i] = &p
		}
	}
	return found, nil
}

func providerNamespace(lc *infrav1.LibvirtCluster, ref infrav1.ClusterProvider) string {
	if ref.Namespace != "" {
		return ref.Namespace
	}
	return lc.Namespace
}

// libvirtClusterStatus is lc's status given its Providers (found[i] for spec.providers[i], nil
// when missing or not admitting): one failure domain per Provider found, provisioned once the
// endpoint is set and every Provider is found, and never unset again.
func libvirtClusterStatus(lc *infrav1.LibvirtCluster, found []*banlieuev1.Provider) infrav1.LibvirtClusterStatus {
	st := *lc.Status.DeepCopy()
	st.FailureDomains = nil
	var missing []string
	for i, ref := range lc.Spec.Providers {
		if found[i] == nil {
			missing = append(missing, fmt.Sprintf("spec.providers[%d] %s/%s", i, providerNamespace(lc, ref), ref.Name))
			continue
		}
		st.FailureDomains = append(st.FailureDomains, infrav1.FailureDomain{
			Name:         ref.Name,
			ControlPlane: ptr.To(ptr.Deref(ref.ControlPlane, true)),
			Attributes:   map[string]string{AttributeProviderNamespace: providerNamespace(lc, ref)},
		})
	}
	cond := metav1.Condition{Type: banlieuev1.ConditionReady, Status: metav1.ConditionFalse}
	switch {
	case len(missing) > 0:
		cond.Reason = infrav1.ReasonProviderNotFound
		cond.Message = strings.Join(missing, ", ") + ": no such Provider, or it does not admit namespace " + lc.Namespace
	case lc.Spec.ControlPlaneEndpoint == nil:
		cond.Reason = infrav1.ReasonWaitingForControlPlaneEndpoint
		cond.Message = "spec.controlPlaneEndpoint is unset: set it to the address in front of the control plane machines"
	default:
		cond.Status, cond.Reason = metav1.ConditionTrue, infrav1.ReasonClusterProvisioned
		cond.Message = fmt.Sprintf("%d failure domains; control plane endpoint %s:%d", len(st.FailureDomains),
			lc.Spec.ControlPlaneEndpoint.Host, lc.Spec.ControlPlaneEndpoint.Port)
	}
	if cond.Status == metav1.ConditionTrue || (st.Initialization != nil && ptr.Deref(st.Initialization.Provisioned, false)) {
		st.Initialization = &infrav1.ClusterInitializationStatus{Provisioned: ptr.To(true)}
	}
	banlieuev1.SetCondition(&st.Conditions, lc.Generation, cond)
	banlieuev1.SetCondition(&st.Conditions, lc.Generation, metav1.Condition{Type: infrav1.ConditionPaused,
		Status: metav1.ConditionFalse, Reason: infrav1.ReasonNotPaused, Message: "neither the LibvirtCluster nor its Cluster is paused"})
	st.ObservedGeneration = lc.Generation
	return st
}
