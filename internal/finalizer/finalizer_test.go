package finalizer_test

import (
	"context"
	"errors"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"banlieue.io/banlieue/internal/finalizer"
	"banlieue.io/banlieue/internal/testenv"
)

const name = "banlieue.io/test"

// TestRemoveReportsOnlyItsOwnRemoval: a pass from a copy read before another pass let the object
// go must not count as a removal (the provider announces a teardown once on it).
func TestRemoveReportsOnlyItsOwnRemoval(t *testing.T) {
	env := testenv.Start(t)
	ctx := context.Background()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "finalized"}}
	env.Create(ctx, t, cm)
	if err := finalizer.Ensure(ctx, env.Client, cm, name); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Delete(ctx, cm); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(cm), cm); err != nil {
		t.Fatal(err)
	}
	stale := cm.DeepCopy()

	removed, err := finalizer.Remove(ctx, env.Client, cm, name)
	if !removed || err != nil {
		t.Fatalf("first Remove = %v, %v; want true, nil", removed, err)
	}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(cm), &corev1.ConfigMap{}); !apierrors.IsNotFound(err) {
		t.Fatalf("after its last finalizer went the object must be gone, got %v", err)
	}
	removed, err = finalizer.Remove(ctx, env.Client, stale, name)
	if removed || err != nil {
		t.Errorf("Remove from a stale copy of a gone object = %v, %v; want false, nil", removed, err)
	}
	removed, err = finalizer.Remove(ctx, env.Client, stale, name)
	if removed || err != nil {
		t.Errorf("Remove of a finalizer not there = %v, %v; want false, nil", removed, err)
	}
}

// TestEnsureWithOneWrite: the finalizer and the changes it carries go in one patch, guarded by
// the object's resourceVersion, and nothing is sent when neither changes anything.
func TestEnsureWithOneWrite(t *testing.T) {
	env := testenv.Start(t)
	ctx := context.Background()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "carried"}}
	env.Create(ctx, t, cm)
	stale := cm.DeepCopy()
	before := cm.ResourceVersion
	label := func(o *corev1.ConfigMap) func() bool {
		return func() bool {
			if o.Labels["id"] == "x" {
				return false
			}
			o.Labels = map[string]string{"id": "x"}
			return true
		}
	}
	if err := finalizer.EnsureWith(ctx, env.Client, cm, name, label(cm)); err != nil {
		t.Fatal(err)
	}
	var got corev1.ConfigMap
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(cm), &got); err != nil {
		t.Fatal(err)
	}
	if len(got.Finalizers) != 1 || got.Labels["id"] != "x" {
		t.Fatalf("after EnsureWith: finalizers %v labels %v", got.Finalizers, got.Labels)
	}
	if got.ResourceVersion == before || cm.ResourceVersion != got.ResourceVersion {
		t.Errorf("resourceVersion %s → %s (obj %s): one write, decoded back into obj", before, got.ResourceVersion, cm.ResourceVersion)
	}
	// A second call has nothing to change: no write, the resourceVersion stays.
	if err := finalizer.EnsureWith(ctx, env.Client, cm, name, label(cm)); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(cm), &got); err != nil {
		t.Fatal(err)
	}
	if got.ResourceVersion != cm.ResourceVersion {
		t.Errorf("a call with nothing to change wrote: %s → %s", cm.ResourceVersion, got.ResourceVersion)
	}
	// A copy read before the write conflicts rather than overwriting it.
	if err := finalizer.EnsureWith(ctx, env.Client, stale, name, label(stale)); !apierrors.IsConflict(errors.Unwrap(err)) {
		t.Errorf("EnsureWith from a stale copy = %v, want a Conflict", err)
	}
}
