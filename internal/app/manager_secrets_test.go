package app_test

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"banlieue.io/banlieue/internal/app"
	"banlieue.io/banlieue/internal/testenv"
)

// TestNoRoleCachesSecrets: a role's own client reads a Secret with a GET by name, never through
// an informer. The account may only get that one Secret: a cached read would list and watch
// Secrets, be refused, and never return before the deadline.
func TestNoRoleCachesSecrets(t *testing.T) {
	env := testenv.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const ns, sa = "cache-test", "role"
	for _, obj := range []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "one", Namespace: ns}, Data: map[string][]byte{"k": []byte("v")}},
		&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: sa, Namespace: ns},
			Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get"}, ResourceNames: []string{"one"}}}},
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: sa, Namespace: ns},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: sa},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: sa, Namespace: ns}}},
	} {
		if err := env.Client.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	user := testenv.ServiceAccountUser(ns, sa)
	cfg := testenv.Impersonating(env.Config, user)
	direct := testenv.ClientAs(t, env.Config, user)
	testenv.Eventually(t, 10*time.Second, "the Role in force", func() error {
		return direct.Get(ctx, client.ObjectKey{Namespace: ns, Name: "one"}, &corev1.Secret{})
	})
	mgr, err := app.NewManager(cfg, app.Options{NoLeaderElect: true}, "cache-test", app.NewScheme(), nil)
	if err != nil {
		t.Fatal(err)
	}
	// Not testenv.StartManager: on the failing path the manager's stop waits for an informer
	// that never syncs, so the wait for it is bounded.
	mgrCtx, stopMgr := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		_ = mgr.Start(mgrCtx) // a failed start shows as the Get below failing
	}()
	t.Cleanup(func() {
		stopMgr()
		select {
		case <-stopped:
		case <-time.After(10 * time.Second):
			t.Log("the manager did not stop in 10 s")
		}
	})

	// A cached read blocks on an informer that never syncs, whatever its context says: the
	// read runs aside, so a regression fails in seconds rather than at the test timeout.
	var s corev1.Secret
	done := make(chan error, 1)
	go func() {
		getCtx, getCancel := context.WithTimeout(ctx, 5*time.Second)
		defer getCancel()
		done <- mgr.GetClient().Get(getCtx, client.ObjectKey{Namespace: ns, Name: "one"}, &s)
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("getting the Secret by name: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the role's client did not return the Secret in 10 s: it reads Secrets through an informer")
	}
	if string(s.Data["k"]) != "v" {
		t.Errorf("Secret data = %v", s.Data)
	}
}
