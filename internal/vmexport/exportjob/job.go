package exportjob

import (
	"encoding/json"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
	"banlieue.io/banlieue/internal/jobbounds"
	"banlieue.io/banlieue/internal/jobimage"
)

// The marks of an export Job. An owner reference cannot cross from the build namespace to the
// export's, so the proof that a Job is an export's is its name (the export's UID) and
// AnnotationExport, which names the export and its UID; the controller acts on a Job only when
// both match.
const (
	// Component is the Job's app.kubernetes.io/component.
	Component = "libvirt-export"
	// AnnotationExport is "<namespace>/<name>/<uid>" of the export a Job copies for.
	AnnotationExport = "banlieue.io/export"
	// ContainerName is the Job's one container, whose termination message is the Report.
	ContainerName = "export"
	// dockerConfigMount holds the registry credentials' config.json (DOCKER_CONFIG).
	dockerConfigMount = "/docker"
	// ScratchMount is where the host copy's scratch volume is mounted in the Job's pod.
	ScratchMount = "/scratch"
	// finishedTTL keeps a finished Job and its pod's log for a day after the controller has read it.
	finishedTTL = 86400
)

// InsecureRegistry is whether repository's registry (host or host:port, as go-containerregistry
// names it) is one of registries, which the administrator lets export Jobs reach over plain
// HTTP; an unparsable repository is not.
func InsecureRegistry(repository string, registries []string) bool {
	ref, err := name.ParseReference(repository)
	return err == nil && slices.Contains(registries, ref.Context().RegistryStr())
}

// JobName is the Job of the export with uid: one Job per export, found again by every pass.
func JobName(uid string) string { return "banlieue-export-" + uid }

// ExportRef is the value of AnnotationExport for an export.
func ExportRef(namespace, name, uid string) string { return namespace + "/" + name + "/" + uid }

// JobSpec is everything an export Job is made of.
type JobSpec struct {
	// Export is the VirtualMachineExport the Job copies for; its UID is the Job's name and the
	// host copy's --id, so a retry replaces what an earlier attempt left.
	Export *banlieuev1.VirtualMachineExport
	// Volume is the machine's volume, resolved by the controller from the machine's status.
	Volume VolumeRef
	// Namespace is the build namespace; Image the banlieue image; ServiceAccount the Provider's
	// export account there.
	Namespace, Image, ServiceAccount string
	// CredentialsSecret, when set, is the Secret in Namespace holding .dockerconfigjson, mounted
	// as DOCKER_CONFIG: never an argument or an environment value.
	CredentialsSecret string
	// InsecureRegistry reaches the export's registry over plain HTTP (InsecureRegistry).
	InsecureRegistry bool
	Bounds           jobbounds.Bounds
	Pull             jobimage.Pull
	Tolerations      []corev1.Toleration
}

// Job is the export Job of s: `banlieue provider libvirt export --volume ...` pushing to the
// export's registry, its outcome written to the termination message, bounded by Bounds.
func Job(s JobSpec) *batchv1.Job {
	e := s.Export
	args := []string{"provider", "libvirt", "export",
		"--volume", s.Volume.Volume,
		"--pool", s.Volume.Pool,
		"--domain", s.Volume.Domain,
		"--provider", s.Volume.Provider,
		"--provider-namespace", s.Volume.ProviderNamespace,
		"--id", string(e.UID),
		"--registry", e.Spec.Target.Registry.Repository,
		"--scratch-dir", ScratchMount,
		"--result-file", corev1.TerminationMessagePathDefault,
	}
	if d := CommandDeadline(s.Bounds.Deadline); d > 0 {
		args = append(args, "--deadline", d.String())
	}
	if s.InsecureRegistry {
		args = append(args, "--insecure-registry")
	}
	labels := map[string]string{
		banlieuev1.LabelName:      "banlieue",
		banlieuev1.LabelComponent: Component,
	}
	env := []corev1.EnvVar{}
	mounts := []corev1.VolumeMount{{Name: "scratch", MountPath: ScratchMount}}
	volumes := []corev1.Volume{{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
	if s.CredentialsSecret != "" {
		env = append(env, corev1.EnvVar{Name: "DOCKER_CONFIG", Value: dockerConfigMount})
		mounts = append(mounts, corev1.VolumeMount{Name: "docker-config", MountPath: dockerConfigMount, ReadOnly: true})
		volumes = append(volumes, corev1.Volume{Name: "docker-config", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
			SecretName: s.CredentialsSecret,
			Items:      []corev1.KeyToPath{{Key: corev1.DockerConfigJsonKey, Path: "config.json"}},
		}}})
	}
	pod := corev1.PodSpec{
		RestartPolicy:      corev1.RestartPolicyNever,
		ServiceAccountName: s.ServiceAccount,
		Tolerations:        s.Tolerations,
		SecurityContext: &corev1.PodSecurityContext{
			RunAsNonRoot:   ptr.To(true),
			RunAsUser:      ptr.To[int64](65532),
			SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
		},
		Containers: []corev1.Container{{
			Name:         ContainerName,
			Image:        s.Image,
			Args:         args,
			Env:          append(env, s.Bounds.GoMemLimit()),
			Resources:    s.Bounds.Resources(),
			VolumeMounts: mounts,
			// The command writes its Report there, also on failure; a crash before it still
			// leaves the end of its log.
			TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
			SecurityContext: &corev1.SecurityContext{
				AllowPrivilegeEscalation: ptr.To(false),
				ReadOnlyRootFilesystem:   ptr.To(true),
				Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
			},
		}},
		Volumes: volumes,
	}
	s.Pull.Apply(&pod)
	return &batchv1.Job{
		TypeMeta: metav1.TypeMeta{APIVersion: "batch/v1", Kind: "Job"},
		ObjectMeta: metav1.ObjectMeta{
			Name:        JobName(string(e.UID)),
			Namespace:   s.Namespace,
			Labels:      labels,
			Annotations: map[string]string{AnnotationExport: ExportRef(e.Namespace, e.Name, string(e.UID))},
		},
		Spec: batchv1.JobSpec{
			// No retry: the outcome is the one pod's termination message, and a failed copy is
			// a Failed export; another export is another try.
			BackoffLimit:            ptr.To[int32](0),
			TTLSecondsAfterFinished: ptr.To[int32](finishedTTL),
			ActiveDeadlineSeconds:   s.Bounds.ActiveDeadlineSeconds(),
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: maps.Clone(labels)},
				Spec:       pod,
			},
		},
	}
}

// CommandDeadline leaves the command a minute (a tenth of short deadlines) before the Job's, so
// it stops, deletes the host's copy and writes its Report before the pod is killed.
func CommandDeadline(job time.Duration) time.Duration {
	if job <= 0 {
		return 0
	}
	return job - min(time.Minute, job/10)
}

// Outcome is what an export Job's state means for its export: the phase, the Ready reason and
// message, and the published result when Ready.
type Outcome struct {
	Phase           banlieuev1.ExportPhase
	Reason, Message string
	Digest, Image   string
	Size            int64
}

var (
	digestRE = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)
	// stepReasons are the Ready reasons of the steps of ToDir and ExportMachine. A failure before
	// the first step (the host unreachable, the domain found running) is the host copy's.
	stepReasons = map[string]string{
		"":          banlieuev1.ReasonExportFlattenFailed,
		StepFlatten: banlieuev1.ReasonExportFlattenFailed, StepDownload: banlieuev1.ReasonExportDownloadFailed,
		StepVerify: banlieuev1.ReasonExportVerifyFailed, StepPublish: banlieuev1.ReasonExportPublishFailed,
		StepCleanup: banlieuev1.ReasonExportCleanupFailed,
	}
)

// JobOutcome reads job and the termination message of its pod (empty: none yet) for an export
// pushing to repository. Only a finished Job decides; a Report that does not fit what a
// successful export publishes (the digest's form, an image of another repository) is refused
// rather than written into the export's status.
func JobOutcome(job *batchv1.Job, message, repository string) Outcome {
	failed := func(reason, msg string) Outcome {
		return Outcome{Phase: banlieuev1.ExportFailed, Reason: reason, Message: msg}
	}
	finished, ok := jobFinished(job)
	if !finished {
		return Outcome{Phase: banlieuev1.ExportExporting, Reason: banlieuev1.ReasonExporting,
			Message: fmt.Sprintf("Job %s/%s copies the disk; the VM is held stopped until the export ends", job.Namespace, job.Name)}
	}
	var r Report
	if err := json.Unmarshal([]byte(message), &r); err != nil || (r.MachineResult == nil && r.Error == "") {
		if deadline, stopped := stoppedAtDeadline(job); stopped {
			return failed(banlieuev1.ReasonExportDownloadFailed, fmt.Sprintf(
				"Job %s/%s was stopped at its deadline of %s before it reported (--export-deadline): the copy was too slow", job.Namespace, job.Name, deadline))
		}
		return failed(banlieuev1.ReasonExportJobFailed, fmt.Sprintf(
			"Job %s/%s finished without a result (its pod was never created, was evicted or killed): kubectl -n %s describe job %s",
			job.Namespace, job.Name, job.Namespace, job.Name))
	}
	if r.Error != "" || !ok {
		reason, known := stepReasons[r.Step]
		if !known {
			reason = banlieuev1.ReasonExportJobFailed
		}
		msg := r.Error
		if msg == "" {
			msg = "the Job failed after reporting a result"
		}
		return failed(reason, fmt.Sprintf("Job %s/%s: %s", job.Namespace, job.Name, msg))
	}
	res := r.MachineResult
	if !digestRE.MatchString(res.Digest) || res.Size <= 0 || len(res.Image) > 600 || !pushedTo(res.Image, repository) {
		return failed(banlieuev1.ReasonExportJobFailed, fmt.Sprintf(
			"Job %s/%s reported a result that is not a pushed disk of %s: digest %.80q, image %.120q, size %d",
			job.Namespace, job.Name, repository, res.Digest, res.Image, res.Size))
	}
	return Outcome{Phase: banlieuev1.ExportReady, Reason: banlieuev1.ReasonExportSucceeded,
		Message: fmt.Sprintf("pushed %s (%d bytes, disk %s)", res.Image, res.Size, res.Digest),
		Digest:  res.Digest, Image: res.Image, Size: res.Size}
}

// pushedTo reports whether image is repository's (as the registry client spells it) by a
// sha256 digest.
func pushedTo(image, repository string) bool {
	d, err := name.NewDigest(image)
	if err != nil || !digestRE.MatchString(d.DigestStr()) {
		return false
	}
	repo, err := name.NewRepository(repository)
	return err == nil && d.Context().Name() == repo.Name()
}

// jobFinished reports whether the Job controller is done with job, and whether it succeeded.
func jobFinished(job *batchv1.Job) (finished, succeeded bool) {
	for _, c := range job.Status.Conditions {
		if c.Status != corev1.ConditionTrue {
			continue
		}
		switch c.Type {
		case batchv1.JobComplete, batchv1.JobSuccessCriteriaMet:
			return true, true
		case batchv1.JobFailed, batchv1.JobFailureTarget:
			return true, false
		}
	}
	return false, false
}

// stoppedAtDeadline reports whether job was stopped at its activeDeadlineSeconds, and that deadline.
func stoppedAtDeadline(job *batchv1.Job) (time.Duration, bool) {
	for _, c := range job.Status.Conditions {
		if (c.Type == batchv1.JobFailed || c.Type == batchv1.JobFailureTarget) && c.Status == corev1.ConditionTrue &&
			c.Reason == batchv1.JobReasonDeadlineExceeded {
			var d time.Duration
			if s := job.Spec.ActiveDeadlineSeconds; s != nil {
				d = time.Duration(*s) * time.Second
			}
			return d, true
		}
	}
	return 0, false
}

// TerminationMessage is the export container's termination message among pods (the Job's),
// empty while none has terminated.
func TerminationMessage(pods []corev1.Pod) string {
	for i := range pods {
		for _, cs := range pods[i].Status.ContainerStatuses {
			if cs.Name == ContainerName && cs.State.Terminated != nil {
				return cs.State.Terminated.Message
			}
		}
	}
	return ""
}
