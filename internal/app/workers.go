package app

import (
	"sigs.k8s.io/controller-runtime/pkg/controller"
)

// ControllerOptions are every controller's options: the flat retry of ErrorRateLimiter and
// workers passes at once (the role's --workers; zero means one, which is what tests that build
// a role without the flag get). controller-runtime never runs two passes of one object at once,
// whatever the number of workers.
func ControllerOptions(workers int) controller.Options {
	return controller.Options{RateLimiter: ErrorRateLimiter(), MaxConcurrentReconciles: max(workers, 1)}
}
