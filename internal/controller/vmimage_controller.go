package controller

import (
	"context"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
	"banlieue.io/banlieue/internal/app"
	"banlieue.io/banlieue/internal/ssa"
)

// vmImageReconciler publishes a VMImage's aggregate Ready (docs/guides/libvirt-provider.md, "6. Get an image onto the host").
type vmImageReconciler struct {
	client client.Client
}

func (r *vmImageReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var image banlieuev1.VMImage
	if err := r.client.Get(ctx, req.NamespacedName, &image); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	conditions := append([]metav1.Condition(nil), image.Status.Conditions...)
	banlieuev1.SetCondition(&conditions, image.Generation, imageReady(image.Status.PerProvider))
	ready := readyProviders(image.Status.PerProvider)
	if equality.Semantic.DeepEqual(conditions, image.Status.Conditions) && ready == image.Status.ReadyProviders {
		return ctrl.Result{RequeueAfter: app.RequeueLong}, nil
	}
	// Conditions and the count only: perProvider belongs to the providers and buildArtifact to
	// the imagebuilder, each under its own field manager.
	return ctrl.Result{RequeueAfter: app.RequeueLong}, ssa.ApplyStatus(ctx, r.client, &image,
		&banlieuev1.VMImageStatus{Conditions: conditions, ReadyProviders: ready}, banlieuev1.FieldManagerController)
}
