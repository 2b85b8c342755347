package role

import (
	"context"
	"fmt"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// accessCheckTimeout bounds the startup access reviews.
const accessCheckTimeout = 10 * time.Second

// mayWatchJobs asks the API server whether this process may list and watch Jobs in namespace.
// The grant comes from the ProviderClass's additionalRules; without it a Job informer never
// syncs, and a controller that waits on one fails its start after the cache sync timeout and
// takes the whole process (probing, teardown) with it. Any authenticated account may review
// its own access, so the check itself needs no grant.
func mayWatchJobs(ctx context.Context, c client.Client, namespace string) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, accessCheckTimeout)
	defer cancel()
	for _, verb := range []string{"list", "watch"} {
		review := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
			ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: namespace, Verb: verb, Group: "batch", Resource: "jobs"},
		}}
		if err := c.Create(ctx, review); err != nil {
			return false, fmt.Errorf("reviewing access to %s Jobs in %s: %w", verb, namespace, err)
		}
		if !review.Status.Allowed {
			return false, nil
		}
	}
	return true, nil
}
