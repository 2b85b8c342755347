package imagebuilder

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
	"banlieue.io/banlieue/internal/imagebuilder/build"
	"banlieue.io/banlieue/internal/jobbounds"
	"banlieue.io/banlieue/internal/jobimage"
	"banlieue.io/banlieue/internal/testenv"
)

// The build namespace enforces `restricted` (config/namespaces): a build Job's pod must pass
// it, and a privileged pod there must not.
func TestBuildJobPassesRestrictedPodSecurity(t *testing.T) {
	env := testenv.Start(t)
	ctx := context.Background()
	env.CreateRestrictedNamespace(ctx, t, "banlieue-imagebuild")
	job := buildJob(jobSpec{Image: testImage(), Source: banlieuev1.ImageSource{ImportFrom: "https://a/b.img"},
		Kind: banlieuev1.ArtifactCloudImage, Namespace: "banlieue-imagebuild", ContainerImage: "banlieue:v1",
		PVC: "banlieue-artifacts", Limits: build.DefaultLimits(), Bounds: jobbounds.DefaultBuild(),
		// The CA ConfigMap volume of --build-ca-configmap and the pull settings are part of it.
		CAConfigMap: "mirror-ca", Pull: jobimage.Pull{Policy: corev1.PullNever, Secrets: []string{"regcred"}}})
	if err := env.AdmitPod(ctx, job.Namespace, job.Spec.Template.Spec); err != nil {
		t.Errorf("the build pod is refused: %v", err)
	}
	if err := env.AdmitPod(ctx, job.Namespace, testenv.Privileged(job.Spec.Template.Spec)); err == nil ||
		!strings.Contains(err.Error(), `violates PodSecurity "restricted:latest"`) {
		t.Errorf("a privileged pod in the build namespace: %v, want a PodSecurity refusal", err)
	}
}
