package controller

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "banlieue.io/banlieue/api/infrastructure/v1alpha1"
	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
	"banlieue.io/banlieue/internal/app"
	"banlieue.io/banlieue/internal/capi"
	"banlieue.io/banlieue/internal/testenv"
)

// TestLibvirtClusterAgainstAPIServer: the controller, as its installed ClusterRole, reports a
// LibvirtCluster's Providers as failure domains, provisions it once the endpoint is set (and
// never unprovisions it), and honours a paused Cluster (Cluster API's own CRD).
func TestLibvirtClusterAgainstAPIServer(t *testing.T) {
	env := testenv.Start(t)
	ctx := context.Background()
	env.InstallClusterAPICRDs(t, testenv.CAPIClusters)
	env.BindInstalledClusterRole(ctx, t, "config/rbac/controller/role.yaml", controllerUser)
	mgr := testenv.NewManagerWith(t, testenv.Impersonating(env.Config, controllerUser), testenv.ManagerOptions())
	if err := Setup(mgr, Options{}); err != nil {
		t.Fatal(err)
	}
	testenv.StartManager(t, mgr)

	const ns = "capi-team"
	env.Create(ctx, t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}},
		&banlieuev1.Provider{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "kvm-1"}, Spec: banlieuev1.ProviderSpec{
			ProviderClassRef: banlieuev1.LocalObjectReference{Name: "libvirt"},
			Connection: banlieuev1.ProviderConnection{Endpoint: "qemu+tls://kvm-1.example/system",
				CredentialsRef: banlieuev1.LocalObjectReference{Name: "c"}}}})
	cluster := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{
		"infrastructureRef": map[string]any{"apiGroup": infrav1.GroupVersion.Group, "kind": "LibvirtCluster", "name": "c1"}}}}
	cluster.SetAPIVersion(capi.Group + "/v1beta2")
	cluster.SetKind("Cluster")
	cluster.SetNamespace(ns)
	cluster.SetName("c1")
	env.Create(ctx, t, cluster)
	lc := &infrav1.LibvirtCluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "c1", OwnerReferences: []metav1.OwnerReference{{
			APIVersion: capi.Group + "/v1beta2", Kind: "Cluster", Name: "c1", UID: cluster.GetUID()}}},
		Spec: infrav1.LibvirtClusterSpec{Providers: []infrav1.ClusterProvider{{Name: "kvm-1"}, {Name: "kvm-2", ControlPlane: ptr.To(false)}}},
	}
	env.Create(ctx, t, lc)
	key := client.ObjectKeyFromObject(lc)
	wait := func(what string, ok func(*infrav1.LibvirtCluster) bool) *infrav1.LibvirtCluster {
		t.Helper()
		var got infrav1.LibvirtCluster
		// A Cluster's pause and unpause are seen on the LibvirtCluster's next requeue, not through a
		// watch (Cluster API's CRD may be absent): the wait outlasts that interval with room for a
		// loaded machine, where exactly the interval once failed the test.
		testenv.Eventually(t, app.RequeueDefault+30*time.Second, what, func() error {
			err := env.Client.Get(ctx, key, &got)
			return testenv.Unmet(err == nil && ok(&got), fmt.Sprintf("%+v (%v)", got.Status, err))
		})
		return &got
	}
	reason := func(lc *infrav1.LibvirtCluster, typ string) string {
		if c := meta.FindStatusCondition(lc.Status.Conditions, typ); c != nil && c.ObservedGeneration == lc.Generation {
			return c.Reason
		}
		return ""
	}
	provisioned := func(lc *infrav1.LibvirtCluster) bool {
		return lc.Status.Initialization != nil && ptr.Deref(lc.Status.Initialization.Provisioned, false)
	}

	got := wait("kvm-2 missing", func(lc *infrav1.LibvirtCluster) bool {
		return reason(lc, banlieuev1.ConditionReady) == infrav1.ReasonProviderNotFound && len(lc.Status.FailureDomains) == 1
	})
	if provisioned(got) || got.Status.FailureDomains[0].Name != "kvm-1" || !ptr.Deref(got.Status.FailureDomains[0].ControlPlane, false) {
		t.Errorf("status %+v", got.Status)
	}
	// The Provider appears: its failure domain follows, without touching the LibvirtCluster.
	env.Create(ctx, t, &banlieuev1.Provider{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "kvm-2"}, Spec: banlieuev1.ProviderSpec{
		ProviderClassRef: banlieuev1.LocalObjectReference{Name: "libvirt"},
		Connection: banlieuev1.ProviderConnection{Endpoint: "qemu+tls://kvm-2.example/system",
			CredentialsRef: banlieuev1.LocalObjectReference{Name: "c"}}}})
	got = wait("waiting for the endpoint", func(lc *infrav1.LibvirtCluster) bool {
		return reason(lc, banlieuev1.ConditionReady) == infrav1.ReasonWaitingForControlPlaneEndpoint && len(lc.Status.FailureDomains) == 2
	})
	if provisioned(got) || ptr.Deref(got.Status.FailureDomains[1].ControlPlane, true) {
		t.Errorf("status %+v", got.Status)
	}
	patch := client.MergeFrom(got.DeepCopy())
	got.Spec.ControlPlaneEndpoint = &infrav1.APIEndpoint{Host: "192.0.2.100", Port: 6443}
	if err := env.Client.Patch(ctx, got, patch); err != nil {
		t.Fatal(err)
	}
	wait("provisioned", func(lc *infrav1.LibvirtCluster) bool {
		return provisioned(lc) && reason(lc, banlieuev1.ConditionReady) == infrav1.ReasonClusterProvisioned &&
			reason(lc, infrav1.ConditionPaused) == infrav1.ReasonNotPaused
	})

	// The Cluster paused: Paused, and a Provider's deletion is not reflected.
	if err := env.Client.Patch(ctx, cluster, client.RawPatch("application/merge-patch+json", []byte(`{"spec":{"paused":true}}`))); err != nil {
		t.Fatal(err)
	}
	got = wait("paused", func(lc *infrav1.LibvirtCluster) bool {
		return reason(lc, infrav1.ConditionPaused) == infrav1.ReasonPaused
	})
	if err := env.Client.Delete(ctx, &banlieuev1.Provider{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "kvm-2"}}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Second)
	if err := env.Client.Get(ctx, key, got); err != nil || len(got.Status.FailureDomains) != 2 {
		t.Errorf("a paused LibvirtCluster's status changed: %+v (%v)", got.Status, err)
	}
	// Unpaused: kvm-2 is gone, yet provisioned stays true (one-way).
	if err := env.Client.Patch(ctx, cluster, client.RawPatch("application/merge-patch+json", []byte(`{"spec":{"paused":false}}`))); err != nil {
		t.Fatal(err)
	}
	got = wait("kvm-2 gone after unpausing", func(lc *infrav1.LibvirtCluster) bool {
		return reason(lc, infrav1.ConditionPaused) == infrav1.ReasonNotPaused && len(lc.Status.FailureDomains) == 1
	})
	if !provisioned(got) {
		t.Errorf("provisioned turned false: %+v", got.Status)
	}
}
