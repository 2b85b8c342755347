package app

import (
	"time"

	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// ErrorRetry is the error policy of docs/operations.md, "Requeue intervals": a failed pass is retried after this long.
const ErrorRetry = 5 * time.Second

// ErrorRateLimiter retries a failed reconcile after a flat ErrorRetry instead of
// controller-runtime's exponential backoff, which reaches 1000 s: after a long outage of the API
// server or a host, an object would otherwise wait about as long again before its next try.
// Every controller of every role uses it.
func ErrorRateLimiter() workqueue.TypedRateLimiter[reconcile.Request] {
	return workqueue.NewTypedItemExponentialFailureRateLimiter[reconcile.Request](ErrorRetry, ErrorRetry)
}
