package operator

import (
	"context"
	"fmt"

	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
	"banlieue.io/banlieue/internal/ssa"
)

// workloadStatus is the Provider status the operator owns: status.workload and nothing else.
// The rest of the status belongs to the provider's field manager; sending only this field under
// the operator's own manager leaves those fields, conditions included, untouched.
func workloadStatus(p *banlieuev1.Provider, w workload) *banlieuev1.ProviderStatus {
	var ready int32
	if s := w.deployment.Status; s != nil && s.ReadyReplicas != nil {
		ready = *s.ReadyReplicas
	}
	return &banlieuev1.ProviderStatus{Workload: &banlieuev1.ProviderWorkload{
		DeploymentName:     deref(w.deployment.GetName()),
		Namespace:          deref(w.deployment.GetNamespace()),
		ReadyReplicas:      ready,
		ObservedGeneration: p.Generation,
	}}
}

// applyWorkloadStatus writes status.workload. w.deployment holds the server's answer to the
// Deployment apply, so readyReplicas is as fresh as the apply.
func (r *providerReconciler) applyWorkloadStatus(ctx context.Context, p *banlieuev1.Provider, w workload) error {
	if err := ssa.ApplyStatus(ctx, r.client, p, workloadStatus(p, w), banlieuev1.FieldManagerOperator); err != nil {
		return fmt.Errorf("applying status.workload: %w", err)
	}
	return nil
}
