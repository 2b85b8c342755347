package controller

import (
	"context"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"

	"banlieue.io/banlieue/internal/testenv"
)

// expectRequeue runs one pass of a reconciler of its own over the VM, beside the manager's, and
// checks when it asks to look again (convergedRequeue, or app.RequeueDefault for a VM the
// scheduler cannot place yet). A pass that meets the manager's (a conflict on the status it
// wrote) is tried again.
func (s *suite) expectRequeue(ctx context.Context, t *testing.T, ns, name string, want time.Duration) {
	t.Helper()
	r := &virtualMachineReconciler{client: s.c, apiReader: s.c, recorder: s.recorder,
		assumed: newAssumedPlacements(), applied: newAppliedMachines()}
	var got time.Duration
	testenv.Eventually(t, waitTimeout, "a pass of "+ns+"/"+name, func() error {
		res, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: name}})
		got = res.RequeueAfter
		return err
	})
	if got != want {
		t.Errorf("%s/%s: a pass asks to look again after %s, want %s", ns, name, got, want)
	}
}
