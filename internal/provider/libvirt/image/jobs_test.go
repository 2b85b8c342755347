package image

import (
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
)

func TestImportJobName(t *testing.T) {
	if got := ImportJobName("Ubuntu_24.04", "edge.host-7", "default"); got != "import-ubuntu-24-04-edge-host-7-default" {
		t.Errorf("sanitized name = %q", got)
	}
	long := strings.Repeat("a", 40)
	a, b := ImportJobName(long, "provider-one", "pool"), ImportJobName(long, "provider-one", "pool2")
	if len(a) != 63 || len(b) != 63 || a == b || a[:54] != b[:54] {
		t.Errorf("capped names must be 63 long, share the prefix and differ: %q %q", a, b)
	}
	if ImportJobName(long, "provider-one", "pool") != a {
		t.Error("names must be deterministic")
	}
}

func TestImportJobManifest(t *testing.T) {
	img := &banlieuev1.VMImage{ObjectMeta: metav1.ObjectMeta{Name: "kairos", UID: "u1"}}
	img.Status.BuildArtifact = &banlieuev1.BuildArtifact{Phase: banlieuev1.BuildReady, File: "kairos.raw",
		Checksum: "sha256:ab", PVCRef: &banlieuev1.LocalObjectReference{Name: "banlieue-artifacts"}}
	p := &banlieuev1.Provider{ObjectMeta: metav1.ObjectMeta{Name: "host-7", Namespace: "banlieue-system"}}
	tol := []corev1.Toleration{{Key: "k", Effect: corev1.TaintEffectNoSchedule, Operator: corev1.TolerationOpExists}}
	job := importJob(importJobSpec{Image: img, Provider: p, Pool: "default", Namespace: "banlieue-imagebuild",
		ContainerImage: "banlieue:v1", ServiceAccount: "banlieue-import", Tolerations: tol})

	if job.Name != "import-kairos-host-7-default" || job.Namespace != "banlieue-imagebuild" {
		t.Errorf("name %s/%s", job.Namespace, job.Name)
	}
	wantLabels := map[string]string{"app.kubernetes.io/name": "banlieue", "app.kubernetes.io/component": "libvirt-import",
		"banlieue.io/vmimage": "kairos", "banlieue.io/pool": "default"}
	for k, v := range wantLabels {
		if job.Labels[k] != v || job.Spec.Template.Labels[k] != v {
			t.Errorf("label %s: job %q, pod %q", k, job.Labels[k], job.Spec.Template.Labels[k])
		}
	}
	if o := job.OwnerReferences; len(o) != 1 || o[0].Kind != "VMImage" || o[0].Name != "kairos" || o[0].UID != "u1" {
		t.Errorf("owner %+v", o)
	}
	if *job.Spec.BackoffLimit != 1 || *job.Spec.TTLSecondsAfterFinished != 86400 {
		t.Error("backoffLimit 1 and ttl 86400")
	}
	pod := job.Spec.Template.Spec
	if pod.RestartPolicy != corev1.RestartPolicyNever || pod.ServiceAccountName != "banlieue-import" || pod.NodeSelector != nil ||
		!slices.Equal(pod.Tolerations, tol) {
		t.Errorf("pod spec %+v", pod)
	}
	if sc := pod.SecurityContext; !*sc.RunAsNonRoot || *sc.RunAsUser != 65532 || sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("pod securityContext %+v", sc)
	}
	c := pod.Containers[0]
	wantArgs := []string{"provider", "libvirt", "import", "--vmimage", "kairos", "--provider", "host-7",
		"--provider-namespace", "banlieue-system", "--pool", "default", "--source", "/artifacts/kairos.raw", "--checksum", "sha256:ab"}
	if c.Name != "import" || c.Image != "banlieue:v1" || !slices.Equal(c.Args, wantArgs) {
		t.Errorf("container %s %s %q", c.Name, c.Image, c.Args)
	}
	if sc := c.SecurityContext; *sc.AllowPrivilegeEscalation || !*sc.ReadOnlyRootFilesystem || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) {
		t.Errorf("container securityContext %+v", sc)
	}
	if m := c.VolumeMounts[0]; m.MountPath != "/artifacts" || !m.ReadOnly || m.Name != "artifacts" {
		t.Errorf("mount %+v", m)
	}
	if v := pod.Volumes[0].PersistentVolumeClaim; v.ClaimName != "banlieue-artifacts" || !v.ReadOnly {
		t.Errorf("volume %+v", v)
	}
	if job.Annotations[AnnotationArtifactChecksum] != "sha256:ab" {
		t.Errorf("annotations %+v", job.Annotations)
	}
	if got := artifactPath("../../etc/passwd"); got != "/artifacts/etc/passwd" {
		t.Errorf("artifactPath escapes the mount: %s", got)
	}
}
