package imagebuilder

import (
	"fmt"
	"net/netip"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"

	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
	"banlieue.io/banlieue/internal/imagebuilder/build"
	"banlieue.io/banlieue/internal/jobbounds"
	"banlieue.io/banlieue/internal/jobimage"
)

func TestBuildJobName(t *testing.T) {
	if got := BuildJobName("cirros"); got != "build-cirros" {
		t.Errorf("BuildJobName(cirros) = %q", got)
	}
	a, b := BuildJobName(strings.Repeat("a", 80)+"x"), BuildJobName(strings.Repeat("a", 80)+"y")
	if len(a) != 63 || a == b {
		t.Errorf("long names: %q, %q", a, b)
	}
	if errs := validation.IsDNS1123Label(a); len(errs) > 0 {
		t.Errorf("%q: %v", a, errs)
	}
}

func TestURLKind(t *testing.T) {
	for _, tt := range []struct {
		from string
		want banlieuev1.ArtifactKind
	}{
		{"https://example.org/debian.qcow2", banlieuev1.ArtifactCloudImage},
		{"https://example.org/install.iso", banlieuev1.ArtifactISO},
		{"https://example.org/INSTALL.ISO", banlieuev1.ArtifactISO},
		{"https://example.org/install.iso.xz", banlieuev1.ArtifactISO},
		{"https://example.org/install.iso.gz?token=1", banlieuev1.ArtifactISO},
		{"https://example.org/download?file=x.iso", banlieuev1.ArtifactCloudImage},
		{"https://example.org/disk.img.zst", banlieuev1.ArtifactCloudImage},
		{"quay.io/containerdisks/fedora:40", banlieuev1.ArtifactCloudImage},
		{"registry.local/iso:install.iso", banlieuev1.ArtifactCloudImage},
	} {
		if got := urlKind(tt.from); got != tt.want {
			t.Errorf("urlKind(%q) = %s, want %s", tt.from, got, tt.want)
		}
	}
}

func TestCheckSource(t *testing.T) {
	for _, tt := range []struct {
		src     banlieuev1.ImageSource
		wantErr string
	}{
		{banlieuev1.ImageSource{ImportFrom: "https://example.org/a.img"}, ""},
		{banlieuev1.ImageSource{ImportFrom: "http://example.org/a.img", Checksum: "sha256:00"}, ""},
		{banlieuev1.ImageSource{ImportFrom: "http://example.org/a.img"}, "needs a checksum"},
		{banlieuev1.ImageSource{ImportFrom: "ftp://example.org/a.img", Checksum: "sha256:00"}, "neither"},
		// The message names the source without its credential.
		{banlieuev1.ImageSource{ImportFrom: "ftp://u:pw@example.org/a.img?sig=x"}, "importFrom ftp://REDACTED@example.org/a.img?sig=REDACTED: neither"},
		{banlieuev1.ImageSource{ImportFrom: "http://u:pw@example.org/a.img"}, "importFrom http://REDACTED@example.org/a.img: a plain"},
		// An OCI reference by tag needs a digest, a checksum or the explicit opt-out.
		{banlieuev1.ImageSource{ImportFrom: "quay.io/containerdisks/fedora:40"}, "set spec.sources[2].checksum"},
		{banlieuev1.ImageSource{ImportFrom: "quay.io/containerdisks/fedora"}, "names a tag without a digest"},
		{banlieuev1.ImageSource{ImportFrom: "quay.io/containerdisks/fedora:40", Checksum: "sha256:00"}, ""},
		{banlieuev1.ImageSource{ImportFrom: "quay.io/containerdisks/fedora:40", AllowUnverifiedTag: true}, ""},
		{banlieuev1.ImageSource{ImportFrom: "quay.io/containerdisks/fedora@sha256:" + strings.Repeat("a", 64)}, ""},
		{banlieuev1.ImageSource{ImportFrom: "quay.io/containerdisks/fedora:40@sha256:" + strings.Repeat("a", 64)}, ""},
		// Malformed: the build reports it with the parser's words.
		{banlieuev1.ImageSource{ImportFrom: "Not A Reference"}, ""},
	} {
		err := checkSource(tt.src, 2)
		if (err == nil) != (tt.wantErr == "") || err != nil && !strings.Contains(err.Error(), tt.wantErr) {
			t.Errorf("checkSource(%+v) = %v, want %q", tt.src, err, tt.wantErr)
		}
	}
}

func TestURLSource(t *testing.T) {
	img := &banlieuev1.VMImage{Spec: banlieuev1.VMImageSpec{Sources: []banlieuev1.ImageSource{
		{ProviderClass: "vsphere", Kind: banlieuev1.SourceTemplate, Ref: "t"},
		{ProviderClass: "other", Kind: banlieuev1.SourceURL},
		{ProviderClass: "libvirt", Kind: banlieuev1.SourceURL, ImportFrom: "https://a/b.img"},
	}}}
	if src, i, ok := urlSource(img); !ok || src.ProviderClass != "libvirt" || i != 2 {
		t.Errorf("urlSource = %+v, %d, %v", src, i, ok)
	}
	img.Spec.Sources = img.Spec.Sources[:2]
	if _, _, ok := urlSource(img); ok {
		t.Error("a Url source without importFrom was taken")
	}
}

func testImage() *banlieuev1.VMImage {
	return &banlieuev1.VMImage{
		ObjectMeta: metav1.ObjectMeta{Name: "debian-12", UID: "uid-1"},
		Spec:       banlieuev1.VMImageSpec{Architecture: "arm64"},
	}
}

func TestBuildJob(t *testing.T) {
	limits := build.DefaultLimits()
	limits.AllowNetworks = []netip.Prefix{netip.MustParsePrefix("10.20.0.0/16")}
	limits.InsecureRegistries = []string{"mirror.lab:5000"}
	tol := []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "build", Effect: corev1.TaintEffectNoSchedule}}
	for _, tt := range []struct {
		name     string
		src      banlieuev1.ImageSource
		kind     banlieuev1.ArtifactKind
		wantArgs []string
	}{
		{
			name: "cloud image with checksum",
			src:  banlieuev1.ImageSource{ImportFrom: "https://example.org/d.qcow2", Checksum: "sha256:ab"},
			kind: banlieuev1.ArtifactCloudImage,
			wantArgs: []string{"imagebuilder", "build", "--vmimage", "debian-12",
				"--output", "/artifacts/debian-12.raw", "--checksum", "sha256:ab", "--architecture", "arm64",
				"--max-download-size", "32Gi", "--max-disk-size", "256Gi", "--max-xz-dictionary", "64Mi", "--max-zstd-window", "128Mi",
				"--min-transfer-rate", "16Ki", "--allow-network", "10.20.0.0/16", "--insecure-registry", "mirror.lab:5000"},
		},
		{
			name: "presigned ISO without checksum",
			src:  banlieuev1.ImageSource{ImportFrom: "https://robot:hunter2@example.org/install.iso?X-Amz-Signature=s3cr3t"},
			kind: banlieuev1.ArtifactISO,
			wantArgs: []string{"imagebuilder", "build", "--vmimage", "debian-12",
				"--output", "/artifacts/debian-12.iso", "--architecture", "arm64",
				"--max-download-size", "32Gi", "--max-disk-size", "256Gi", "--max-xz-dictionary", "64Mi", "--max-zstd-window", "128Mi",
				"--min-transfer-rate", "16Ki", "--allow-network", "10.20.0.0/16", "--insecure-registry", "mirror.lab:5000"},
		},
		{
			name: "OCI tag, explicitly unverified",
			src:  banlieuev1.ImageSource{ImportFrom: "quay.io/containerdisks/fedora:40", AllowUnverifiedTag: true},
			kind: banlieuev1.ArtifactCloudImage,
			wantArgs: []string{"imagebuilder", "build", "--vmimage", "debian-12",
				"--output", "/artifacts/debian-12.raw", "--allow-unverified-tag", "--architecture", "arm64",
				"--max-download-size", "32Gi", "--max-disk-size", "256Gi", "--max-xz-dictionary", "64Mi", "--max-zstd-window", "128Mi",
				"--min-transfer-rate", "16Ki", "--allow-network", "10.20.0.0/16", "--insecure-registry", "mirror.lab:5000"},
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			job := buildJob(jobSpec{Image: testImage(), Source: tt.src, Kind: tt.kind, Namespace: "banlieue-imagebuild",
				ContainerImage: "banlieue:v1", PVC: "banlieue-artifacts", NodeSelector: map[string]string{"disk": "fast"}, Tolerations: tol,
				Limits: limits, Bounds: jobbounds.DefaultBuild()})
			if job.Name != "build-debian-12" || job.Namespace != "banlieue-imagebuild" {
				t.Errorf("name %s/%s", job.Namespace, job.Name)
			}
			pod := job.Spec.Template.Spec
			c := pod.Containers[0]
			if !reflect.DeepEqual(c.Args, tt.wantArgs) {
				t.Errorf("args\n got %q\nwant %q", c.Args, tt.wantArgs)
			}
			if c.Image != "banlieue:v1" || c.TerminationMessagePolicy != corev1.TerminationMessageFallbackToLogsOnError {
				t.Errorf("container %+v", c)
			}
			if *job.Spec.BackoffLimit != 2 || job.Spec.TTLSecondsAfterFinished != nil || pod.RestartPolicy != corev1.RestartPolicyNever {
				t.Errorf("job spec %+v", job.Spec)
			}
			wantEnv := []corev1.EnvVar{{Name: "BANLIEUE_BUILD_FROM", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
				LocalObjectReference: corev1.LocalObjectReference{Name: "build-debian-12"}, Key: "from"}}},
				{Name: "GOMEMLIMIT", Value: "483183819"}}
			if !reflect.DeepEqual(c.Env, wantEnv) {
				t.Errorf("env %+v, want the source from the build Secret", c.Env)
			}
			wantAnn := map[string]string{banlieuev1.AnnotationSourceHash: SourceHash(tt.src),
				banlieuev1.AnnotationArtifactKind: string(tt.kind)}
			if tt.src.AllowUnverifiedTag {
				wantAnn[banlieuev1.AnnotationAllowUnverifiedTag] = "true"
			}
			if !reflect.DeepEqual(job.Annotations, wantAnn) {
				t.Errorf("annotations %v", job.Annotations)
			}
			// No part of the URL (host, path, credential) is anywhere in the Job.
			if spec := fmt.Sprintf("%+v", job); strings.Contains(spec, "example.org") {
				t.Errorf("the source URL is in the Job: %s", spec)
			}
			sec := sourceSecret(jobSpec{Image: testImage(), Source: tt.src, Namespace: "banlieue-imagebuild"})
			if *sec.Name != "build-debian-12" || *sec.Namespace != "banlieue-imagebuild" || string(sec.Data["from"]) != tt.src.ImportFrom ||
				!reflect.DeepEqual(sec.Labels, wantLabels(t)) || *sec.Type != corev1.SecretTypeOpaque {
				t.Errorf("build Secret %+v", sec)
			}
			if o := sec.OwnerReferences[0]; *o.Kind != "VMImage" || *o.Name != "debian-12" || *o.UID != "uid-1" {
				t.Errorf("build Secret owner %+v", o)
			}
			if !reflect.DeepEqual(job.Labels, wantLabels(t)) || !reflect.DeepEqual(job.Spec.Template.Labels, wantLabels(t)) {
				t.Errorf("labels %v / %v", job.Labels, job.Spec.Template.Labels)
			}
			o := job.OwnerReferences[0]
			if o.Kind != "VMImage" || o.Name != "debian-12" || o.UID != "uid-1" || !*o.Controller {
				t.Errorf("owner %+v", o)
			}
			v := pod.Volumes[0]
			if v.PersistentVolumeClaim.ClaimName != "banlieue-artifacts" || v.PersistentVolumeClaim.ReadOnly ||
				c.VolumeMounts[0].MountPath != "/artifacts" || c.VolumeMounts[0].ReadOnly {
				t.Errorf("the PVC must be mounted read-write at /artifacts: %+v %+v", v, c.VolumeMounts)
			}
			psc, csc := pod.SecurityContext, c.SecurityContext
			if !*psc.RunAsNonRoot || *psc.RunAsUser != 65532 || *psc.FSGroup != 65532 || psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault ||
				*csc.AllowPrivilegeEscalation || !*csc.ReadOnlyRootFilesystem || csc.Capabilities.Drop[0] != "ALL" {
				t.Errorf("security contexts %+v %+v", psc, csc)
			}
			if pod.NodeSelector["disk"] != "fast" || !reflect.DeepEqual(pod.Tolerations, tol) || *pod.AutomountServiceAccountToken {
				t.Errorf("placement %v %v", pod.NodeSelector, pod.Tolerations)
			}
		})
	}
}

// TestBuildJobBounds: the deadline, the resources and GOMEMLIMIT of the imagebuilder's flags
// land on the Job, its container, and nowhere else.
func TestBuildJobBounds(t *testing.T) {
	custom := jobbounds.Bounds{Deadline: 90 * time.Minute, CPURequest: resource.MustParse("500m"),
		MemoryRequest: resource.MustParse("1Gi"), MemoryLimit: resource.MustParse("2Gi")}
	for _, tt := range []struct {
		name       string
		bounds     jobbounds.Bounds
		deadline   int64
		requests   corev1.ResourceList
		limits     corev1.ResourceList
		goMemLimit string
	}{
		{"defaults", jobbounds.DefaultBuild(), 21600,
			corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("128Mi")},
			corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("512Mi")},
			"483183819"},
		{"no CPU limit", custom, 5400,
			corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse("1Gi")},
			corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("2Gi")},
			"1932735276"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			job := buildJob(jobSpec{Image: testImage(), Source: banlieuev1.ImageSource{ImportFrom: "https://a/b.img"},
				Kind: banlieuev1.ArtifactCloudImage, Bounds: tt.bounds})
			if d := job.Spec.ActiveDeadlineSeconds; d == nil || *d != tt.deadline {
				t.Errorf("activeDeadlineSeconds %v, want %d", d, tt.deadline)
			}
			c := job.Spec.Template.Spec.Containers[0]
			if !sameResources(c.Resources.Requests, tt.requests) || !sameResources(c.Resources.Limits, tt.limits) {
				t.Errorf("resources %v, want requests %v limits %v", c.Resources, tt.requests, tt.limits)
			}
			if want := (corev1.EnvVar{Name: "GOMEMLIMIT", Value: tt.goMemLimit}); !slices.Contains(c.Env, want) {
				t.Errorf("env %v, want %v", c.Env, want)
			}
		})
	}
}

// sameResources compares quantities by value: 1000m and 1 are the same CPU.
func sameResources(got, want corev1.ResourceList) bool {
	if len(got) != len(want) {
		return false
	}
	for name, q := range want {
		if g, ok := got[name]; !ok || g.Cmp(q) != 0 {
			return false
		}
	}
	return true
}

func wantLabels(t *testing.T) map[string]string {
	t.Helper()
	return map[string]string{banlieuev1.LabelName: "banlieue", banlieuev1.LabelComponent: ComponentBuild, banlieuev1.LabelVMImage: "debian-12"}
}

func TestStale(t *testing.T) {
	src := banlieuev1.ImageSource{ImportFrom: "https://a/b.img", Checksum: "sha256:01"}
	job := buildJob(jobSpec{Image: testImage(), Source: src, Kind: banlieuev1.ArtifactCloudImage})
	for _, tt := range []struct {
		src  banlieuev1.ImageSource
		want bool
	}{
		{src, false},
		{banlieuev1.ImageSource{ImportFrom: "https://a/c.img", Checksum: "sha256:01"}, true},
		{banlieuev1.ImageSource{ImportFrom: "https://a/b.img", Checksum: "sha256:02"}, true},
		{banlieuev1.ImageSource{ImportFrom: "https://a/b.img"}, true},
		{banlieuev1.ImageSource{ImportFrom: "https://a/b.img", Checksum: "sha256:01", AllowUnverifiedTag: true}, true},
		// The NUL between URL and checksum keeps these apart.
		{banlieuev1.ImageSource{ImportFrom: "https://a/b.imgsha256:01"}, true},
	} {
		if got := stale(job, tt.src); got != tt.want {
			t.Errorf("stale(%+v) = %v", tt.src, got)
		}
	}
	// Turning the opt-out off replaces a Job built under it.
	tag := banlieuev1.ImageSource{ImportFrom: "quay.io/containerdisks/fedora:40", AllowUnverifiedTag: true}
	tagJob := buildJob(jobSpec{Image: testImage(), Source: tag, Kind: banlieuev1.ArtifactCloudImage})
	if stale(tagJob, tag) || !stale(tagJob, banlieuev1.ImageSource{ImportFrom: tag.ImportFrom}) {
		t.Error("allowUnverifiedTag must be part of the Job's source")
	}
	// A Job of an earlier release (the URL in its argv and annotation, no hash) is replaced.
	old := job.DeepCopy()
	old.Annotations = map[string]string{"banlieue.io/import-from": src.ImportFrom, "banlieue.io/source-checksum": src.Checksum}
	if !stale(old, src) {
		t.Error("a Job without banlieue.io/source-hash is not stale")
	}
}

func jobWith(status batchv1.JobStatus) *batchv1.Job {
	job := buildJob(jobSpec{Image: testImage(), Source: banlieuev1.ImageSource{ImportFrom: "https://a/b.img"},
		Kind: banlieuev1.ArtifactCloudImage, Namespace: "ns"})
	job.UID = "job-uid"
	job.Status = status
	return job
}

// deadlineJob is a build Job the Job controller stopped at its deadline, as it records it.
func deadlineJob() *batchv1.Job {
	job := jobWith(batchv1.JobStatus{Failed: 1, Conditions: []batchv1.JobCondition{{Type: batchv1.JobFailed, Status: corev1.ConditionTrue,
		Reason: batchv1.JobReasonDeadlineExceeded, Message: "Job was active longer than specified deadline"}}})
	job.Spec.ActiveDeadlineSeconds = jobbounds.DefaultBuild().ActiveDeadlineSeconds()
	return job
}

func cond(typ batchv1.JobConditionType, msg string) []batchv1.JobCondition {
	return []batchv1.JobCondition{{Type: typ, Status: corev1.ConditionTrue, Message: msg}}
}

func TestMirror(t *testing.T) {
	extent := "extents-sha256:" + strings.Repeat("cd", 32)
	okResult := `{"kind":"cloudImage","file":"debian-12.raw","checksum":"sha256:aa","extentDigest":"` + extent + `","sizeBytes":1048576,"sourceDigest":"sha256:bb"}`
	ref := &banlieuev1.JobReference{Name: "build-debian-12", Namespace: "ns"}
	for _, tt := range []struct {
		name string
		job  *batchv1.Job
		term string
		want banlieuev1.BuildArtifact
	}{
		{"created", jobWith(batchv1.JobStatus{}), "", banlieuev1.BuildArtifact{Kind: "cloudImage", Phase: "Pending", Reason: "Pending",
			JobRef: ref, Message: "build Job build-debian-12 created; waiting for its pod"}},
		{"active", jobWith(batchv1.JobStatus{Active: 1}), "", banlieuev1.BuildArtifact{Kind: "cloudImage", Phase: "Building", Reason: "Building",
			JobRef: ref, Message: "build Job build-debian-12 running"}},
		{"retrying", jobWith(batchv1.JobStatus{Failed: 1}), "", banlieuev1.BuildArtifact{Kind: "cloudImage", Phase: "Building", Reason: "Building",
			JobRef: ref, Message: "build Job build-debian-12 running"}},
		{"succeeded", jobWith(batchv1.JobStatus{Succeeded: 1, Conditions: cond(batchv1.JobComplete, "")}), okResult,
			banlieuev1.BuildArtifact{Kind: "cloudImage", Phase: "Ready", Reason: "Reconciled", JobRef: ref,
				PVCRef: &banlieuev1.LocalObjectReference{Name: "pvc"}, File: "debian-12.raw", Checksum: "sha256:aa", ExtentDigest: extent,
				SizeBytes: 1 << 20, SourceDigest: "sha256:bb", Message: "artifact debian-12.raw built"}},
		{"succeeded without a result", jobWith(batchv1.JobStatus{Succeeded: 1, Conditions: cond(batchv1.JobComplete, "")}), "",
			banlieuev1.BuildArtifact{Kind: "cloudImage", Phase: "Failed", Reason: "BuildFailed", JobRef: ref,
				Message: "build Job build-debian-12 succeeded but its result is unreadable: the build pod left no termination message"}},
		{"failed", jobWith(batchv1.JobStatus{Failed: 3, Conditions: cond(batchv1.JobFailed, "BackoffLimitExceeded")}),
			"invalid --checksum: checksum mismatch", banlieuev1.BuildArtifact{Kind: "cloudImage", Phase: "Failed", Reason: "BuildFailed",
				JobRef: ref, Message: "invalid --checksum: checksum mismatch"}},
		{"failed without a pod", jobWith(batchv1.JobStatus{Failed: 3, Conditions: cond(batchv1.JobFailed, "Job has reached the specified backoff limit")}),
			"", banlieuev1.BuildArtifact{Kind: "cloudImage", Phase: "Failed", Reason: "BuildFailed",
				JobRef: ref, Message: "build Job build-debian-12 failed: Job has reached the specified backoff limit"}},
		{"stopped at its deadline", deadlineJob(), "downloading https://a/b.img: 1.2Gi of 30Gi",
			banlieuev1.BuildArtifact{Kind: "cloudImage", Phase: "Failed", Reason: "BuildFailed", JobRef: ref,
				Message: "build Job build-debian-12 was stopped at its deadline of 6h0m0s (--build-deadline): the source was too slow or too large to build in time"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := mirror(tt.job, "pvc", tt.term); !reflect.DeepEqual(*got, tt.want) {
				t.Errorf("\n got %+v\nwant %+v", *got, tt.want)
			}
		})
	}
}

func TestParseResult(t *testing.T) {
	for _, tt := range []struct {
		in      string
		wantErr bool
	}{
		{`{"kind":"iso","file":"x.iso","checksum":"sha256:aa","sizeBytes":1}`, false},
		{`{"kind":"cloudImage","file":"x.raw","checksum":"sha256:aa","extentDigest":"extents-sha256:` + strings.Repeat("ab", 32) + `"}`, false},
		{`{"kind":"cloudImage","file":"x.raw","checksum":"sha256:aa","extentDigest":"sha256:aa"}`, true},
		{`{"kind":"floppy","file":"x.img","checksum":"sha256:aa"}`, true},
		{`{"kind":"iso","checksum":"sha256:aa"}`, true},
		{`downloading https://...`, true},
	} {
		if _, err := parseResult(tt.in); (err != nil) != tt.wantErr {
			t.Errorf("parseResult(%q) = %v", tt.in, err)
		}
	}
}

func TestOutputKindMismatch(t *testing.T) {
	raw := buildJob(jobSpec{Image: testImage(), Kind: banlieuev1.ArtifactCloudImage})
	iso := buildJob(jobSpec{Image: testImage(), Kind: banlieuev1.ArtifactISO})
	if outputKindMismatch(raw, resultOf(banlieuev1.ArtifactCloudImage)) || outputKindMismatch(iso, resultOf(banlieuev1.ArtifactISO)) {
		t.Error("a matching kind is a mismatch")
	}
	if !outputKindMismatch(raw, resultOf(banlieuev1.ArtifactISO)) || !outputKindMismatch(iso, resultOf(banlieuev1.ArtifactCloudImage)) {
		t.Error("a wrong kind is no mismatch")
	}
}

func TestPodTermination(t *testing.T) {
	at := func(sec int) metav1.Time { return metav1.NewTime(time.Unix(int64(sec), 0)) }
	pod := func(name string, owner types.UID, phase corev1.PodPhase, msg string, finished int) corev1.Pod {
		return corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, OwnerReferences: []metav1.OwnerReference{{UID: owner}}},
			Status: corev1.PodStatus{Phase: phase, ContainerStatuses: []corev1.ContainerStatus{{State: corev1.ContainerState{
				Terminated: &corev1.ContainerStateTerminated{Message: msg, FinishedAt: at(finished)}}}}},
		}
	}
	pods := []corev1.Pod{
		pod("old-0", "old", corev1.PodSucceeded, "old result", 1),
		pod("job-0", "job", corev1.PodFailed, "first failure", 10),
		pod("job-2", "job", corev1.PodFailed, "last failure", 30),
		pod("job-1", "job", corev1.PodFailed, "second failure", 20),
		{ObjectMeta: metav1.ObjectMeta{Name: "job-3", OwnerReferences: []metav1.OwnerReference{{UID: "job"}}}},
	}
	if msg, ok := podTermination(pods, "job", false); !ok || msg != "last failure" {
		t.Errorf("failed: %q, %v", msg, ok)
	}
	if msg, ok := podTermination(pods, "job", true); ok {
		t.Errorf("a succeeded pod of another Job was taken: %q", msg)
	}
	pods = append(pods, pod("job-4", "job", corev1.PodSucceeded, "result", 40))
	if msg, ok := podTermination(pods, "job", true); !ok || msg != "result" {
		t.Errorf("succeeded: %q, %v", msg, ok)
	}
}

func resultOf(kind banlieuev1.ArtifactKind) build.Result {
	return build.Result{Kind: kind, File: "x", Checksum: "sha256:aa"}
}

// TestUnsetBoundsAreTheDefaults: a Reconciler made without bounds (tests, benches) still gives
// its Jobs a deadline and a GOMEMLIMIT; set bounds are kept.
func TestUnsetBoundsAreTheDefaults(t *testing.T) {
	if got, want := (&Reconciler{}).bounds().Args("build"), jobbounds.DefaultBuild().Args("build"); !reflect.DeepEqual(got, want) {
		t.Errorf("unset: %q, want %q", got, want)
	}
	set := jobbounds.Bounds{Deadline: time.Hour, MemoryLimit: resource.MustParse("1Gi")}
	if got := (&Reconciler{Bounds: set}).bounds().Args("build"); !reflect.DeepEqual(got, set.Args("build")) {
		t.Errorf("set: %q, want %q", got, set.Args("build"))
	}
}

// TestBuildJobPullAndTrust: the imagebuilder's pull policy and pull secrets reach the build pod
// (a Job without them pulls from where the roles never do), and --build-ca-configmap mounts the
// ConfigMap where the build's TLS roots are read, beside the image's own bundle.
func TestBuildJobPullAndTrust(t *testing.T) {
	plain := buildJob(jobSpec{Image: testImage(), Source: banlieuev1.ImageSource{ImportFrom: "https://a/b.img"}, Kind: banlieuev1.ArtifactCloudImage})
	pod := plain.Spec.Template.Spec
	if c := pod.Containers[0]; c.ImagePullPolicy != "" || pod.ImagePullSecrets != nil || len(pod.Volumes) != 1 || len(c.VolumeMounts) != 1 {
		t.Errorf("without pull settings or CA: policy %q, secrets %v, volumes %v, mounts %v", c.ImagePullPolicy, pod.ImagePullSecrets, pod.Volumes, c.VolumeMounts)
	}
	for _, e := range pod.Containers[0].Env {
		if e.Name == "SSL_CERT_DIR" {
			t.Errorf("SSL_CERT_DIR %q without --build-ca-configmap", e.Value)
		}
	}

	job := buildJob(jobSpec{Image: testImage(), Source: banlieuev1.ImageSource{ImportFrom: "https://a/b.img"}, Kind: banlieuev1.ArtifactCloudImage,
		Pull: jobimage.Pull{Policy: corev1.PullNever, Secrets: []string{"regcred"}}, CAConfigMap: "mirror-ca"})
	pod = job.Spec.Template.Spec
	c := pod.Containers[0]
	if c.ImagePullPolicy != corev1.PullNever || !reflect.DeepEqual(pod.ImagePullSecrets, []corev1.LocalObjectReference{{Name: "regcred"}}) {
		t.Errorf("pull policy %q, secrets %v; want Never and regcred", c.ImagePullPolicy, pod.ImagePullSecrets)
	}
	wantVolume := corev1.Volume{Name: "source-ca", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
		LocalObjectReference: corev1.LocalObjectReference{Name: "mirror-ca"}}}}
	if !slices.ContainsFunc(pod.Volumes, func(v corev1.Volume) bool { return reflect.DeepEqual(v, wantVolume) }) {
		t.Errorf("volumes %+v, want %+v", pod.Volumes, wantVolume)
	}
	wantMount := corev1.VolumeMount{Name: "source-ca", MountPath: "/etc/banlieue/source-ca", ReadOnly: true}
	if !slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool { return reflect.DeepEqual(m, wantMount) }) || !slices.Contains(c.Env, corev1.EnvVar{Name: "SSL_CERT_DIR", Value: wantMount.MountPath}) {
		t.Errorf("mounts %+v, env %+v; want %+v and SSL_CERT_DIR at it", c.VolumeMounts, c.Env, wantMount)
	}
}
