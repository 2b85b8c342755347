package operator

import (
	"cmp"
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "banlieue.io/banlieue/api/infrastructure/v1alpha1"
	"banlieue.io/banlieue/internal/capi"
	"banlieue.io/banlieue/internal/testenv"
)

// testBootstrapGrants: for a LibvirtMachine a Cluster API Machine controls, the provider's Role
// lets it get the bootstrap data Secret the Machine names, and only when that is a bootstrap
// data Secret of the Machine's cluster and the Machine is the machine's own (its UID); the
// machine's deletion takes the grant back. Machines are of Cluster API's own CRD.
func testBootstrapGrants(ctx context.Context, t *testing.T, env *testenv.Env, admin client.Client) {
	env.InstallClusterAPICRDs(t, testenv.CAPIMachines)
	sa := as(t, env.Config, systemNs, workload)
	secret := func(name string, typ corev1.SecretType) *corev1.Secret {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: systemNs, Name: name, Labels: map[string]string{capi.LabelClusterName: "c1"}},
			Type: typ, Data: map[string][]byte{capi.KeyBootstrapData: []byte("#cloud-config\n")}}
	}
	for _, s := range []*corev1.Secret{secret("c1-boot", capi.SecretTypeBootstrap), secret("c1-opaque", corev1.SecretTypeOpaque),
		secret("c1-forged", capi.SecretTypeBootstrap)} {
		if err := admin.Create(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	// machine creates a Machine naming dataSecret and its LibvirtMachine on the suite's Provider,
	// controlled by the Machine (by uid, or a forged one).
	machine := func(name, dataSecret string, uid types.UID) *infrav1.LibvirtMachine {
		m := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{
			"clusterName":       "c1",
			"bootstrap":         map[string]any{"dataSecretName": dataSecret},
			"infrastructureRef": map[string]any{"apiGroup": infrav1.GroupVersion.Group, "kind": "LibvirtMachine", "name": name},
		}}}
		m.SetAPIVersion(capi.Group + "/v1beta2")
		m.SetKind("Machine")
		m.SetNamespace(systemNs)
		m.SetName(name)
		if err := admin.Create(ctx, m); err != nil {
			t.Fatal(err)
		}
		lm := userDataMachine(systemNs, name, provider, "")
		lm.Spec.UserDataSecretRef, lm.Spec.UserDataHash = nil, ""
		lm.OwnerReferences = []metav1.OwnerReference{{APIVersion: capi.Group + "/v1beta2", Kind: "Machine", Name: name,
			UID: cmp.Or(uid, m.GetUID()), Controller: ptr.To(true)}}
		if err := admin.Create(ctx, lm); err != nil {
			t.Fatal(err)
		}
		return lm
	}
	mine := machine("capi-boot", "c1-boot", "")
	opaque := machine("capi-opaque", "c1-opaque", "")
	forged := machine("capi-forged", "c1-forged", "00000000-0000-0000-0000-000000000000")
	get := func(name string) error {
		return sa.Get(ctx, client.ObjectKey{Namespace: systemNs, Name: name}, &corev1.Secret{})
	}
	testenv.Eventually(t, 30*time.Second, "the provider may get its Machine's bootstrap data Secret", func() error { return get("c1-boot") })
	testenv.Forbidden(t, "provider reads an Opaque Secret a Machine names", get("c1-opaque"))
	testenv.Forbidden(t, "provider reads the Secret of a Machine that is not its machine's owner", get("c1-forged"))

	if err := admin.Delete(ctx, mine); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 30*time.Second, "the grant goes with the machine", func() error {
		if err := get("c1-boot"); !apierrors.IsForbidden(err) {
			return testenv.Unmet(false, "get: "+errString(err))
		}
		return nil
	})
	for _, m := range []*infrav1.LibvirtMachine{opaque, forged} {
		if err := admin.Delete(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
}
