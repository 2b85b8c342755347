package imagebuilder

import (
	"slices"
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
	problems, access := testenv.NetworkPolicyProblems(policies, ns, job.Spec.Template)
	for _, p := range problems {
		t.Error(p)
	}
	if !slices.Equal(access.Policies, []string{"banlieue-default-deny", "banlieue-build-jobs"}) {
		t.Errorf("selected by %v", access.Policies)
	}
	if len(access.IngressPorts) != 0 {
		t.Errorf("ingress allowed on %v", access.IngressPorts)
	}
	if want := []string{"TCP/443", "TCP/53", "TCP/80", "UDP/53"}; !slices.Equal(access.EgressPorts, want) {
		t.Errorf("egress %v, want %v", access.EgressPorts, want)
	}
	if job.Spec.Template.Spec.AutomountServiceAccountToken == nil || *job.Spec.Template.Spec.AutomountServiceAccountToken {
		t.Error("the build pod mounts a token: it would need the API server's egress")
	}
}
