package image

import (
	"slices"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
)

func TestImportJobManifest(t *testing.T) {
	img := &banlieuev1.VMImage{ObjectMeta: metav1.ObjectMeta{Name: "kairos", UID: "u1"}}
	img.Status.BuildArtifact = &banlieuev1.BuildArtifact{Phase: banlieuev1.BuildReady, File: "kairos.raw",
		Checksum: "sha256:ab", PVCRef: &banlieuev1.LocalObjectReference{Name: "banlieue-artifacts"}}
	p := &banlieuev1.Provider{ObjectMeta: metav1.ObjectMeta{Name: "host-7", Namespace: "banlieue-system"}}
	tol := []corev1.Toleration{{Key: "k", Effect: corev1.TaintEffectNoSchedule, Operator: corev1.TolerationOpExists}}
	job := importJob(importJobSpec{Image: img, Provider: p, Pool: "default", Volume: "kairos-00ab.raw", Namespace: "banlieue-imagebuild",
		ContainerImage: "banlieue:v1", ServiceAccount: "banlieue-import", Tolerations: tol})

	if job.Name != ImportJobName("kairos", "banlieue-system", "host-7", "default") || job.Namespace != "banlieue-imagebuild" {
		t.Errorf("name %s/%s", job.Namespace, job.Name)
	}
	wantLabels := map[string]string{"app.kubernetes.io/name": "banlieue", "app.kubernetes.io/component": "libvirt-import",
		"banlieue.io/vmimage": "kairos", "banlieue.io/storage-pool": "default"}
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
		"--provider-namespace", "banlieue-system", "--pool", "default", "--source", "/artifacts/kairos.raw", "--volume-name", "kairos-00ab.raw", "--checksum", "sha256:ab"}
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
	if job.Annotations[banlieuev1.AnnotationArtifactChecksum] != "sha256:ab" || job.Annotations[banlieuev1.AnnotationProvider] != "banlieue-system/host-7" ||
		job.Annotations[banlieuev1.AnnotationImportIdentity] != importIdentity("kairos", "banlieue-system", "host-7", "default", "sha256:ab") {
		t.Errorf("annotations %+v", job.Annotations)
	}
	if got := artifactPath("../../etc/passwd"); got != "/artifacts/etc/passwd" {
		t.Errorf("artifactPath escapes the mount: %s", got)
	}
}

// TestJobOwnership: a Job of the expected name is adopted only with this VMImage, by UID, as its
// controller and this import's identity; a Job of banlieue's for an older artifact is stale;
// anything else is a conflict, whatever else it copies.
func TestJobOwnership(t *testing.T) {
	img := &banlieuev1.VMImage{ObjectMeta: metav1.ObjectMeta{Name: "kairos", UID: "u1"}}
	img.Status.BuildArtifact = &banlieuev1.BuildArtifact{Phase: banlieuev1.BuildReady, File: "kairos.raw",
		Checksum: "sha256:ab", PVCRef: &banlieuev1.LocalObjectReference{Name: "banlieue-artifacts"}}
	p := &banlieuev1.Provider{ObjectMeta: metav1.ObjectMeta{Name: "host-7", Namespace: "banlieue-system"}}
	ours := func() *batchv1.Job {
		return importJob(importJobSpec{Image: img, Provider: p, Pool: "default", Volume: "v", Namespace: "banlieue-imagebuild"})
	}
	older := ours()
	older.Annotations[banlieuev1.AnnotationArtifactChecksum] = "sha256:00"
	older.Annotations[banlieuev1.AnnotationImportIdentity] = importIdentity("kairos", "banlieue-system", "host-7", "default", "sha256:00")
	noOwner := ours()
	noOwner.OwnerReferences = nil
	notController := ours()
	notController.OwnerReferences[0].Controller = nil
	otherUID := ours()
	otherUID.OwnerReferences[0].UID = "u0"
	otherKind := ours()
	otherKind.OwnerReferences[0].Kind = "CronJob"
	noIdentity := ours()
	delete(noIdentity.Annotations, banlieuev1.AnnotationImportIdentity)
	otherPool := ours()
	otherPool.Annotations[banlieuev1.AnnotationImportIdentity] = importIdentity("kairos", "banlieue-system", "host-7", "default2", "sha256:ab")
	forgedChecksum := ours()
	forgedChecksum.Annotations[banlieuev1.AnnotationArtifactChecksum] = "sha256:00"
	for _, tc := range []struct {
		name     string
		job      *batchv1.Job
		stale    bool
		conflict string
	}{
		{"ours", ours(), false, ""},
		{"ours, older artifact", older, true, ""},
		{"ours, checksum annotation edited", forgedChecksum, false, ""},
		{"no owner", noOwner, false, "it has no controller reference"},
		{"owner but not controller", notController, false, "it has no controller reference"},
		{"earlier VMImage of the name", otherUID, false, "its controller is an earlier VMImage kairos (uid u0, this one is u1)"},
		{"another controller", otherKind, false, "its controller is CronJob kairos"},
		{"no identity", noIdentity, false, "its banlieue.io/import-identity annotation is not this import's"},
		{"another pool's identity", otherPool, false, "its banlieue.io/import-identity annotation is not this import's"},
	} {
		stale, conflict := jobOwnership(img, p, "default", tc.job)
		if stale != tc.stale || !strings.Contains(conflict, tc.conflict) || (tc.conflict == "") != (conflict == "") {
			t.Errorf("%s: stale %v conflict %q; want %v %q", tc.name, stale, conflict, tc.stale, tc.conflict)
		}
		if tc.conflict != "" && !strings.HasPrefix(conflict, "import Job banlieue-imagebuild/"+tc.job.Name+
			` was not created by banlieue for VMImage kairos, Provider banlieue-system/host-7 and pool "default": `) {
			t.Errorf("%s: message %q", tc.name, conflict)
		}
	}
}
