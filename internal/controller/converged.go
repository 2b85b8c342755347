package controller

import (
	"time"

	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
	"banlieue.io/banlieue/internal/app"
)

// convergedRequeue is when a converged VM (placed, its machine applied and mirrored) is looked
// at again. A pass reads the VM, its class, image, Providers, namespace and machine, all
// watched, so an edit of any wakes it at once and app.RequeueLong is only a safety net: at
// app.RequeueDefault a fleet's converged VMs cost the controller many passes that find nothing
// to do (measured in docs/performance.md, "The fleet bench"). Two inputs are not watched and
// keep app.RequeueDefault: the user-data source, read by name because the controller may not
// list or watch Secrets, and, under anti-affinity rules, the siblings, whose creation or
// deletion may move the placement the rules prefer (docs/decisions.md, "A converged VM requeues
// long").
func convergedRequeue(vm *banlieuev1.VirtualMachine) time.Duration {
	if vm.Spec.UserData != nil || vm.Spec.Placement != nil && len(vm.Spec.Placement.AntiAffinity) > 0 {
		return app.RequeueDefault
	}
	return app.RequeueLong
}
