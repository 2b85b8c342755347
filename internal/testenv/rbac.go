package testenv

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// GeneratedRoles decodes a role file `make manifests` writes under config/rbac (rel is relative to
// the repository, e.g. "config/rbac/controller/role.yaml"): its first document is the role's
// ClusterRole, the documents after it the namespaced Roles. Tests install exactly these, so a
// rule the markers drop is a rule the tests lose.
func GeneratedRoles(t testing.TB, rel string) (*rbacv1.ClusterRole, []rbacv1.Role) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(RepoRoot(), rel))
	if err != nil {
		t.Fatal(err)
	}
	docs := strings.Split(string(raw), "\n---\n")
	var cluster rbacv1.ClusterRole
	if err := yaml.UnmarshalStrict([]byte(docs[0]), &cluster); err != nil {
		t.Fatalf("decoding %s: %v", rel, err)
	}
	roles := make([]rbacv1.Role, len(docs)-1)
	for i, doc := range docs[1:] {
		if err := yaml.UnmarshalStrict([]byte(doc), &roles[i]); err != nil {
			t.Fatalf("decoding %s, document %d: %v", rel, i+2, err)
		}
	}
	return &cluster, roles
}

// BindInstalledClusterRole creates the ClusterRole of a generated role file (GeneratedRoles) and
// binds it to user, so a client impersonating user acts with exactly the installed rules.
func (e *Env) BindInstalledClusterRole(ctx context.Context, t testing.TB, rel, user string) *rbacv1.ClusterRole {
	t.Helper()
	role, _ := GeneratedRoles(t, rel)
	e.Create(ctx, t, role, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: user},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}}})
	return role
}
