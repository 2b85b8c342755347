package controller

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	infrav1 "banlieue.io/banlieue/api/infrastructure/v1alpha1"
	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
	"banlieue.io/banlieue/internal/testenv"
)

const (
	sharedNS       = "banlieue-system"
	sharedProvName = "lab"
	labLabel       = "banlieue.io/lab"
	tenantUser     = "alice@team-a"
	controllerUser = "banlieue-controller"
)

// A cluster admin registers one host in banlieue-system and shares it with the namespaces
// labelled banlieue.io/lab=allowed. The controller runs as its installed ClusterRole
// (config/rbac/controller/role.yaml); team-a's VM is created by a tenant holding only the
// built-in edit role (and the right to write VirtualMachines) in team-a, who cannot read the
// Provider's credentials.
func TestSharedProviderAgainstAPIServer(t *testing.T) {
	env := testenv.Start(t)
	ctx := context.Background()
	s := &suite{c: env.Client}

	env.BindInstalledClusterRole(ctx, t, "config/rbac/controller/role.yaml", controllerUser)
	mgr := testenv.NewManagerWith(t, testenv.Impersonating(env.Config, controllerUser), testenv.ManagerOptions())
	if err := Setup(mgr, Options{}); err != nil {
		t.Fatal(err)
	}
	testenv.StartManager(t, mgr)

	// Admission: the selector is required iff from is Selector.
	for _, a := range []banlieuev1.AllowedNamespaces{
		{From: banlieuev1.NamespacesFromSelector},
		{From: banlieuev1.NamespacesFromAll, Selector: &banlieuev1.LabelSelector{}},
	} {
		s.namespaceOnce(ctx, t, sharedNS, nil)
		p := &banlieuev1.Provider{ObjectMeta: metav1.ObjectMeta{Namespace: sharedNS, Name: "refused"}, Spec: banlieuev1.ProviderSpec{
			ProviderClassRef: banlieuev1.LocalObjectReference{Name: "libvirt"},
			Connection: banlieuev1.ProviderConnection{Endpoint: "qemu+tls://h/system",
				CredentialsRef: banlieuev1.LocalObjectReference{Name: "c"}},
			AllowedNamespaces: &a,
		}}
		if err := env.Client.Create(ctx, p); !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "allowedNamespaces.selector is required when from is Selector") {
			t.Errorf("creating a Provider with allowedNamespaces %+v = %v; want the CEL refusal", a, err)
		}
	}

	s.namespaceOnce(ctx, t, "team-a", map[string]string{labLabel: "allowed"})
	s.namespaceOnce(ctx, t, "team-b", nil)
	s.create(ctx, t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: sharedNS, Name: "libvirt-edge-creds"},
		Data: map[string][]byte{"tls.key": []byte("not a real key")}})
	s.provider(ctx, t, sharedNS, sharedProvName, "libvirt")
	s.patchProvider(ctx, t, sharedNS, sharedProvName, func(p *banlieuev1.Provider) {
		p.Spec.AllowedNamespaces = &banlieuev1.AllowedNamespaces{From: banlieuev1.NamespacesFromSelector,
			Selector: &banlieuev1.LabelSelector{MatchLabels: map[string]string{labLabel: "allowed"}}}
	})
	s.create(ctx, t, guideClass("shared-small", false))
	s.image(ctx, t, "shared-ubuntu", banlieuev1.InstallImmediate, readyRowIn(sharedNS, sharedProvName))

	tenant := tenantClient(ctx, t, env, "team-a")
	t.Run("the tenant cannot read the shared Provider's credentials, but can its own namespace's Secrets", func(t *testing.T) {
		err := tenant.Get(ctx, client.ObjectKey{Namespace: sharedNS, Name: "libvirt-edge-creds"}, &corev1.Secret{})
		if !apierrors.IsForbidden(err) {
			t.Errorf("tenant reading %s/libvirt-edge-creds = %v; want Forbidden", sharedNS, err)
		}
		if err := tenant.List(ctx, &corev1.SecretList{}, client.InNamespace("team-a")); err != nil {
			t.Errorf("tenant listing Secrets of team-a = %v; want allowed (edit)", err)
		}
		err = tenant.Get(ctx, client.ObjectKey{Namespace: sharedNS, Name: sharedProvName}, &banlieuev1.Provider{})
		if !apierrors.IsForbidden(err) {
			t.Errorf("tenant reading Provider %s/%s = %v; want Forbidden", sharedNS, sharedProvName, err)
		}
	})

	t.Run("team-a, admitted by label, is scheduled onto banlieue-system's Provider", func(t *testing.T) {
		if err := tenant.Create(ctx, guideVM("team-a", "web-01", "shared-small", "shared-ubuntu", nil)); err != nil {
			t.Fatalf("tenant creating its VM: %v", err)
		}
		s.waitVM(ctx, t, "team-a", "web-01", "Scheduled=True on banlieue-system/lab", func(vm *banlieuev1.VirtualMachine) bool {
			return hasCondition(vm.Status.Conditions, banlieuev1.ConditionScheduled, metav1.ConditionTrue, banlieuev1.ReasonScheduled) &&
				vm.Status.Scheduled != nil && vm.Status.Scheduled.ProviderName == sharedProvName && vm.Status.Scheduled.ProviderNamespace == sharedNS
		})
		m := s.waitMachine(ctx, t, "team-a", "web-01")
		if m.Spec.ProviderRef == nil || *m.Spec.ProviderRef != (infrav1.ProviderReference{Name: sharedProvName, Namespace: sharedNS}) || m.Spec.DomainName != "team-a-web-01" ||
			m.Spec.BootSource.Volume != "ubuntu-2404.raw" {
			t.Errorf("LibvirtMachine spec = %+v", m.Spec)
		}
		// The shared Provider is in use by a machine of another namespace.
		s.waitProvider(ctx, t, sharedNS, sharedProvName, "provider-in-use finalizer", func(p *banlieuev1.Provider) bool {
			return controllerutil.ContainsFinalizer(p, banlieuev1.FinalizerProviderInUse)
		})
	})

	t.Run("team-b, not admitted, is told which Provider refuses it and by which rule", func(t *testing.T) {
		s.create(ctx, t, guideVM("team-b", "web-01", "shared-small", "shared-ubuntu", nil))
		vm := s.waitVM(ctx, t, "team-b", "web-01", "Scheduled=False NamespaceNotAllowed", func(vm *banlieuev1.VirtualMachine) bool {
			return hasCondition(vm.Status.Conditions, banlieuev1.ConditionScheduled, metav1.ConditionFalse, banlieuev1.ReasonNamespaceNotAllowed)
		})
		msg := meta.FindStatusCondition(vm.Status.Conditions, banlieuev1.ConditionScheduled).Message
		for _, want := range []string{"Provider banlieue-system/lab refuses namespace team-b", `allowedNamespaces.selector "banlieue.io/lab=allowed"`} {
			if !strings.Contains(msg, want) {
				t.Errorf("Scheduled message %q lacks %q", msg, want)
			}
		}
		s.expectNoMachine(ctx, t, "team-b", "web-01")

		// Labelling the namespace is enough: the Namespace watch wakes its VMs.
		var ns corev1.Namespace
		if err := env.Client.Get(ctx, client.ObjectKey{Name: "team-b"}, &ns); err != nil {
			t.Fatal(err)
		}
		ns.Labels = map[string]string{labLabel: "allowed"}
		if err := env.Client.Update(ctx, &ns); err != nil {
			t.Fatal(err)
		}
		s.waitVM(ctx, t, "team-b", "web-01", "Scheduled=True after the label", func(vm *banlieuev1.VirtualMachine) bool {
			return hasCondition(vm.Status.Conditions, banlieuev1.ConditionScheduled, metav1.ConditionTrue, banlieuev1.ReasonScheduled) &&
				vm.Status.Scheduled != nil && vm.Status.Scheduled.ProviderNamespace == sharedNS
		})
	})
}

// namespaceOnce creates namespace name with labels unless it exists.
func (s *suite) namespaceOnce(ctx context.Context, t *testing.T, name string, labels map[string]string) {
	t.Helper()
	err := s.c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}

// tenantClient is a client of tenantUser, who holds the built-in edit rules in ns and a
// Role to write VirtualMachines there (edit has no banlieue.io rules of its own).
func tenantClient(ctx context.Context, t *testing.T, env *testenv.Env, ns string) client.Client {
	t.Helper()
	subject := []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: "User", Name: tenantUser}}
	// envtest runs no controller-manager, so the aggregated edit ClusterRole stays empty; its
	// two bootstrap parts carry the rules it aggregates.
	env.Create(ctx, t,
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "tenant-edit"},
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "system:aggregate-to-edit"}, Subjects: subject},
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "tenant-view"},
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "system:aggregate-to-view"}, Subjects: subject},
		&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "tenant-vms"}, Rules: []rbacv1.PolicyRule{{
			APIGroups: []string{"banlieue.io"}, Resources: []string{"virtualmachines"}, Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"}}}},
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "tenant-vms"},
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "tenant-vms"}, Subjects: subject},
	)
	c := testenv.ClientAs(t, env.Config, tenantUser)
	return c
}
