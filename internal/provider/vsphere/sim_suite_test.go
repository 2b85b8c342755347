package vsphere

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
	"banlieue.io/banlieue/internal/provider/vsphere/vcsimtest"
	"banlieue.io/banlieue/internal/testenv"
)

// simSuite is the real API server and an in-process vcsim whose TLS is verified against its own
// CA, with a namespace holding the Provider's Secret and CA ConfigMap and a vsphere Provider.
type simSuite struct {
	env *testenv.Env
	sim *vcsimtest.Sim
	mgr ctrl.Manager
}

// startSimSuite starts the suite and a manager running as the provider's account: the shipped
// ClusterRole and, as the operator grants them per Provider, get on its Secret, its CA and the
// Secrets named in secrets, by name. capabilities are the Provider's.
func startSimSuite(ctx context.Context, t *testing.T, ns, provider string, capabilities banlieuev1.ProviderCapabilities, secrets ...string) *simSuite {
	env := testenv.Start(t)
	sim := vcsimtest.Start(t)
	env.Create(ctx, t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	env.Create(ctx, t, sim.ProviderObjects(ns, provider, capabilities)...)

	sa := "banlieue-provider-vsphere-" + provider
	account := testenv.ServiceAccountUser(ns, sa)
	role, _ := testenv.GeneratedRoles(t, "config/rbac/provider-vsphere/role.yaml")
	subjects := []rbacv1.Subject{{Kind: "ServiceAccount", Name: sa, Namespace: ns}}
	env.Create(ctx, t, role, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "vsphere-provider-" + ns},
		RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name}, Subjects: subjects},
		&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "vsphere-provider", Namespace: ns}, Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get"}, ResourceNames: append([]string{"vc-creds"}, secrets...)},
			{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get"}, ResourceNames: []string{"vc-ca"}}}},
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "vsphere-provider", Namespace: ns},
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "vsphere-provider"}, Subjects: subjects})
	mgr := testenv.NewManagerWith(t, testenv.Impersonating(env.Config, account), testenv.ManagerOptions())
	return &simSuite{env: env, sim: sim, mgr: mgr}
}
