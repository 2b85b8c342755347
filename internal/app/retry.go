package app

import (
	"time"

	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// The requeue intervals of docs/operations.md, "Requeue intervals", shared by every role.
const (
	// ErrorRetry: a failed pass, or one waiting on something about to change, looks again
	// after this long.
	ErrorRetry = 5 * time.Second
	// RequeueDefault: a converged object is looked at again after this long, to notice drift
	// nothing announces (a host changed behind banlieue's back).
	RequeueDefault = 30 * time.Second
	// RequeueLong: an object that waits on a person (a refused input, a paused object), or a
	// converged one whose every input is watched (a VirtualMachine, docs/operations.md), is
	// looked at again after this long; an edit wakes it sooner.
	RequeueLong = 300 * time.Second
)

// ErrorRateLimiter retries a failed reconcile after a flat ErrorRetry instead of
// controller-runtime's exponential backoff, which reaches 1000 s: after a long outage of the API
// server or a host, an object would otherwise wait about as long again before its next try.
// Every controller of every role uses it.
func ErrorRateLimiter() workqueue.TypedRateLimiter[reconcile.Request] {
	return workqueue.NewTypedItemExponentialFailureRateLimiter[reconcile.Request](ErrorRetry, ErrorRetry)
}
