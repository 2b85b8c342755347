package controller

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
	"banlieue.io/banlieue/internal/testenv"
	"banlieue.io/banlieue/internal/userdata"
)

// TestControllerSecretsAdmission runs the controller as its installed account (the
// ServiceAccount banlieue-system/banlieue-controller with config/rbac/controller/role.yaml) under
// config/admission/controller-secrets.yaml: the per-machine user-data Secret is written and
// deleted as before, while any other Secret can be neither created, patched, taken over nor
// deleted by that account (docs/security.md, "The controller writes only its per-machine
// user-data Secrets").
func TestControllerSecretsAdmission(t *testing.T) {
	env := testenv.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	user := testenv.ServiceAccountUser("banlieue-system", "banlieue-controller")
	env.BindInstalledClusterRole(ctx, t, "config/rbac/controller/role.yaml", user)
	testenv.InstallAdmission(ctx, t, env.Client, "controller-secrets.yaml")
	ctrl := testenv.ClientAs(t, env.Config, user)

	const ns = "team-s"
	s := &suite{c: env.Client}
	s.namespace(ctx, t, ns)
	// The API server admits with the policy once its informer has it.
	testenv.Eventually(t, time.Minute, "the policy refuses the controller an unlabelled Secret", func() error {
		err := ctrl.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "userdata-probe"}}, client.DryRunAll)
		return testenv.Unmet(apierrors.IsForbidden(err), "create: "+errText(err))
	})

	mgr := testenv.NewManagerWith(t, testenv.Impersonating(env.Config, user), testenv.ManagerOptions())
	if err := Setup(mgr, Options{}); err != nil {
		t.Fatal(err)
	}
	testenv.StartManager(t, mgr)
	s.create(ctx, t, guideClass("small", false))
	s.provider(ctx, t, ns, "host", "libvirt")
	s.image(ctx, t, "img-s", banlieuev1.InstallImmediate, readyRowIn(ns, "host"))

	t.Run("the controller's own user-data Secret is written and deleted", func(t *testing.T) {
		s.create(ctx, t, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "ud", Namespace: ns}, Data: map[string]string{"user-data": "#cloud-config\n"}})
		s.create(ctx, t, guideVM(ns, "web-01", "small", "img-s", &banlieuev1.UserDataSource{ConfigMapRef: &banlieuev1.KeySelector{Name: "ud"}}))
		m := s.waitMachine(ctx, t, ns, "web-01")
		s.expectUserDataSecret(ctx, t, m, "#cloud-config\n")
		s.patchVM(ctx, t, ns, "web-01", func(vm *banlieuev1.VirtualMachine) { vm.Spec.UserData = nil })
		s.expectNoUserDataSecret(ctx, t, ns, "web-01")
	})

	t.Run("any other Secret is refused", func(t *testing.T) {
		// A user's Secrets: an application's, and one under a per-machine name.
		app := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "db-password"}, Data: map[string][]byte{"password": []byte("x")}}
		squatter := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: userdata.SecretName("web-02")}, Data: map[string][]byte{"mine": []byte("x")}}
		s.create(ctx, t, app)
		s.create(ctx, t, squatter)
		labels := client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"banlieue.io/user-data":"machine","app.kubernetes.io/managed-by":"banlieue-controller"}}}`))
		for _, victim := range []*corev1.Secret{app, squatter} {
			testenv.Forbidden(t, "controller relabels "+victim.Name, ctrl.Patch(ctx, victim.DeepCopy(), labels))
			testenv.Forbidden(t, "controller deletes "+victim.Name, ctrl.Delete(ctx, victim.DeepCopy()))
		}
		// What it may create is its own shape only; a service-account token Secret would have the
		// token controller mint a token for any account of the namespace.
		owned := func(name string, typ corev1.SecretType) *corev1.Secret {
			sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name,
				Labels: userdata.Labels("web-03"),
				OwnerReferences: []metav1.OwnerReference{{APIVersion: "infrastructure.banlieue.io/v1alpha1", Kind: "LibvirtMachine",
					Name: "web-03", UID: "00000000-0000-0000-0000-000000000003", Controller: ptr.To(true)}}}, Type: typ}
			if typ == corev1.SecretTypeServiceAccountToken {
				sec.Annotations = map[string]string{corev1.ServiceAccountNameKey: "default"}
			}
			return sec
		}
		testenv.Allowed(t, "controller creates a Secret of its own shape (dry run)", ctrl.Create(ctx, owned(userdata.SecretName("web-03"), corev1.SecretTypeOpaque), client.DryRunAll))
		err := ctrl.Create(ctx, owned(userdata.SecretName("web-03"), corev1.SecretTypeServiceAccountToken), client.DryRunAll)
		testenv.Forbidden(t, "controller creates a service-account token Secret", err)
		if err != nil && !strings.Contains(err.Error(), "banlieue-controller may write only its per-machine user-data Secrets") {
			t.Errorf("refusal %q does not name the policy's rule", err)
		}
		testenv.Forbidden(t, "controller creates a Secret named otherwise", ctrl.Create(ctx, owned("db-password-2", corev1.SecretTypeOpaque), client.DryRunAll))
		unowned := owned(userdata.SecretName("web-04"), corev1.SecretTypeOpaque)
		unowned.OwnerReferences = nil
		testenv.Forbidden(t, "controller creates a Secret no machine controls", ctrl.Create(ctx, unowned, client.DryRunAll))
		testenv.Forbidden(t, "controller lists Secrets", ctrl.List(ctx, &corev1.SecretList{}, client.InNamespace(ns)))
		for _, victim := range []*corev1.Secret{app, squatter} {
			var got corev1.Secret
			if err := env.Client.Get(ctx, client.ObjectKeyFromObject(victim), &got); err != nil {
				t.Fatal(err)
			}
			if len(got.Labels) != 0 || string(got.Data[keyOf(victim)]) != "x" {
				t.Errorf("Secret %s changed: %+v", victim.Name, got)
			}
		}
	})
}

func keyOf(s *corev1.Secret) string {
	for k := range s.Data {
		return k
	}
	return ""
}

func errText(err error) string {
	if err == nil {
		return "allowed"
	}
	return err.Error()
}
