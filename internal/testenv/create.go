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

// Patch reads obj by key, applies mutate and sends the difference as a merge patch with no
// resourceVersion, so a status the roles write meanwhile cannot make it conflict.
func Patch[T client.Object](ctx context.Context, t testing.TB, c client.Client, key client.ObjectKey, obj T, mutate func(T)) {
	t.Helper()
	if err := c.Get(ctx, key, obj); err != nil {
		t.Fatalf("reading %T %s: %v", obj, key, err)
	}
	orig := obj.DeepCopyObject().(client.Object)
	mutate(obj)
	if err := c.Patch(ctx, obj, client.MergeFrom(orig)); err != nil {
		t.Fatalf("patching %T %s: %v", obj, key, err)
	}
}
