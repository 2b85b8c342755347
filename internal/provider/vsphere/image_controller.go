package vsphere

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/equality"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
	"banlieue.io/banlieue/internal/app"
	"banlieue.io/banlieue/internal/naming"
	"banlieue.io/banlieue/internal/ssa"
)

// ImageReconciler publishes, for its one Provider, the VMImage row of every image with a
// vsphere source of kind Template: ready once vCenter holds a virtual machine template at the
// source's inventory path. The scheduler places a VM only where that row is ready. A vsphere
// source of another kind gets a row that is not ready, UnsupportedSourceKind (ADR-0158): vCenter
// is never asked to fetch a URL.
type ImageReconciler struct {
	Client client.Client
	// APIReader reads the Provider's Secret and CA uncached, by name.
	APIReader client.Reader
	Sessions  *Sessions
	// ProviderName and ProviderNamespace are the one Provider whose row this process writes.
	ProviderName, ProviderNamespace string
}

// SetupWithManager registers the reconciler.
func (r *ImageReconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).Named("vsphere-vmimage").
		For(&banlieuev1.VMImage{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Complete(r)
}

// vsphereSource is img's source for the vsphere class.
func vsphereSource(img *banlieuev1.VMImage) (banlieuev1.ImageSource, bool) {
	i := slices.IndexFunc(img.Spec.Sources, func(s banlieuev1.ImageSource) bool { return s.ProviderClass == ClassName })
	if i < 0 {
		return banlieuev1.ImageSource{}, false
	}
	return img.Spec.Sources[i], true
}

// Reconcile checks the image's template in the Provider's vCenter and applies its row.
func (r *ImageReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var img banlieuev1.VMImage
	if err := r.Client.Get(ctx, req.NamespacedName, &img); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	src, ok := vsphereSource(&img)
	if !ok || !img.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil
	}
	var p banlieuev1.Provider
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: r.ProviderNamespace, Name: r.ProviderName}, &p); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if p.Spec.ProviderClassRef.Name != ClassName {
		return ctrl.Result{}, nil
	}
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	row, err := r.row(ctx, &p, src)
	if err != nil {
		return ctrl.Result{}, err
	}
	if i := slices.IndexFunc(img.Status.PerProvider, func(o banlieuev1.ProviderImageStatus) bool {
		return o.ProviderName == p.Name && o.ProviderNamespace == p.Namespace
	}); i < 0 || !equality.Semantic.DeepEqual(img.Status.PerProvider[i], row) {
		// Only this Provider's row: the list is a map keyed by Provider, and each provider's
		// field manager owns its own entry.
		status := banlieuev1.VMImageStatus{PerProvider: []banlieuev1.ProviderImageStatus{row}, ObservedGeneration: img.Generation}
		if err := ssa.ApplyStatus(ctx, r.Client, &img, &status, banlieuev1.FieldManagerProviderVSphere+"/"+naming.Capped(p.Name)); err != nil {
			return ctrl.Result{}, err
		}
	}
	if !row.Ready {
		return ctrl.Result{RequeueAfter: app.RequeueDefault}, nil
	}
	return ctrl.Result{RequeueAfter: app.RequeueLong}, nil
}

// row is the image's row for p: ready when the template is in vCenter; an error only when the
// API server failed, everything vCenter says is in the row.
func (r *ImageReconciler) row(ctx context.Context, p *banlieuev1.Provider, src banlieuev1.ImageSource) (banlieuev1.ProviderImageStatus, error) {
	row := banlieuev1.ProviderImageStatus{ProviderName: p.Name, ProviderNamespace: p.Namespace}
	notReady := func(reason, msg string) (banlieuev1.ProviderImageStatus, error) {
		row.Reason, row.Message = reason, banlieuev1.ConditionMessage(msg)
		return row, nil
	}
	if src.Kind != banlieuev1.SourceTemplate {
		return notReady(banlieuev1.ReasonUnsupportedSourceKind, fmt.Sprintf(
			"spec.sources[providerClass=vsphere].kind is %s; the vsphere provider clones a virtual machine template, so the kind must be Template", src.Kind))
	}
	ref := src.Ref
	if dc, _, ok := strings.Cut(strings.TrimPrefix(ref, "/"), "/vm/"); !strings.HasPrefix(ref, "/") || !ok || dc == "" {
		return notReady(banlieuev1.ReasonTemplateNotFound, fmt.Sprintf(
			"spec.sources[providerClass=vsphere].ref %q is not an inventory path: name the template as /<datacenter>/vm/<folder>/<template>", ref))
	}
	e, version, refusal, err := providerEndpoint(ctx, r.APIReader, p)
	switch {
	case err != nil:
		return row, err
	case refusal != nil:
		return notReady(refusal.Reason, refusal.Message)
	}
	b, err := r.Sessions.Get(ctx, client.ObjectKeyFromObject(p), e, version)
	if err != nil {
		return notReady(banlieuev1.ReasonConnectFailed, err.Error())
	}
	switch err := b.Template(ctx, ref); {
	case errors.Is(err, ErrNotFound):
		return notReady(banlieuev1.ReasonTemplateNotFound, fmt.Sprintf("spec.sources[providerClass=vsphere].ref %s is not a template in vCenter: %v", ref, err))
	case err != nil:
		return notReady(banlieuev1.ReasonConnectFailed, fmt.Sprintf("checking template %s: %v", ref, err))
	}
	row.Ready, row.Reason, row.ResolvedRef = true, banlieuev1.ReasonReconciled, ref
	return row, nil
}
