package imagebuilder

import (
	"testing"

	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
	"banlieue.io/banlieue/internal/jobbounds"
	"banlieue.io/banlieue/internal/testenv"
)

// TestBuildJobNetworkPolicy: a build Job's pod is isolated both ways by the install's policies
// of the build namespace (config/networkpolicy/imagebuild.yaml), nothing may connect to it, and
// it may reach DNS and HTTP and HTTPS sources but not the API server: it has no token.
func TestBuildJobNetworkPolicy(t *testing.T) {
	const ns = "banlieue-imagebuild"
	policies := testenv.NetworkPolicyFiles(t, ns, "config/networkpolicy/imagebuild.yaml")
	job := buildJob(jobSpec{Image: testImage(), Source: banlieuev1.ImageSource{ImportFrom: "https://a/b.img"}, Kind: banlieuev1.ArtifactCloudImage,
		Namespace: ns, ContainerImage: "banlieue:v1", PVC: "banlieue-artifacts", Bounds: jobbounds.DefaultBuild()})
	testenv.CheckJobPod(t, policies, ns, job.Spec.Template, []string{"banlieue-default-deny", "banlieue-build-jobs"},
		[]string{"TCP/443", "TCP/53", "TCP/80", "UDP/53"})
	if job.Spec.Template.Spec.AutomountServiceAccountToken == nil || *job.Spec.Template.Spec.AutomountServiceAccountToken {
		t.Error("the build pod mounts a token: it would need the API server's egress")
	}
}
