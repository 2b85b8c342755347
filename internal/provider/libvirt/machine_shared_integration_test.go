package libvirt

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "banlieue.io/banlieue/api/infrastructure/v1alpha1"
	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
	"banlieue.io/banlieue/pkg/libvirt"
)

// testSharedProvider runs a machine of another namespace on the suite's Provider once that
// Provider admits the namespace by label: refused (nothing defined on the host) before the
// label, a running domain after it, with the namespace's own domain name.
func (s *machineSuite) testSharedProvider(ctx context.Context, t *testing.T) {
	const ns, label = "team-shared", "banlieue.io/lab"
	s.env.Create(ctx, t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	s.setAllowedNamespaces(ctx, t, &banlieuev1.AllowedNamespaces{From: banlieuev1.NamespacesFromSelector,
		Selector: &banlieuev1.LabelSelector{MatchLabels: map[string]string{label: "allowed"}}})
	t.Cleanup(func() { s.setAllowedNamespaces(context.Background(), t, nil) })

	m := s.machine(ns, "web-03")
	m.Spec.ProviderRef.Namespace = testNamespace
	if err := s.env.Client.Create(ctx, m); err != nil {
		t.Fatal(err)
	}
	c := s.waitReason(ctx, t, m, banlieuev1.ReasonNamespaceNotAllowed)
	if !strings.Contains(c.Message, "does not admit namespace "+ns) {
		t.Errorf("Ready message = %q", c.Message)
	}
	if _, err := s.host.DomainLookupByName(ctx, m.Spec.DomainName); !libvirt.IsNotFound(err) {
		t.Errorf("domain %s defined for a refused machine: %v", m.Spec.DomainName, err)
	}

	var nsObj corev1.Namespace
	if err := s.env.Client.Get(ctx, client.ObjectKey{Name: ns}, &nsObj); err != nil {
		t.Fatal(err)
	}
	nsObj.Labels = map[string]string{label: "allowed"}
	if err := s.env.Client.Update(ctx, &nsObj); err != nil {
		t.Fatal(err)
	}
	got := s.waitMachine(ctx, t, client.ObjectKeyFromObject(m), 90*time.Second, machineReady)
	if _, err := s.host.DomainLookupByName(ctx, "team-shared-web-03"); err != nil {
		t.Errorf("domain team-shared-web-03: %v", err)
	}
	if !strings.HasPrefix(got.Spec.ProviderID, "libvirt://lab/") {
		t.Errorf("providerID = %q", got.Spec.ProviderID)
	}
	if err := s.env.Client.Delete(ctx, got); err != nil {
		t.Fatal(err)
	}
	s.waitGone(ctx, t, client.ObjectKeyFromObject(got))
	if r := meta.FindStatusCondition(got.Status.Conditions, banlieuev1.ConditionReady); r == nil || r.Reason != infrav1.ReasonDomainRunning {
		t.Errorf("Ready = %+v", r)
	}
}

func (s *machineSuite) setAllowedNamespaces(ctx context.Context, t *testing.T, a *banlieuev1.AllowedNamespaces) {
	t.Helper()
	var p banlieuev1.Provider
	if err := s.env.Client.Get(ctx, client.ObjectKey{Namespace: testNamespace, Name: "lab"}, &p); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(p.DeepCopy())
	p.Spec.AllowedNamespaces = a
	if err := s.env.Client.Patch(ctx, &p, patch); err != nil {
		t.Fatal(err)
	}
}
