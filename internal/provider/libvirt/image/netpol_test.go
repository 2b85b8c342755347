package image

import (
	"fmt"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
	"banlieue.io/banlieue/internal/testenv"
	"banlieue.io/banlieue/pkg/libvirt"
)

// TestImportJobNetworkPolicy: an import Job's pod is isolated both ways by the install's
// policies of the build namespace (config/networkpolicy/imagebuild.yaml), nothing may connect
// to it, and it may reach the API server (its Provider's credentials), DNS and libvirtd's TLS
// port, and nothing else: the artifact is on the volume.
func TestImportJobNetworkPolicy(t *testing.T) {
	const ns = "banlieue-imagebuild"
	policies := testenv.NetworkPolicyFiles(t, ns, "config/networkpolicy/imagebuild.yaml")
	img := &banlieuev1.VMImage{ObjectMeta: metav1.ObjectMeta{Name: "kairos", UID: "u1"}}
	img.Status.BuildArtifact = &banlieuev1.BuildArtifact{Phase: banlieuev1.BuildReady, File: "kairos.raw",
		Checksum: "sha256:ab", PVCRef: &banlieuev1.LocalObjectReference{Name: "banlieue-artifacts"}}
	p := &banlieuev1.Provider{ObjectMeta: metav1.ObjectMeta{Name: "host-7", Namespace: "tenant-a"}}
	job := importJob(importJobSpec{Image: img, Provider: p, Pool: "default", Volume: "kairos-00ab.raw", Namespace: ns,
		ContainerImage: "banlieue:v1", ServiceAccount: "banlieue-import"})
	testenv.CheckJobPod(t, policies, ns, job.Spec.Template, []string{"banlieue-default-deny", "banlieue-import-jobs"},
		[]string{fmt.Sprintf("TCP/%d", libvirt.DefaultPort), "TCP/443", "TCP/53", "TCP/6443", "UDP/53"})
}
