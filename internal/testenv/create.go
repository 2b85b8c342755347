package testenv

import (
	"context"
	"fmt"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Create creates objs in order, failing t on the first error.
func (e *Env) Create(ctx context.Context, t testing.TB, objs ...client.Object) {
	t.Helper()
	for _, o := range objs {
		if err := e.Client.Create(ctx, o); err != nil {
			t.Fatalf("creating %T %s: %v", o, client.ObjectKeyFromObject(o), err)
		}
	}
}

// WaitGone waits up to timeout until o, by its key, no longer exists: deleted, its finalizers
// done.
func WaitGone(ctx context.Context, t testing.TB, c client.Client, o client.Object, timeout time.Duration) {
	t.Helper()
	key := client.ObjectKeyFromObject(o)
	Eventually(t, timeout, fmt.Sprintf("%T %s deleted", o, key), func() error {
		err := c.Get(ctx, key, o.DeepCopyObject().(client.Object))
		return Unmet(apierrors.IsNotFound(err), fmt.Sprintf("still there (%v)", err))
	})
}
