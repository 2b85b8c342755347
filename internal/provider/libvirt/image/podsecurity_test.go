package image

import (
	"context"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
	"banlieue.io/banlieue/internal/jobbounds"
	"banlieue.io/banlieue/internal/testenv"
)

// The build namespace enforces `restricted` (config/namespaces): an import Job's pod must pass
// it, and a privileged pod there must not.
func TestImportJobPassesRestrictedPodSecurity(t *testing.T) {
	env := testenv.Start(t)
	ctx := context.Background()
	env.CreateRestrictedNamespace(ctx, t, "banlieue-imagebuild")
	img := &banlieuev1.VMImage{ObjectMeta: metav1.ObjectMeta{Name: "kairos", UID: "u1"}}
	img.Status.BuildArtifact = &banlieuev1.BuildArtifact{Phase: banlieuev1.BuildReady, File: "kairos.raw",
		Checksum: "sha256:ab", PVCRef: &banlieuev1.LocalObjectReference{Name: "banlieue-artifacts"}}
	p := &banlieuev1.Provider{ObjectMeta: metav1.ObjectMeta{Name: "host-7", Namespace: "banlieue-system"}}
	job := importJob(importJobSpec{Image: img, Provider: p, Pool: "default", Volume: "kairos-00ab.raw", Namespace: "banlieue-imagebuild",
		ContainerImage: "banlieue:v1", ServiceAccount: "banlieue-import", Bounds: jobbounds.DefaultImport()})
	if err := env.AdmitPod(ctx, job.Namespace, job.Spec.Template.Spec); err != nil {
		t.Errorf("the import pod is refused: %v", err)
	}
	if err := env.AdmitPod(ctx, job.Namespace, testenv.Privileged(job.Spec.Template.Spec)); err == nil ||
		!strings.Contains(err.Error(), `violates PodSecurity "restricted:latest"`) {
		t.Errorf("a privileged pod in the build namespace: %v, want a PodSecurity refusal", err)
	}
}
