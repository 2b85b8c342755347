//go:build capi

package capi

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"banlieue.io/banlieue/internal/testenv"
)

// TestManagerAdmitsAndReconcilesCluster proves the harness: the API server calls the manager's
// webhooks (a Cluster that names no infrastructure, control plane or topology is refused by
// Cluster API's own validation, which no CRD schema holds), and the manager, acting as its
// installed account (banlieue's aggregated rules let it read LibvirtClusters), reconciles a Cluster
// whose LibvirtCluster does not exist yet — its finalizer, its phase and InfrastructureReady
// False, ObjectDoesNotExist, written as Cluster API writes them — and lets it go on delete.
func TestManagerAdmitsAndReconcilesCluster(t *testing.T) {
	ctx, s := newSuite(t)
	ns := "capi-" + testenv.RunID()
	s.env.Create(ctx, t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})

	bare := capiObject("Cluster", ns, "no-refs")
	bare.Object["spec"] = map[string]any{"clusterNetwork": map[string]any{"serviceDomain": "cluster.local"}}
	err := s.env.Client.Create(ctx, bare)
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "one of spec.controlPlaneRef, spec.infrastructureRef or spec.topology must be set") {
		t.Fatalf("a Cluster without refs: want Cluster API's webhook to refuse it, got %v", err)
	}

	cluster := capiObject("Cluster", ns, "waiting")
	cluster.Object["spec"] = map[string]any{
		"infrastructureRef": map[string]any{"apiGroup": "infrastructure.banlieue.io", "kind": "LibvirtCluster", "name": "waiting"},
	}
	s.env.Create(ctx, t, cluster)
	testenv.Eventually(t, 60*time.Second, "Cluster API's finalizer, phase Provisioning and InfrastructureReady False", func() error {
		got, err := s.get(ctx, cluster)
		if err != nil {
			return err
		}
		phase, _, _ := unstructured.NestedString(got.Object, "status", "phase")
		status, reason := condition(got, "InfrastructureReady")
		return testenv.Unmet(slices.Contains(got.GetFinalizers(), "cluster.cluster.x-k8s.io") &&
			phase == "Provisioning" && status == "False" && reason == "ObjectDoesNotExist",
			fmt.Sprintf("finalizers %v phase %s InfrastructureReady %s/%s", got.GetFinalizers(), phase, status, reason))
	})
	if err := s.env.Client.Delete(ctx, cluster); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 60*time.Second, "the Cluster gone (Cluster API removed its finalizer)", func() error {
		_, err := s.get(ctx, cluster)
		return testenv.Unmet(apierrors.IsNotFound(err), fmt.Sprint(err))
	})
}
