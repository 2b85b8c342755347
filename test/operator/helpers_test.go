package operator

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"banlieue.io/banlieue/internal/operator"
	"banlieue.io/banlieue/internal/testenv"
)

// timeout bounds every wait; the operator reacts to watches within milliseconds.
const timeout = 15 * time.Second

// repoFile decodes a file of the repository (an example or a generated manifest) into obj.
func repoFile(t *testing.T, rel string, obj any) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), rel))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.UnmarshalStrict(data, obj); err != nil {
		t.Fatalf("decoding %s: %v", rel, err)
	}
}

// installClusterRole creates a generated ClusterRole as shipped.
func installClusterRole(ctx context.Context, t *testing.T, admin client.Client, rel string) *rbacv1.ClusterRole {
	t.Helper()
	role, _ := testenv.GeneratedRoles(t, rel)
	if err := admin.Create(ctx, role); err != nil {
		t.Fatalf("installing %s: %v", rel, err)
	}
	return role
}

// installRoles creates the namespaced Roles a generated file holds after its ClusterRole, and
// binds each to the ServiceAccount ns/sa, as config/rbac/role-bindings.yaml does.
func installRoles(ctx context.Context, t *testing.T, admin client.Client, rel, ns, sa string) {
	t.Helper()
	_, roles := testenv.GeneratedRoles(t, rel)
	for i := range roles {
		role := &roles[i]
		rb := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: role.Name, Namespace: role.Namespace},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
			Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: sa, Namespace: ns}}}
		for _, obj := range []client.Object{role, rb} {
			if err := admin.Create(ctx, obj); err != nil {
				t.Fatalf("installing %s: %v", rel, err)
			}
		}
	}
}

// as returns a client acting as the ServiceAccount ns/name.
func as(t *testing.T, cfg *rest.Config, ns, name string) client.Client {
	t.Helper()
	return testenv.ClientAs(t, cfg, testenv.ServiceAccountUser(ns, name))
}

// hasEvent finds an events.k8s.io Event about the object named regarding with reason, whose
// note contains note.
func hasEvent(ctx context.Context, c client.Client, ns, regarding, reason, note string) error {
	var list eventsv1.EventList
	if err := c.List(ctx, &list, client.InNamespace(ns)); err != nil {
		return err
	}
	for _, e := range list.Items {
		if e.Regarding.Name == regarding && e.Reason == reason && strings.Contains(e.Note, note) {
			return nil
		}
	}
	return fmt.Errorf("no event %s about %s with note %q among %d events", reason, regarding, note, len(list.Items))
}

// eventsAbout lists the events.k8s.io Events about the object named regarding with reason.
func eventsAbout(ctx context.Context, c client.Client, ns, regarding, reason string) ([]eventsv1.Event, error) {
	var list eventsv1.EventList
	if err := c.List(ctx, &list, client.InNamespace(ns)); err != nil {
		return nil, err
	}
	var out []eventsv1.Event
	for _, e := range list.Items {
		if e.Regarding.Name == regarding && e.Reason == reason {
			out = append(out, e)
		}
	}
	return out, nil
}

func ignoreNotFound(err error) error {
	return client.IgnoreNotFound(err)
}

// providerAccounts is the operator's params ConfigMap of the admission policies on provider accounts.
func providerAccounts(ctx context.Context, c client.Client) (map[string]string, error) {
	var cm corev1.ConfigMap
	if err := c.Get(ctx, client.ObjectKey{Namespace: buildNs, Name: operator.ProviderAccountsName}, &cm); err != nil {
		return nil, err
	}
	return cm.Data, nil
}

// gone reports whether obj no longer exists.
func gone(ctx context.Context, c client.Client, obj client.Object) error {
	err := c.Get(ctx, client.ObjectKeyFromObject(obj), obj)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	return errors.New("still exists")
}
