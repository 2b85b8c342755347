package role

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"banlieue.io/banlieue/internal/testenv"
)

const (
	buildNamespace = "banlieue-imagebuild"
	// cacheSyncTimeout replaces controller-runtime's two minutes: a watch that cannot sync
	// fails the manager's start after this long.
	cacheSyncTimeout = 4 * time.Second
)

// A provider whose ProviderClass lacks the Jobs grant must keep running (probing and teardown
// with it) and read import Jobs uncached; watching them would fail its start. The account may
// do everything else a provider does, so only the Jobs grant differs between the cases.
func TestProviderStartsWithoutTheJobsGrant(t *testing.T) {
	env := testenv.Start(t)
	ctx := context.Background()
	const user = "provider-without-jobs"
	env.Create(ctx, t,
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: buildNamespace}},
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: user}, Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{"banlieue.io", "infrastructure.banlieue.io"}, Resources: []string{"*"}, Verbs: []string{"*"}},
			{APIGroups: []string{""}, Resources: []string{"events", "secrets", "configmaps"}, Verbs: []string{"*"}},
			{APIGroups: []string{"events.k8s.io"}, Resources: []string{"events"}, Verbs: []string{"*"}},
		}},
		&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: user},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: user},
			Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: "User", Name: user}}},
	)
	cfg := testenv.Impersonating(env.Config, user)

	start := func(t *testing.T, watchJobs *bool) error {
		opts := testenv.ManagerOptions()
		opts.Cache.ByObject = CacheByObject(Options{BuildNamespace: buildNamespace})
		opts.Controller.CacheSyncTimeout = cacheSyncTimeout
		mgr, err := ctrl.NewManager(cfg, opts)
		if err != nil {
			t.Fatal(err)
		}
		if watchJobs == nil {
			err = Setup(mgr, Options{BuildNamespace: buildNamespace})
		} else {
			err = setup(mgr, Options{BuildNamespace: buildNamespace}, *watchJobs)
		}
		if err != nil {
			t.Fatal(err)
		}
		stop := testenv.StartManager(t, mgr)
		time.Sleep(2 * cacheSyncTimeout)
		return stop()
	}

	t.Run("without the grant", func(t *testing.T) {
		if ok, err := mayWatchJobs(ctx, env.Client, buildNamespace); err != nil || !ok {
			t.Fatalf("admin: mayWatchJobs = %v, %v; want true", ok, err)
		}
		c, err := client.New(cfg, client.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if ok, err := mayWatchJobs(ctx, c, buildNamespace); err != nil || ok {
			t.Fatalf("mayWatchJobs = %v, %v; want false", ok, err)
		}
		if err := start(t, nil); err != nil {
			t.Errorf("the provider stopped: %v", err)
		}
	})
	t.Run("watching without the grant is what fails", func(t *testing.T) {
		watch := true
		if err := start(t, &watch); err == nil || !strings.Contains(err.Error(), "timed out waiting for cache to be synced") {
			t.Errorf("start with a Job watch and no grant = %v; want the cache sync timeout this check avoids", err)
		}
	})
	t.Run("with the grant", func(t *testing.T) {
		env.Create(ctx, t,
			&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: buildNamespace, Name: user}, Rules: []rbacv1.PolicyRule{
				{APIGroups: []string{"batch"}, Resources: []string{"jobs"}, Verbs: []string{"get", "list", "watch", "create", "delete"}},
			}},
			&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: buildNamespace, Name: user},
				RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: user},
				Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: "User", Name: user}}},
		)
		c, err := client.New(cfg, client.Options{})
		if err != nil {
			t.Fatal(err)
		}
		// The API server's authorizer learns of the new binding through its informers: on a
		// loaded machine that takes a moment, which the provider's own check at start does not
		// wait for (it starts without the Job watch then, as the first case shows).
		testenv.Eventually(t, 30*time.Second, "the grant seen by the API server's authorizer", func() error {
			ok, err := mayWatchJobs(ctx, c, buildNamespace)
			return testenv.Unmet(err == nil && ok, fmt.Sprintf("mayWatchJobs = %v, %v; want true", ok, err))
		})
		if err := start(t, nil); err != nil {
			t.Errorf("the provider stopped: %v", err)
		}
	})
}
