// Package finalizer is the one way banlieue's roles add and remove their finalizers.
//
// Both patch metadata.finalizers with an optimistic lock: a merge patch replaces the whole list,
// so one made from a stale object must fail (and the pass be retried) rather than drop a
// finalizer another role added in the meantime.
package finalizer

import (
	"context"
	"fmt"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
)

// Ensure adds name to obj's finalizers unless it is there; obj is updated from the answer.
func Ensure(ctx context.Context, c client.Client, obj client.Object, name string) error {
	orig := obj.DeepCopyObject().(client.Object)
	if !controllerutil.AddFinalizer(obj, name) {
		return nil
	}
	if err := c.Patch(ctx, obj, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); err != nil {
		return fmt.Errorf("adding finalizer %s: %w", name, err)
	}
	return nil
}

// Remove takes name out of obj's finalizers if it is there. An object already gone is no error:
// removing the last finalizer may delete it before the answer.
func Remove(ctx context.Context, c client.Client, obj client.Object, name string) error {
	orig := obj.DeepCopyObject().(client.Object)
	if !controllerutil.RemoveFinalizer(obj, name) {
		return nil
	}
	if err := c.Patch(ctx, obj, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("removing finalizer %s: %w", name, err)
	}
	return nil
}
