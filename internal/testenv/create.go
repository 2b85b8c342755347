package testenv

import (
	"context"
	"testing"

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
