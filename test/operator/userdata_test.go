package operator

import (
	"context"
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

// userDataMachine is a LibvirtMachine of Provider provider with a user-data reference named ref.
func userDataMachine(ns, name, providerName, ref string) *infrav1.LibvirtMachine {
	return &infrav1.LibvirtMachine{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: infrav1.LibvirtMachineSpec{
			ProviderRef: &infrav1.ProviderReference{Name: providerName},
			Pool:        "default", DomainName: ns + "-" + name,
			BootSource: infrav1.BootSource{Kind: infrav1.BootBackingVolume, Volume: "img.raw"},
			VCPUs:      1, MemoryMiB: 128, Firmware: banlieuev1.FirmwareBIOS,
			Disks:             []infrav1.LibvirtDisk{{Name: "os", SizeGiB: 1}},
			UserDataSecretRef: &banlieuev1.LocalObjectReference{Name: ref},
			UserDataHash:      userdata.Hash([]byte("salt"), []byte("#cloud-config\n")),
		},
	}
}

// testUserDataGrants: the provider's Role lets it get the per-machine user-data Secret of each
// of its machines, by the name derived from the machine (never the one the spec writes), and
// nothing else; a machine's deletion takes the grant back.
func testUserDataGrants(ctx context.Context, t *testing.T, env *testenv.Env, admin client.Client) {
	sa := as(t, env.Config, systemNs, workload)
	mine := userdata.SecretName("web-ud")
	others := userdata.SecretName("other-ud")
	for _, obj := range []client.Object{
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: mine, Namespace: systemNs}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: others, Namespace: systemNs}},
		userDataMachine(systemNs, "web-ud", provider, mine),
		// Another Provider's machine: its Secret is that provider's to read.
		userDataMachine(systemNs, "other-ud", "other-host", others),
		// A machine of this Provider whose spec names someone else's Secret.
		userDataMachine(systemNs, "sneaky-ud", provider, "someone-elses"),
	} {
		if err := admin.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	get := func(name string) error {
		return sa.Get(ctx, client.ObjectKey{Namespace: systemNs, Name: name}, &corev1.Secret{})
	}
	testenv.Eventually(t, 30*time.Second, "the provider may get its machine's user-data Secret", func() error { return get(mine) })
	testenv.Forbidden(t, "provider reads another Provider's machine's user-data Secret", get(others))
	testenv.Forbidden(t, "provider reads a Secret its machine's spec names", get("someone-elses"))
	testenv.Forbidden(t, "provider lists Secrets", sa.List(ctx, &corev1.SecretList{}, client.InNamespace(systemNs)))

	if err := admin.Delete(ctx, userDataMachine(systemNs, "web-ud", provider, mine)); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 30*time.Second, "the grant goes with the machine", func() error {
		if err := get(mine); !apierrors.IsForbidden(err) {
			return testenv.Unmet(false, "get: "+errString(err))
		}
		return nil
	})
	for _, name := range []string{"other-ud", "sneaky-ud"} {
		if err := admin.Delete(ctx, userDataMachine(systemNs, name, provider, "")); err != nil {
			t.Fatal(err)
		}
	}
}

// testTenantUserData: a tenant with namespace edit in team-b cannot read team-a's per-machine
// user-data Secret, nor team-a's machines, whatever banlieue copied into them.
func testTenantUserData(ctx context.Context, t *testing.T, env *testenv.Env, admin client.Client) {
	for _, ns := range []string{"team-a", "team-b"} {
		if err := admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			t.Fatal(err)
		}
	}
	// envtest runs no controller-manager, so the bootstrap ClusterRole edit is never aggregated:
	// tenant-edit is what aggregation would make of it, the bootstrap pieces edit and view
	// aggregate (system:aggregate-to-edit and -to-view).
	tenantEdit := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "tenant-edit"}}
	for _, piece := range []string{"system:aggregate-to-edit", "system:aggregate-to-view"} {
		var cr rbacv1.ClusterRole
		if err := admin.Get(ctx, client.ObjectKey{Name: piece}, &cr); err != nil {
			t.Fatal(err)
		}
		tenantEdit.Rules = append(tenantEdit.Rules, cr.Rules...)
	}
	if err := admin.Create(ctx, tenantEdit); err != nil {
		t.Fatal(err)
	}
	name := userdata.SecretName("web-01")
	for _, obj := range []client.Object{
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "team-a"}, Data: map[string][]byte{userdata.KeyUserData: []byte("#cloud-config\n")}},
		userDataMachine("team-a", "web-01", "host", name),
		// Namespace edit, bound in team-b only: the tenant of the issue.
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "bob-edit", Namespace: "team-b"},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "tenant-edit"},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "bob"}}},
	} {
		if err := admin.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	bob := testenv.ClientAs(t, env.Config, "bob")
	// edit lets bob read Secrets in his own namespace: the binding is in force.
	testenv.Eventually(t, 10*time.Second, "bob's edit in team-b", func() error {
		return bob.List(ctx, &corev1.SecretList{}, client.InNamespace("team-b"))
	})
	testenv.Forbidden(t, "team-b's tenant reads team-a's user-data Secret", bob.Get(ctx, client.ObjectKey{Namespace: "team-a", Name: name}, &corev1.Secret{}))
	testenv.Forbidden(t, "team-b's tenant lists team-a's Secrets", bob.List(ctx, &corev1.SecretList{}, client.InNamespace("team-a")))
	testenv.Forbidden(t, "team-b's tenant reads team-a's LibvirtMachine", bob.Get(ctx, client.ObjectKey{Namespace: "team-a", Name: "web-01"}, &infrav1.LibvirtMachine{}))
}

func errString(err error) string {
	if err == nil {
		return "allowed"
	}
	return err.Error()
}
