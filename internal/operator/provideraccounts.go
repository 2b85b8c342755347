package operator

import (
	"context"
	"fmt"

	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
)

// ProviderAccountsName is the ConfigMap, in the build namespace, that the shipped
// ValidatingAdmissionPolicy banlieue-import-jobs (config/admission/import-jobs.yaml) reads as
// its params: for each provider account, the image its import Jobs run and the Provider it
// serves (docs/security.md, "Import Jobs: one account per Provider, pinned at admission").
const ProviderAccountsName = "banlieue-provider-accounts"

// providerAccountsData is the params ConfigMap's data: per provider ServiceAccount
// "<namespace>.<name>", ".image" the class's image (the import image, providerArgs) and
// ".provider" "<namespace>/<name>" of its Provider. ConfigMap keys allow [-._a-zA-Z0-9] and a
// namespace has no dot, so the key is unambiguous. A Provider whose class is missing has no
// workload, and one whose cleanup has begun is leaving: neither gets an entry. A Provider held
// by its machines (FinalizerProviderInUse) keeps its workload, and so its entry.
func providerAccountsData(providers []banlieuev1.Provider, classes map[string]*banlieuev1.ProviderClass) map[string]string {
	data := map[string]string{}
	for i := range providers {
		p := &providers[i]
		if !p.DeletionTimestamp.IsZero() && !controllerutil.ContainsFinalizer(p, banlieuev1.FinalizerProviderInUse) {
			continue
		}
		class, ok := classes[p.Spec.ProviderClassRef.Name]
		if !ok {
			continue
		}
		key := workloadNamespace(p, class) + "." + workloadName(class.Name, p.Namespace, p.Name)
		data[key+".image"] = imageRef(class.Spec.Image)
		data[key+".provider"] = p.Namespace + "/" + p.Name
	}
	return data
}

// applyProviderAccounts rewrites the data of the params ConfigMap (creating it if it went) from every Provider and class, so that
// whichever Provider's reconcile runs last writes the complete map: no entry depends on the
// order of reconciles, and a deleted Provider's entry goes with the next one.
func (r *providerReconciler) applyProviderAccounts(ctx context.Context) error {
	var providers banlieuev1.ProviderList
	if err := r.client.List(ctx, &providers); err != nil {
		return fmt.Errorf("listing Providers for the provider accounts' admission params: %w", err)
	}
	var classList banlieuev1.ProviderClassList
	if err := r.client.List(ctx, &classList); err != nil {
		return fmt.Errorf("listing ProviderClasses for the provider accounts' admission params: %w", err)
	}
	classes := make(map[string]*banlieuev1.ProviderClass, len(classList.Items))
	for i := range classList.Items {
		classes[classList.Items[i].Name] = &classList.Items[i]
	}
	// Data only: the install ships the ConfigMap (config/admission/provider-accounts.yaml) with
	// its own labels, which an apply of the operator's would take over from kubectl or Helm.
	cm := corev1ac.ConfigMap(ProviderAccountsName, r.opts.BuildNamespace).
		WithData(providerAccountsData(providers.Items, classes))
	if err := r.client.Apply(ctx, cm, client.FieldOwner(banlieuev1.FieldManagerOperator), client.ForceOwnership); err != nil {
		return fmt.Errorf("applying ConfigMap %s/%s: %w", r.opts.BuildNamespace, ProviderAccountsName, err)
	}
	return nil
}
