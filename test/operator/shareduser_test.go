package operator

import (
	"context"
	"reflect"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "banlieue.io/banlieue/api/infrastructure/v1alpha1"
	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
	"banlieue.io/banlieue/internal/testenv"
	"banlieue.io/banlieue/internal/userdata"
)

// TestSharedProviderUserData: a shared Provider's machine with user-data in an admitted tenant
// namespace has its Secret granted to that Provider's account in the tenant namespace, by name
// and nothing else of the namespace; a same-named Provider of another namespace gets none of
// it, nor does a namespace the Provider does not admit; the grant goes with the machine, and
// the tenant namespace's Role and RoleBinding go with the Provider. The operator runs as its
// installed account, so every grant it writes there is one it may write.
func TestSharedProviderUserData(t *testing.T) {
	env := testenv.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	admin := env.Client

	for _, ns := range []*corev1.Namespace{
		{ObjectMeta: metav1.ObjectMeta{Name: systemNs}},
		{ObjectMeta: metav1.ObjectMeta{Name: buildNs}},
		{ObjectMeta: metav1.ObjectMeta{Name: "team-a", Labels: map[string]string{"banlieue.io/lab": "allowed"}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "team-b"}},
		{ObjectMeta: metav1.ObjectMeta{Name: "team-c"}},
		{ObjectMeta: metav1.ObjectMeta{Name: "team-d", Labels: map[string]string{"banlieue.io/lab": "allowed"}}},
	} {
		if err := admin.Create(ctx, ns); err != nil {
			t.Fatal(err)
		}
	}
	startInstalledOperator(ctx, t, env, admin)

	lab := func(ns string, allowed *banlieuev1.AllowedNamespaces) *banlieuev1.Provider {
		var p banlieuev1.Provider
		repoFile(t, "examples/02-provider-libvirt-edge.yaml", &p)
		p.Name, p.Namespace, p.Spec.AllowedNamespaces = "lab", ns, allowed
		return &p
	}
	shared := lab(systemNs, &banlieuev1.AllowedNamespaces{From: banlieuev1.NamespacesFromSelector,
		Selector: &banlieuev1.LabelSelector{MatchLabels: map[string]string{"banlieue.io/lab": "allowed"}}})
	sameName := lab("team-b", nil)
	onShared := func(m *infrav1.LibvirtMachine) *infrav1.LibvirtMachine {
		m.Spec.ProviderRef.Namespace = systemNs
		return m
	}
	web, other, outsider := userdata.SecretName("web"), userdata.SecretName("other"), userdata.SecretName("outsider")
	for _, obj := range []client.Object{
		shared, sameName,
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: web, Namespace: "team-a"}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "team-a-own", Namespace: "team-a"}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: other, Namespace: "team-a"}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: outsider, Namespace: "team-c"}},
		onShared(userDataMachine("team-a", "web", "lab", web)),
		// team-a's machine on a Provider "lab" of its own namespace, which does not exist: not
		// the shared Provider's, and not team-b's lab either.
		userDataMachine("team-a", "other", "lab", other),
		// team-c is not admitted: the shared Provider refuses its machine, so it gets no grant.
		onShared(userDataMachine("team-c", "outsider", "lab", outsider)),
	} {
		if err := admin.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	sharedSA := as(t, env.Config, systemNs, workloadOf(ctx, t, admin, shared))
	sameNameSA := as(t, env.Config, "team-b", workloadOf(ctx, t, admin, sameName))
	get := func(c client.Client, ns, name string) error {
		return c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &corev1.Secret{})
	}

	testenv.Eventually(t, 30*time.Second, "the shared provider may get its team-a machine's user-data Secret", func() error {
		return get(sharedSA, "team-a", web)
	})
	testenv.Forbidden(t, "shared provider reads another team-a Secret", get(sharedSA, "team-a", "team-a-own"))
	testenv.Forbidden(t, "shared provider reads team-a's Secret of a machine on another Provider", get(sharedSA, "team-a", other))
	testenv.Forbidden(t, "shared provider lists team-a's Secrets", sharedSA.List(ctx, &corev1.SecretList{}, client.InNamespace("team-a")))
	testenv.Forbidden(t, "shared provider reads a machine's Secret in a namespace it does not admit", get(sharedSA, "team-c", outsider))
	testenv.Forbidden(t, "same-named Provider team-b/lab reads team-a's machine Secret", get(sameNameSA, "team-a", web))
	testenv.Forbidden(t, "same-named Provider team-b/lab reads team-a's other machine Secret", get(sameNameSA, "team-a", other))
	if n := grantsIn(ctx, t, admin, "team-c"); n != 0 {
		t.Errorf("%d operator Roles in team-c, which no Provider admits", n)
	}

	t.Run("a grant's name taken in a tenant namespace is left alone and reported", func(t *testing.T) {
		// team-d's admin holds the name the operator would give the grant there.
		taken := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: workloadOf(ctx, t, admin, shared) + "-userdata", Namespace: "team-d"},
			Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get"}}}}
		tenants := userdata.SecretName("tenants")
		for _, obj := range []client.Object{taken, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: tenants, Namespace: "team-d"}},
			onShared(userDataMachine("team-d", "tenants", "lab", tenants))} {
			if err := admin.Create(ctx, obj); err != nil {
				t.Fatal(err)
			}
		}
		testenv.Eventually(t, 30*time.Second, "UserDataGrantConflict event", func() error {
			return hasEvent(ctx, admin, systemNs, "lab", banlieuev1.ReasonUserDataGrantConflict, "team-d")
		})
		var got rbacv1.Role
		if err := admin.Get(ctx, client.ObjectKeyFromObject(taken), &got); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got.Rules, taken.Rules) || got.Labels[banlieuev1.LabelManagedBy] != "" {
			t.Errorf("the tenant's Role was taken over: labels %v, rules %+v", got.Labels, got.Rules)
		}
		testenv.Forbidden(t, "shared provider reads team-d's machine Secret through a Role it does not own", get(sharedSA, "team-d", tenants))
	})

	t.Run("the grant goes with the machine", func(t *testing.T) {
		if err := admin.Delete(ctx, userDataMachine("team-a", "web", "lab", "")); err != nil {
			t.Fatal(err)
		}
		testenv.Eventually(t, 30*time.Second, "team-a's grant withdrawn", func() error {
			if err := get(sharedSA, "team-a", web); !apierrors.IsForbidden(err) {
				return testenv.Unmet(false, "get: "+errString(err))
			}
			if n := grantsIn(ctx, t, admin, "team-a"); n != 0 {
				return testenv.Unmet(false, "operator Roles left in team-a")
			}
			return nil
		})
		// Withdrawing a grant is routine, not the pruning of an earlier workload.
		if err := hasEvent(ctx, admin, systemNs, "lab", banlieuev1.ReasonWorkloadPruned, ""); err == nil {
			t.Error("withdrawing team-a's grant was reported as WorkloadPruned")
		}
	})

	t.Run("the tenant namespace's Role and RoleBinding go with the Provider", func(t *testing.T) {
		if err := admin.Create(ctx, onShared(userDataMachine("team-a", "web2", "lab", userdata.SecretName("web2")))); err != nil {
			t.Fatal(err)
		}
		testenv.Eventually(t, 30*time.Second, "team-a's grant for web2", func() error {
			if grantsIn(ctx, t, admin, "team-a") == 0 {
				return testenv.Unmet(false, "no Role in team-a")
			}
			return nil
		})
		if err := admin.Delete(ctx, shared); err != nil {
			t.Fatal(err)
		}
		testenv.Eventually(t, 30*time.Second, "team-a's Role and RoleBinding deleted", func() error {
			var bindings rbacv1.RoleBindingList
			if err := admin.List(ctx, &bindings, client.InNamespace("team-a"), client.MatchingLabels{banlieuev1.LabelManagedBy: "banlieue-operator"}); err != nil {
				return err
			}
			if n := grantsIn(ctx, t, admin, "team-a"); n != 0 || len(bindings.Items) != 0 {
				return testenv.Unmet(false, "operator Roles or RoleBindings left in team-a")
			}
			return nil
		})
	})
}

// workloadOf is the name of p's workload, which its ServiceAccount shares, once the operator
// has reported it.
func workloadOf(ctx context.Context, t *testing.T, c client.Client, p *banlieuev1.Provider) string {
	t.Helper()
	var name string
	testenv.Eventually(t, timeout, "workload of Provider "+p.Namespace+"/"+p.Name, func() error {
		var got banlieuev1.Provider
		if err := c.Get(ctx, client.ObjectKeyFromObject(p), &got); err != nil {
			return err
		}
		if got.Status.Workload == nil || got.Status.Workload.DeploymentName == "" {
			return testenv.Unmet(false, "no status.workload")
		}
		name = got.Status.Workload.DeploymentName
		return nil
	})
	return name
}

// grantsIn counts the operator's Roles in namespace ns.
func grantsIn(ctx context.Context, t *testing.T, c client.Client, ns string) int {
	t.Helper()
	var roles rbacv1.RoleList
	if err := c.List(ctx, &roles, client.InNamespace(ns), client.MatchingLabels{banlieuev1.LabelManagedBy: "banlieue-operator"}); err != nil {
		t.Fatal(err)
	}
	return len(roles.Items)
}
