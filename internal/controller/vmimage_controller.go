package controller

import (
	"context"
	"encoding/json"
	"fmt"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
	"banlieue.io/banlieue/internal/app"
	"banlieue.io/banlieue/internal/ssa"
)

// vmImageReconciler publishes a VMImage's aggregate Ready (docs/guides/libvirt-provider.md, "6. Get an image onto the host").
type vmImageReconciler struct {
	client client.Client
	// apiReader confirms, past the cache, that a row's Provider is gone before the row is
	// removed: a Provider too new for the cache must keep the row its provider just wrote.
	apiReader client.Reader
}

func (r *vmImageReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var image banlieuev1.VMImage
	if err := r.client.Get(ctx, req.NamespacedName, &image); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if removed, err := r.removeRetiredRows(ctx, &image); err != nil || removed {
		// The watch brings the image without the rows, and with it the next pass.
		return ctrl.Result{}, err
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

// removeRetiredRows removes the perProvider rows of Providers that no longer exist, which no
// provider process is left to remove (each applies only its own row): a retired host leaves no
// trace in the image's PROVIDERS and Ready. One JSON patch of the status, each removal guarded by
// a test of the row's Provider, so a row that moved meanwhile makes the patch fail, not remove
// another row.
func (r *vmImageReconciler) removeRetiredRows(ctx context.Context, image *banlieuev1.VMImage) (bool, error) {
	var providers banlieuev1.ProviderList
	if err := r.client.List(ctx, &providers); err != nil {
		return false, fmt.Errorf("listing Providers: %w", err)
	}
	known := make(map[types.NamespacedName]bool, len(providers.Items))
	for _, p := range providers.Items {
		known[types.NamespacedName{Namespace: p.Namespace, Name: p.Name}] = true
	}
	var gone []int
	for _, i := range retiredRows(image.Status.PerProvider, known) {
		row := image.Status.PerProvider[i]
		err := r.apiReader.Get(ctx, client.ObjectKey{Namespace: row.ProviderNamespace, Name: row.ProviderName}, &banlieuev1.Provider{})
		switch {
		case apierrors.IsNotFound(err):
			gone = append(gone, i)
		case err != nil && !apierrors.IsForbidden(err):
			return false, fmt.Errorf("confirming Provider %s/%s is gone: %w", row.ProviderNamespace, row.ProviderName, err)
		}
		// Forbidden: a controller limited to one namespace cannot tell; the row stays.
	}
	if len(gone) == 0 {
		return false, nil
	}
	patch, err := removeRowsPatch(image.Status.PerProvider, gone)
	if err != nil {
		return false, err
	}
	if err := r.client.Status().Patch(ctx, image, client.RawPatch(types.JSONPatchType, patch)); err != nil {
		return false, fmt.Errorf("removing the rows of retired Providers from VMImage %s: %w", image.Name, err)
	}
	return true, nil
}

// retiredRows are the indices of the rows whose Provider known does not hold. Rows recorded
// without a namespace name no Provider and stay.
func retiredRows(rows []banlieuev1.ProviderImageStatus, known map[types.NamespacedName]bool) []int {
	var out []int
	for i, row := range rows {
		if row.ProviderNamespace != "" && !known[types.NamespacedName{Namespace: row.ProviderNamespace, Name: row.ProviderName}] {
			out = append(out, i)
		}
	}
	return out
}

// removeRowsPatch is the JSON patch removing the rows at indices (ascending), from the last so
// that each index still points at its row, each after a test of the row's Provider.
func removeRowsPatch(rows []banlieuev1.ProviderImageStatus, indices []int) ([]byte, error) {
	var ops []map[string]any
	for k := len(indices) - 1; k >= 0; k-- {
		i := indices[k]
		path := fmt.Sprintf("/status/perProvider/%d", i)
		ops = append(ops,
			map[string]any{"op": "test", "path": path + "/providerName", "value": rows[i].ProviderName},
			map[string]any{"op": "test", "path": path + "/providerNamespace", "value": rows[i].ProviderNamespace},
			map[string]any{"op": "remove", "path": path})
	}
	return json.Marshal(ops)
}
