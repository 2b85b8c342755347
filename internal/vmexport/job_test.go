package vmexport

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
	"banlieue.io/banlieue/internal/jobbounds"
	"banlieue.io/banlieue/internal/testenv"
	"banlieue.io/banlieue/internal/vmexport/exportjob"
	"banlieue.io/banlieue/pkg/libvirt"
)

func exportFixture() *banlieuev1.VirtualMachineExport {
	return &banlieuev1.VirtualMachineExport{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "web-01-backup", UID: "0f6b1c2e-1111-2222-3333-444455556666"},
		Spec: banlieuev1.VirtualMachineExportSpec{VirtualMachineName: "web-01", Target: banlieuev1.ExportTarget{
			Registry: &banlieuev1.ExportRegistryTarget{Repository: "registry.example:5000/team-a/web-01",
				CredentialsSecretRef: &banlieuev1.ExportSecretReference{Name: "push-creds"}}}},
	}
}

// TestExportJob: the exportjob.Job runs the command's --volume form for the export's UID, pushes to the
// export's repository, is bounded, non-root and marked with the export; the credentials are a
// mounted file, never an argument or an environment value.
func TestExportJob(t *testing.T) {
	e := exportFixture()
	vol := VolumeRef{ProviderNamespace: "infra", Provider: "host-a", Domain: "team-a-web-01", Pool: "default", Volume: "team-a-web-01-root.qcow2"}
	b := jobbounds.DefaultImport()
	job := exportjob.Job(exportjob.JobSpec{Export: e, Volume: vol, Namespace: "banlieue-imagebuild", Image: "registry.example/banlieue:v1",
		ServiceAccount: "banlieue-provider-libvirt-host-a-abc-export", CredentialsSecret: exportjob.JobName(string(e.UID)), Bounds: b})

	if job.Name != "banlieue-export-"+string(e.UID) || len(job.Name) > 63 || job.Namespace != "banlieue-imagebuild" {
		t.Errorf("exportjob.Job %s/%s", job.Namespace, job.Name)
	}
	if got := job.Annotations[exportjob.AnnotationExport]; got != "team-a/web-01-backup/"+string(e.UID) {
		t.Errorf("annotation %s = %q: the proof of owner names the export and its UID", exportjob.AnnotationExport, got)
	}
	if job.Spec.ActiveDeadlineSeconds == nil || *job.Spec.ActiveDeadlineSeconds != int64(b.Deadline/time.Second) ||
		ptr.Deref(job.Spec.BackoffLimit, -1) != 0 || job.Spec.TTLSecondsAfterFinished == nil {
		t.Errorf("bounds: deadline %v, backoff %v, ttl %v", job.Spec.ActiveDeadlineSeconds, job.Spec.BackoffLimit, job.Spec.TTLSecondsAfterFinished)
	}
	pod := job.Spec.Template.Spec
	if pod.ServiceAccountName != "banlieue-provider-libvirt-host-a-abc-export" || pod.RestartPolicy != corev1.RestartPolicyNever ||
		!ptr.Deref(pod.SecurityContext.RunAsNonRoot, false) || len(pod.Containers) != 1 {
		t.Fatalf("pod %+v", pod)
	}
	c := pod.Containers[0]
	want := []string{"provider", "libvirt", "export", "--volume", vol.Volume, "--pool", "default", "--domain", "team-a-web-01",
		"--provider", "host-a", "--provider-namespace", "infra", "--id", string(e.UID),
		"--registry", "registry.example:5000/team-a/web-01", "--scratch-dir", "/scratch", "--result-file", "/dev/termination-log",
		"--deadline", (6*time.Hour - time.Minute).String()}
	if !slices.Equal(c.Args, want) {
		t.Errorf("args\n got %q\nwant %q", c.Args, want)
	}
	if c.Resources.Limits.Memory().IsZero() || c.Resources.Requests.Cpu().IsZero() || !ptr.Deref(c.SecurityContext.ReadOnlyRootFilesystem, false) ||
		c.TerminationMessagePolicy != corev1.TerminationMessageFallbackToLogsOnError {
		t.Errorf("container bounds or security: %+v", c)
	}
	var mounted bool
	for _, v := range pod.Volumes {
		if v.Secret != nil && v.Secret.SecretName == exportjob.JobName(string(e.UID)) {
			mounted = len(v.Secret.Items) == 1 && v.Secret.Items[0].Path == "config.json"
		}
	}
	if !mounted || !slices.Contains(c.Env, corev1.EnvVar{Name: "DOCKER_CONFIG", Value: "/docker"}) {
		t.Errorf("credentials not mounted as DOCKER_CONFIG: volumes %+v, env %+v", pod.Volumes, c.Env)
	}
	for _, a := range append(slices.Clone(c.Args), c.Command...) {
		if strings.Contains(a, "push-creds") || strings.Contains(a, "docker") {
			t.Errorf("argument %q names the credentials", a)
		}
	}

	// Anonymous: no Secret, no DOCKER_CONFIG.
	anon := exportjob.Job(exportjob.JobSpec{Export: e, Volume: vol, Namespace: "b", Image: "i", ServiceAccount: "s", Bounds: b})
	if len(anon.Spec.Template.Spec.Volumes) != 1 || len(anon.Spec.Template.Spec.Containers[0].Env) != 1 {
		t.Errorf("anonymous push: volumes %+v env %+v", anon.Spec.Template.Spec.Volumes, anon.Spec.Template.Spec.Containers[0].Env)
	}
	if slices.Contains(anon.Spec.Template.Spec.Containers[0].Args, "--insecure-registry") {
		t.Errorf("a registry not listed is reached over plain HTTP: %q", anon.Spec.Template.Spec.Containers[0].Args)
	}
	plain := exportjob.Job(exportjob.JobSpec{Export: e, Volume: vol, Namespace: "b", Image: "i", ServiceAccount: "s", Bounds: b, InsecureRegistry: true})
	if args := plain.Spec.Template.Spec.Containers[0].Args; !slices.Equal(args, append(slices.Clone(want), "--insecure-registry")) {
		t.Errorf("plain HTTP: args %q", args)
	}
}

// TestInsecureRegistry: only the registry an administrator listed, as go-containerregistry names
// it (host, or host:port), is reached over plain HTTP; its repositories' paths and tags do not
// matter, and a port or a prefix is not a match.
func TestInsecureRegistry(t *testing.T) {
	listed := []string{"registry.lab:5000", "10.0.0.7"}
	for _, tt := range []struct {
		repository string
		want       bool
	}{
		{"registry.lab:5000/team-a/web-01", true},
		{"registry.lab:5000/team-a/web-01:nightly", true},
		{"10.0.0.7/exports/vm", true},
		{"registry.lab/team-a/web-01", false},
		{"registry.lab:5001/team-a/web-01", false},
		{"10.0.0.70/exports/vm", false},
		{"registry.lab:5000.evil.example/x", false},
		{"docker.io/library/busybox", false},
		{"Not A Reference", false},
	} {
		if got := exportjob.InsecureRegistry(tt.repository, listed); got != tt.want {
			t.Errorf("InsecureRegistry(%q) = %v, want %v", tt.repository, got, tt.want)
		}
	}
	if exportjob.InsecureRegistry("registry.lab:5000/x", nil) {
		t.Error("with nothing listed, a registry is reached over plain HTTP")
	}
}

// TestExportJobNetworkPolicy: an export Job's pod is isolated both ways by the install's policies
// of the build namespace (config/networkpolicy/imagebuild.yaml; the chart renders the same, held by
// test/install), nothing may connect to it, and it may reach the API server (the Provider and its
// credentials), DNS, libvirtd's TLS port (the disk) and HTTPS (the registry), and nothing else.
func TestExportJobNetworkPolicy(t *testing.T) {
	const ns = "banlieue-imagebuild"
	policies := testenv.NetworkPolicyFiles(t, ns, "config/networkpolicy/imagebuild.yaml")
	vol := VolumeRef{ProviderNamespace: "infra", Provider: "host-a", Domain: "team-a-web-01", Pool: "default", Volume: "team-a-web-01-root.qcow2"}
	job := exportjob.Job(exportjob.JobSpec{Export: exportFixture(), Volume: vol, Namespace: ns, Image: "banlieue:v1",
		ServiceAccount: "s", Bounds: jobbounds.DefaultImport()})
	testenv.CheckJobPod(t, policies, ns, job.Spec.Template, []string{"banlieue-default-deny", "banlieue-export-jobs"},
		[]string{fmt.Sprintf("TCP/%d", libvirt.DefaultPort), "TCP/443", "TCP/53", "TCP/6443", "UDP/53"})
}

func TestCommandDeadline(t *testing.T) {
	for job, want := range map[time.Duration]time.Duration{0: 0, 6 * time.Hour: 6*time.Hour - time.Minute, 5 * time.Minute: 4*time.Minute + 30*time.Second} {
		if got := exportjob.CommandDeadline(job); got != want {
			t.Errorf("exportjob.CommandDeadline(%s) = %s, want %s", job, got, want)
		}
	}
}

// TestJobOutcome: a running exportjob.Job is Exporting; a finished one is read from its Report, each failed
// step its reason; what cannot be read, or is not a pushed disk of the export's repository, fails
// with ExportJobFailed and never reaches the status.
func TestJobOutcome(t *testing.T) {
	const repo = "registry.example:5000/team-a/web-01"
	digest := "sha256:" + strings.Repeat("a", 64)
	image := repo + "@sha256:" + strings.Repeat("b", 64)
	job := func(conds ...batchv1.JobCondition) *batchv1.Job {
		return &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "banlieue-imagebuild", Name: "banlieue-export-u"},
			Spec:   batchv1.JobSpec{ActiveDeadlineSeconds: ptr.To[int64](3600)},
			Status: batchv1.JobStatus{Conditions: conds}}
	}
	complete := batchv1.JobCondition{Type: batchv1.JobComplete, Status: corev1.ConditionTrue}
	failed := batchv1.JobCondition{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, Reason: batchv1.JobReasonBackoffLimitExceeded}
	deadline := batchv1.JobCondition{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, Reason: batchv1.JobReasonDeadlineExceeded}
	ok := string(EncodeReport(MachineResult{Result: Result{Size: 1 << 20, Digest: digest}, Image: image}, nil))
	fail := func(step string) string {
		return string(EncodeReport(MachineResult{}, &StepError{step, errors.New("boom")}))
	}
	for _, tc := range []struct {
		name    string
		job     *batchv1.Job
		msg     string
		phase   banlieuev1.ExportPhase
		reason  string
		inMsg   string
		digest  string
		imageTo string
	}{
		{"running", job(), "", banlieuev1.ExportExporting, banlieuev1.ReasonExporting, "copies the disk", "", ""},
		{"running, a report already", job(), ok, banlieuev1.ExportExporting, banlieuev1.ReasonExporting, "", "", ""},
		{"succeeded", job(complete), ok, banlieuev1.ExportReady, banlieuev1.ReasonExportSucceeded, image, digest, image},
		{"flatten", job(failed), fail(StepFlatten), banlieuev1.ExportFailed, banlieuev1.ReasonExportFlattenFailed, "export Flatten: boom", "", ""},
		{"download", job(failed), fail(StepDownload), banlieuev1.ExportFailed, banlieuev1.ReasonExportDownloadFailed, "boom", "", ""},
		{"verify", job(failed), fail(StepVerify), banlieuev1.ExportFailed, banlieuev1.ReasonExportVerifyFailed, "boom", "", ""},
		{"publish", job(failed), fail(StepPublish), banlieuev1.ExportFailed, banlieuev1.ReasonExportPublishFailed, "boom", "", ""},
		{"cleanup", job(failed), fail(StepCleanup), banlieuev1.ExportFailed, banlieuev1.ReasonExportCleanupFailed, "boom", "", ""},
		{"before any step", job(failed), string(EncodeReport(MachineResult{}, errors.New("connecting to Provider infra/host-a: refused"))),
			banlieuev1.ExportFailed, banlieuev1.ReasonExportFlattenFailed, "connecting to Provider", "", ""},
		{"deadline, no report", job(deadline), "", banlieuev1.ExportFailed, banlieuev1.ReasonExportDownloadFailed, "deadline of 1h0m0s", "", ""},
		{"no pod ever", job(failed), "", banlieuev1.ExportFailed, banlieuev1.ReasonExportJobFailed, "without a result", "", ""},
		{"a log tail, not a report", job(failed), "panic: runtime error", banlieuev1.ExportFailed, banlieuev1.ReasonExportJobFailed, "without a result", "", ""},
		{"complete, no report", job(complete), "", banlieuev1.ExportFailed, banlieuev1.ReasonExportJobFailed, "without a result", "", ""},
		{"another repository", job(complete),
			string(EncodeReport(MachineResult{Result: Result{Size: 1, Digest: digest}, Image: "evil.example/x@sha256:" + strings.Repeat("b", 64)}, nil)),
			banlieuev1.ExportFailed, banlieuev1.ReasonExportJobFailed, "not a pushed disk", "", ""},
		{"a digest not sha256", job(complete),
			string(EncodeReport(MachineResult{Result: Result{Size: 1, Digest: "md5:x"}, Image: image}, nil)),
			banlieuev1.ExportFailed, banlieuev1.ReasonExportJobFailed, "not a pushed disk", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := exportjob.JobOutcome(tc.job, tc.msg, repo)
			if got.Phase != tc.phase || got.Reason != tc.reason || !strings.Contains(got.Message, tc.inMsg) ||
				got.Digest != tc.digest || got.Image != tc.imageTo {
				t.Errorf("outcome %+v, want phase %s reason %s, message containing %q, digest %q image %q",
					got, tc.phase, tc.reason, tc.inMsg, tc.digest, tc.imageTo)
			}
			if got.Phase == banlieuev1.ExportFailed && !strings.Contains(got.Message, "banlieue-imagebuild/banlieue-export-u") {
				t.Errorf("message %q does not name the exportjob.Job", got.Message)
			}
		})
	}
}

func TestTerminationMessage(t *testing.T) {
	pods := []corev1.Pod{{Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{
		{Name: "sidecar", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Message: "no"}}},
		{Name: exportjob.ContainerName, State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Message: "yes"}}},
	}}}}
	if got := exportjob.TerminationMessage(pods); got != "yes" {
		t.Errorf("exportjob.TerminationMessage = %q", got)
	}
	if got := exportjob.TerminationMessage(nil); got != "" {
		t.Errorf("no pods: %q", got)
	}
}
