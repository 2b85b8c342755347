package operator

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
)

// workloadStatus is the Provider status the operator owns: status.workload and nothing else.
// The rest of the status belongs to the provider's field manager; sending only this field under
// the operator's own manager leaves those fields, conditions included, untouched.
func workloadStatus(p *banlieuev1.Provider, w workload) *unstructured.Unstructured {
	var ready int64
	if s := w.deployment.Status; s != nil && s.ReadyReplicas != nil {
		ready = int64(*s.ReadyReplicas)
	}
	u := &unstructured.Unstructured{Object: map[string]any{
		"status": map[string]any{
			"workload": map[string]any{
				"deploymentName":     deref(w.deployment.GetName()),
				"namespace":          deref(w.deployment.GetNamespace()),
				"readyReplicas":      ready,
				"observedGeneration": p.Generation,
			},
		},
	}}
	u.SetGroupVersionKind(banlieuev1.GroupVersion.WithKind("Provider"))
	u.SetNamespace(p.Namespace)
	u.SetName(p.Name)
	return u
}

// applyWorkloadStatus writes status.workload. w.deployment holds the server's answer to the
// Deployment apply, so readyReplicas is as fresh as the apply.
func (r *providerReconciler) applyWorkloadStatus(ctx context.Context, p *banlieuev1.Provider, w workload) error {
	ac := client.ApplyConfigurationFromUnstructured(workloadStatus(p, w))
	if err := r.client.Status().Apply(ctx, ac, client.FieldOwner(FieldManager), client.ForceOwnership); err != nil {
		return fmt.Errorf("applying status.workload: %w", err)
	}
	return nil
}
