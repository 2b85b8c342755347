// Package finalizer is the one way banlieue's roles add and remove their finalizers.
//
// Both patch metadata.finalizers with an optimistic lock: a merge patch replaces the whole list,
// so one made from a stale object must fail (and the pass be retried) rather than drop a
// finalizer another role added in the meantime.
package finalizer

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
)

// Ensure adds name to obj's finalizers unless it is there; obj is updated from the answer.
func Ensure(ctx context.Context, c client.Client, obj client.Object, name string) error {
	return EnsureWith(ctx, c, obj, name, nil)
}

// EnsureWith is Ensure carrying, in the same patch, the changes also makes to obj (it reports
// whether it changed anything): a role whose first write must record something with its
// finalizer (the libvirt provider's domain UUID) makes one API write, not two. Nothing is sent
// when neither the finalizer nor also changes obj. opts go to the patch (a field owner).
func EnsureWith(ctx context.Context, c client.Client, obj client.Object, name string, also func() bool, opts ...client.PatchOption) error {
	orig := obj.DeepCopyObject().(client.Object)
	added := controllerutil.AddFinalizer(obj, name)
	changed := also != nil && also()
	if !added && !changed {
		return nil
	}
	if err := c.Patch(ctx, obj, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{}), opts...); err != nil {
		if !added {
			return fmt.Errorf("patching %s (finalizer %s already there): %w", obj.GetName(), name, err)
		}
		return fmt.Errorf("adding finalizer %s: %w", name, err)
	}
	return nil
}

// Remove takes name out of obj's finalizers if it is there, and reports whether this call took it
// off. An object already gone is no error, only not a removal: removing the last finalizer may
// delete it before the answer, and a pass working from a stale copy must not act as if it had
// removed it again (say, announce the teardown twice).
func Remove(ctx context.Context, c client.Client, obj client.Object, name string) (removed bool, err error) {
	orig := obj.DeepCopyObject().(client.Object)
	if !controllerutil.RemoveFinalizer(obj, name) {
		return false, nil
	}
	err = c.Patch(ctx, obj, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{}))
	switch {
	case apierrors.IsNotFound(err):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("removing finalizer %s: %w", name, err)
	}
	return true, nil
}
