package operator

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
)

// fingerprint is a hash of every object of w as it will be sent, so two passes that would apply
// the same workload agree on it and a pass that changes any field (an image, a rule, a user-data
// grant) does not.
func fingerprint(w workload) (string, error) {
	h := sha256.New()
	for _, obj := range w.objects() {
		b, err := json.Marshal(obj)
		if err != nil {
			return "", fmt.Errorf("fingerprinting %s %s: %w", *obj.GetKind(), *obj.GetName(), err)
		}
		h.Write(b)
	}
	return hex.EncodeToString(h.Sum(nil))[:32], nil
}

// appliedFingerprint reads the fingerprint the last apply left on the workload's Deployment, ""
// when there is no Deployment yet. It reads past the cache: a cached Deployment older than the
// last apply would announce that apply twice.
func (r *providerReconciler) appliedFingerprint(ctx context.Context, w workload) (string, error) {
	var d appsv1.Deployment
	key := client.ObjectKey{Namespace: *w.deployment.GetNamespace(), Name: *w.deployment.GetName()}
	if err := r.apiReader.Get(ctx, key, &d); apierrors.IsNotFound(err) {
		return "", nil
	} else if err != nil {
		return "", fmt.Errorf("reading Deployment %s: %w", key, err)
	}
	return d.Annotations[banlieuev1.AnnotationWorkloadFingerprint], nil
}
