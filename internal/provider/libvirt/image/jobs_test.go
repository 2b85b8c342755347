package image

import (
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
	"banlieue.io/banlieue/internal/jobbounds"
	"banlieue.io/banlieue/internal/jobimage"
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
// so is one of an earlier banlieue image; a Job that runs as another account, or anything but
// this import, is a conflict, whatever else it copies.
func TestJobOwnership(t *testing.T) {
	img := &banlieuev1.VMImage{ObjectMeta: metav1.ObjectMeta{Name: "kairos", UID: "u1"}}
	img.Status.BuildArtifact = &banlieuev1.BuildArtifact{Phase: banlieuev1.BuildReady, File: "kairos.raw",
		Checksum: "sha256:ab", PVCRef: &banlieuev1.LocalObjectReference{Name: "banlieue-artifacts"}}
	p := &banlieuev1.Provider{ObjectMeta: metav1.ObjectMeta{Name: "host-7", Namespace: "banlieue-system"}}
	ours := func() *batchv1.Job {
		return importJob(importJobSpec{Image: img, Provider: p, Pool: "default", Volume: "v", Namespace: "banlieue-imagebuild",
			ContainerImage: "registry.example/banlieue:v0.2.0", ServiceAccount: "host-7-import"})
	}
	want := ours()
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
	// What it runs: copied labels, owner and annotations are not enough.
	otherAccount := ours()
	otherAccount.Spec.Template.Spec.ServiceAccountName = "host-8-import"
	olderOtherAccount := older.DeepCopy()
	olderOtherAccount.Spec.Template.Spec.ServiceAccountName = "banlieue-import"
	shell := ours()
	shell.Spec.Template.Spec.Containers[0].Command = []string{"/bin/sh", "-c", "cat /run/secrets/kubernetes.io/serviceaccount/token"}
	otherArgs := ours()
	otherArgs.Spec.Template.Spec.Containers[0].Args[6] = "host-8"
	twoContainers := ours()
	twoContainers.Spec.Template.Spec.Containers = append(twoContainers.Spec.Template.Spec.Containers, corev1.Container{Name: "x"})
	earlierImage := ours()
	earlierImage.Spec.Template.Spec.Containers[0].Image = "registry.example/banlieue:v0.1.0"
	olderArgs := older.DeepCopy()
	olderArgs.Spec.Template.Spec.Containers[0].Args[len(olderArgs.Spec.Template.Spec.Containers[0].Args)-1] = "sha256:00"
	// The same artifact once its build published an extent digest: the Job made before that
	// (without --extent-digest) verifies the same bytes, and is adopted.
	withExtent := img.DeepCopy()
	withExtent.Status.BuildArtifact.ExtentDigest = "extents-sha256:" + strings.Repeat("cd", 32)
	wantExtent := importJob(importJobSpec{Image: withExtent, Provider: p, Pool: "default", Volume: "v", Namespace: "banlieue-imagebuild",
		ContainerImage: "registry.example/banlieue:v0.2.0", ServiceAccount: "host-7-import"})
	if a := wantExtent.Spec.Template.Spec.Containers[0].Args; len(a) != 19 || a[17] != "--extent-digest" || a[18] != withExtent.Status.BuildArtifact.ExtentDigest {
		t.Fatalf("args with an extent digest: %q", a)
	}
	if stale, conflict := jobOwnership(withExtent, p, "default", wantExtent, ours()); stale || conflict != "" {
		t.Errorf("a Job made before the extent digest was published: stale %v conflict %q; want adopted", stale, conflict)
	}
	if stale, conflict := jobOwnership(withExtent, p, "default", wantExtent, wantExtent); stale || conflict != "" {
		t.Errorf("a Job with the extent digest: stale %v conflict %q; want adopted", stale, conflict)
	}
	otherFlag := wantExtent.DeepCopy()
	otherFlag.Spec.Template.Spec.Containers[0].Args[17] = "--kubeconfig"
	if _, conflict := jobOwnership(withExtent, p, "default", wantExtent, otherFlag); !strings.Contains(conflict, "arguments are not this import's") {
		t.Errorf("another flag in the extent digest's place: conflict %q", conflict)
	}
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
		{"another Provider's import account", otherAccount, false,
			`it runs as ServiceAccount "host-8-import", not this Provider's import account "host-7-import"`},
		{"older artifact, another account: not deleted", olderOtherAccount, false,
			`it runs as ServiceAccount "banlieue-import", not this Provider's import account "host-7-import"`},
		{"older artifact's arguments", olderArgs, true, ""},
		{"a shell command", shell, false, "its container's command or arguments are not this import's"},
		{"another Provider's arguments", otherArgs, false, "its container's command or arguments are not this import's"},
		{"two containers", twoContainers, false, "it has 2 containers, an import Job one"},
		{"an earlier banlieue image: replaced", earlierImage, true, ""},
	} {
		stale, conflict := jobOwnership(img, p, "default", want, tc.job)
		if stale != tc.stale || !strings.Contains(conflict, tc.conflict) || (tc.conflict == "") != (conflict == "") {
			t.Errorf("%s: stale %v conflict %q; want %v %q", tc.name, stale, conflict, tc.stale, tc.conflict)
		}
		if tc.conflict != "" && !strings.HasPrefix(conflict, "import Job banlieue-imagebuild/"+tc.job.Name+
			` was not created by banlieue for VMImage kairos, Provider banlieue-system/host-7 and pool "default": `) {
			t.Errorf("%s: message %q", tc.name, conflict)
		}
	}
}

// TestImportJobBounds: the provider's --import-* bounds land on the Job and its container.
func TestImportJobBounds(t *testing.T) {
	img := &banlieuev1.VMImage{ObjectMeta: metav1.ObjectMeta{Name: "kairos", UID: "u1"}}
	img.Status.BuildArtifact = &banlieuev1.BuildArtifact{File: "kairos.raw", PVCRef: &banlieuev1.LocalObjectReference{Name: "pvc"}}
	p := &banlieuev1.Provider{ObjectMeta: metav1.ObjectMeta{Name: "host-7", Namespace: "ns"}}
	for _, tt := range []struct {
		name       string
		bounds     jobbounds.Bounds
		deadline   int64
		resources  string
		goMemLimit string
	}{
		{"defaults", jobbounds.DefaultImport(), 21600, "cpu 100m/1 memory 64Mi/256Mi", "241591905"},
		{"no CPU limit", jobbounds.Bounds{Deadline: 2 * time.Hour, CPURequest: resource.MustParse("1"),
			MemoryRequest: resource.MustParse("100M"), MemoryLimit: resource.MustParse("100M")}, 7200, "cpu 1/- memory 100M/100M", "90000000"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			job := importJob(importJobSpec{Image: img, Provider: p, Pool: "default", Volume: "v", Bounds: tt.bounds})
			if d := job.Spec.ActiveDeadlineSeconds; d == nil || *d != tt.deadline {
				t.Errorf("activeDeadlineSeconds %v, want %d", d, tt.deadline)
			}
			c := job.Spec.Template.Spec.Containers[0]
			q := func(l corev1.ResourceList, n corev1.ResourceName) string {
				if v, ok := l[n]; ok {
					return v.String()
				}
				return "-"
			}
			r := c.Resources
			got := fmt.Sprintf("cpu %s/%s memory %s/%s", q(r.Requests, corev1.ResourceCPU), q(r.Limits, corev1.ResourceCPU),
				q(r.Requests, corev1.ResourceMemory), q(r.Limits, corev1.ResourceMemory))
			if got != tt.resources {
				t.Errorf("resources %s, want %s", got, tt.resources)
			}
			if len(c.Env) != 1 || c.Env[0] != (corev1.EnvVar{Name: "GOMEMLIMIT", Value: tt.goMemLimit}) {
				t.Errorf("env %v, want GOMEMLIMIT=%s", c.Env, tt.goMemLimit)
			}
		})
	}
}

// TestImportFailedMessage: a Job stopped at its deadline names the deadline and its flag, and
// whether it ever had a pod.
func TestImportFailedMessage(t *testing.T) {
	deadline := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "import-x"}, Spec: batchv1.JobSpec{ActiveDeadlineSeconds: ptr.To[int64](3600)},
		Status: batchv1.JobStatus{Failed: 1, Conditions: []batchv1.JobCondition{{Type: batchv1.JobFailed, Status: corev1.ConditionTrue,
			Reason: batchv1.JobReasonDeadlineExceeded, Message: "Job was active longer than specified deadline"}}}}
	backoff := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "import-y"},
		Status: batchv1.JobStatus{Failed: 2, Conditions: []batchv1.JobCondition{{Type: batchv1.JobFailed, Status: corev1.ConditionTrue,
			Reason: batchv1.JobReasonBackoffLimitExceeded}}}}
	// A Job the Job controller could not create a pod for (its ServiceAccount missing, say).
	podless := deadline.DeepCopy()
	podless.Namespace, podless.Name, podless.Status.Failed = "banlieue-imagebuild", "import-z", 0
	for _, tt := range []struct {
		job  *batchv1.Job
		want string
	}{
		{deadline, "import Job import-x was stopped at its deadline of 1h0m0s (--import-deadline): the upload to the host was too slow"},
		{backoff, "import Job import-y failed"},
		{podless, "import Job import-z was stopped at its deadline of 1h0m0s (--import-deadline) without a pod ever running: " +
			"the Job controller could not create one; its events say why (kubectl -n banlieue-imagebuild describe job import-z)"},
	} {
		if z := jobZone("p", tt.job); z.Message != tt.want || z.Reason != banlieuev1.ReasonImportFailed {
			t.Errorf("zone %+v, want ImportFailed %q", z, tt.want)
		}
	}
}

// TestUnsetBoundsAreTheDefaults: a Reconciler made without bounds (tests, benches) still gives
// its Jobs a deadline and a GOMEMLIMIT; set bounds are kept.
func TestUnsetBoundsAreTheDefaults(t *testing.T) {
	if got, want := (&Reconciler{}).bounds().Args("import"), jobbounds.DefaultImport().Args("import"); !slices.Equal(got, want) {
		t.Errorf("unset: %q, want %q", got, want)
	}
	set := jobbounds.Bounds{Deadline: time.Hour, MemoryLimit: resource.MustParse("1Gi")}
	if got := (&Reconciler{Bounds: set}).bounds().Args("import"); !slices.Equal(got, set.Args("import")) {
		t.Errorf("set: %q, want %q", got, set.Args("import"))
	}
}

// TestImportJobPull: the provider's pull policy and pull secrets (the ProviderClass's, forwarded
// by the operator) reach the import pod; without them it keeps Kubernetes' defaults.
func TestImportJobPull(t *testing.T) {
	img := &banlieuev1.VMImage{ObjectMeta: metav1.ObjectMeta{Name: "kairos", UID: "u1"}}
	img.Status.BuildArtifact = &banlieuev1.BuildArtifact{Phase: banlieuev1.BuildReady, File: "kairos.raw",
		Checksum: "sha256:ab", PVCRef: &banlieuev1.LocalObjectReference{Name: "banlieue-artifacts"}}
	p := &banlieuev1.Provider{ObjectMeta: metav1.ObjectMeta{Name: "host-7", Namespace: "banlieue-system"}}
	plain := importJob(importJobSpec{Image: img, Provider: p, Pool: "default", Volume: "v"}).Spec.Template.Spec
	if plain.Containers[0].ImagePullPolicy != "" || plain.ImagePullSecrets != nil {
		t.Errorf("without pull settings: policy %q, secrets %v", plain.Containers[0].ImagePullPolicy, plain.ImagePullSecrets)
	}
	pod := importJob(importJobSpec{Image: img, Provider: p, Pool: "default", Volume: "v",
		Pull: jobimage.Pull{Policy: corev1.PullNever, Secrets: []string{"regcred"}}}).Spec.Template.Spec
	if pod.Containers[0].ImagePullPolicy != corev1.PullNever || !slices.Equal(pod.ImagePullSecrets, []corev1.LocalObjectReference{{Name: "regcred"}}) {
		t.Errorf("pull policy %q, secrets %v; want Never and regcred", pod.Containers[0].ImagePullPolicy, pod.ImagePullSecrets)
	}
}

// The command a failed import's zone prints is the Job's own: same volume, same digests, and a
// shell reading it gets the Job's arguments back word for word.
func TestByHandNoteRepeatsTheJob(t *testing.T) {
	sum := "sha256:" + strings.Repeat("ab", 32)
	img := &banlieuev1.VMImage{ObjectMeta: metav1.ObjectMeta{Name: "kairos", UID: "u1"}}
	img.Status.BuildArtifact = &banlieuev1.BuildArtifact{Phase: banlieuev1.BuildReady, File: "kairos.raw", Checksum: sum,
		ExtentDigest: "extents-sha256:" + strings.Repeat("cd", 32), PVCRef: &banlieuev1.LocalObjectReference{Name: "banlieue-artifacts"}}
	p := &banlieuev1.Provider{ObjectMeta: metav1.ObjectMeta{Name: "host-7", Namespace: "banlieue-system"}}
	for _, pool := range []string{"lab", "it's a pool"} {
		job := importJob(importJobSpec{Image: img, Provider: p, Pool: pool, Volume: artifactVolume(img), Namespace: "banlieue-imagebuild",
			ContainerImage: "banlieue:v1", ServiceAccount: "host-7-import"})
		note := byHandNote(job)
		const prefix = "; to repeat it by hand: banlieue "
		cmd, tail, ok := strings.Cut(strings.TrimPrefix(note, prefix), " (--source ")
		if !strings.HasPrefix(note, prefix) || !ok {
			t.Fatalf("note %q", note)
		}
		if want := "/artifacts/kairos.raw is file kairos.raw of PVC banlieue-imagebuild/banlieue-artifacts)"; tail != want {
			t.Errorf("source %q, want %q", tail, want)
		}
		out, err := exec.Command("sh", "-c", "set -- "+cmd+`; for a in "$@"; do printf '%s\n' "$a"; done`).Output()
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n"); !slices.Equal(got, job.Spec.Template.Spec.Containers[0].Args) {
			t.Errorf("pool %q: the shell reads %q, want the Job's %q", pool, got, job.Spec.Template.Spec.Containers[0].Args)
		}
		for _, want := range []string{"--volume-name " + artifactVolume(img), "--checksum " + sum, "--extent-digest extents-sha256:"} {
			if !strings.Contains(cmd, want) {
				t.Errorf("command %q lacks %q", cmd, want)
			}
		}
	}
}
