package libvirt

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
)

// testSharedProviderUserData: a machine of an admitted namespace on the suite's Provider gets
// its user-data from the per-machine Secret in its own namespace, byte for byte (the operator
// grants the provider that Secret there, test/operator TestSharedProviderUserData).
func (s *machineSuite) testSharedProviderUserData(ctx context.Context, t *testing.T) {
	const ns, label = "team-shared-ud", "banlieue.io/lab"
	s.env.Create(ctx, t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: map[string]string{label: "allowed"}}})
	s.setAllowedNamespaces(ctx, t, &banlieuev1.AllowedNamespaces{From: banlieuev1.NamespacesFromSelector,
		Selector: &banlieuev1.LabelSelector{MatchLabels: map[string]string{label: "allowed"}}})
	t.Cleanup(func() { s.setAllowedNamespaces(context.Background(), t, nil) })

	m := s.machine(ns, "web-04")
	m.Spec.ProviderRef.Namespace = testNamespace
	userData := "#cloud-config\nhostname: web-04\n"
	s.createWithUserData(ctx, t, m, userData)
	got := s.waitMachine(ctx, t, client.ObjectKeyFromObject(m), 90*time.Second, machineReady)
	pool, err := s.host.StoragePoolLookupByName(ctx, s.pool)
	if err != nil {
		t.Fatal(err)
	}
	seed, err := s.host.StorageVolLookupByName(ctx, pool, ns+"-web-04-cidata.iso")
	if err != nil {
		t.Fatal(err)
	}
	if _, user := s.readSeed(ctx, t, seed); user != userData {
		t.Errorf("user-data = %q, want %q", user, userData)
	}
	if err := s.env.Client.Delete(ctx, got); err != nil {
		t.Fatal(err)
	}
	s.waitGone(ctx, t, client.ObjectKeyFromObject(got))
}
