package testenv

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// BindInstalledClusterRole creates the ClusterRole a generated file of config/rbac holds first
// (rel is relative to the repository, e.g. "config/rbac/controller/role.yaml") and binds it to
// user, so a client impersonating user acts with exactly the installed rules.
func (e *Env) BindInstalledClusterRole(ctx context.Context, t testing.TB, rel, user string) *rbacv1.ClusterRole {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(RepoRoot(), rel))
	if err != nil {
		t.Fatal(err)
	}
	// The file's first document is the ClusterRole; the namespaced Roles after it are not read.
	var role rbacv1.ClusterRole
	if err := yaml.Unmarshal(raw, &role); err != nil {
		t.Fatalf("decoding %s: %v", rel, err)
	}
	e.Create(ctx, t, &role, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: user},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}}})
	return &role
}
