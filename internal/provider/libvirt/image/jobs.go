package image

import (
	"fmt"
	"path"
	"regexp"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
	"banlieue.io/banlieue/internal/imagejob"
	"banlieue.io/banlieue/internal/jobbounds"
	"banlieue.io/banlieue/internal/jobimage"
)

// Labels and annotations of an import Job.
const (
	appName         = "banlieue"
	importComponent = "libvirt-import"
	artifactsMount  = imagejob.ArtifactsMount
	// finishedTTL keeps a finished Job (and its logs) for a day, long enough to read why an
	// import failed, short enough that old Jobs do not pile up.
	finishedTTL = 86400
)

// importJobSpec is everything an import Job is made of.
type importJobSpec struct {
	Image    *banlieuev1.VMImage
	Provider *banlieuev1.Provider
	Pool     string
	// Volume is the volume the Job writes (ArtifactVolumeName).
	Volume         string
	Namespace      string
	ContainerImage string
	ServiceAccount string
	Tolerations    []corev1.Toleration
	// Bounds are the Job's deadline and resources (--import-deadline, --import-memory-limit, ...).
	Bounds jobbounds.Bounds
	// Pull is the pull policy and secrets of the pod (--import-image-pull-policy, ...).
	Pull jobimage.Pull
}

// importJob is the import Job of docs/guides/libvirt-provider.md, "6. Get an image onto the host".
func importJob(s importJobSpec) *batchv1.Job {
	artifact := s.Image.Status.BuildArtifact
	labels := map[string]string{
		banlieuev1.LabelName:        appName,
		banlieuev1.LabelComponent:   importComponent,
		banlieuev1.LabelVMImage:     labelValue(s.Image.Name),
		banlieuev1.LabelStoragePool: labelValue(s.Pool),
	}
	args := []string{"provider", "libvirt", "import",
		"--vmimage", s.Image.Name,
		"--provider", s.Provider.Name,
		"--provider-namespace", s.Provider.Namespace,
		"--pool", s.Pool,
		"--source", artifactPath(artifact.File),
		"--volume-name", s.Volume,
		"--checksum", artifact.Checksum,
	}
	if artifact.ExtentDigest != "" {
		// Verified instead of the sha256, at the cost of the data only (ADR-0134); an artifact
		// built before the builder published it is verified by its sha256 alone.
		args = append(args, "--extent-digest", artifact.ExtentDigest)
	}
	return imagejob.New(imagejob.Spec{
		Name:      ImportJobName(s.Image.Name, s.Provider.Namespace, s.Provider.Name, s.Pool),
		Namespace: s.Namespace,
		Labels:    labels,
		Annotations: map[string]string{
			banlieuev1.AnnotationArtifactChecksum: artifact.Checksum,
			banlieuev1.AnnotationProvider:         s.Provider.Namespace + "/" + s.Provider.Name,
			banlieuev1.AnnotationImportIdentity:   importIdentity(s.Image.Name, s.Provider.Namespace, s.Provider.Name, s.Pool, artifact.Checksum),
		},
		Owner: s.Image,
		// One retry: a partial upload can only be redone from the start, and the import is
		// idempotent, so a second attempt finishes what the first left; more would only hammer
		// the host.
		BackoffLimit:     1,
		TTLAfterFinished: ptr.To[int32](finishedTTL),
		Container:        "import",
		Image:            s.ContainerImage,
		Args:             args,
		Bounds:           s.Bounds,
		Pull:             s.Pull,
		ServiceAccount:   s.ServiceAccount,
		Tolerations:      s.Tolerations,
		PVC:              artifact.PVCRef.Name,
	})
}

// artifactPath is where the artifact appears inside the import pod. Cleaning it as an absolute
// path keeps a file name with ".." inside the mount.
func artifactPath(file string) string {
	return path.Join(artifactsMount, path.Clean("/"+file))
}

// jobZone maps an existing import Job onto its pool's zone. A failed pod whose retry is running,
// or waits out the Job controller's back-off, is still importing: the retry exists to finish
// what the first attempt left. Only the Job's own verdict (jobFailed) fails the zone.
func jobZone(pool string, job *batchv1.Job) banlieuev1.ImageZoneStatus {
	switch {
	case job.Status.Succeeded > 0:
		return banlieuev1.ImageZoneStatus{Name: pool, Ready: true, Reason: banlieuev1.ReasonReconciled, ResolvedRef: pool + "/" + job.Name}
	case jobFailed(job):
		return notReadyZone(pool, banlieuev1.ReasonImportFailed, failedMessage(job))
	default:
		return notReadyZone(pool, banlieuev1.ReasonImporting, "import Job running")
	}
}

// jobFailed tells whether the Job controller gave the Job up: its Failed condition, or
// FailureTarget, which it sets first while the last pods terminate. Failed pods alone are no
// verdict: between a pod's failure and its retry's creation (the back-off, 10 s and more) the
// Job has failed pods and none active.
func jobFailed(job *batchv1.Job) bool {
	for _, c := range job.Status.Conditions {
		if (c.Type == batchv1.JobFailed || c.Type == batchv1.JobFailureTarget) && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

// failedMessage is the zone's message for a failed import Job. A Job stopped at its deadline
// says so: its killed pod's log tells nothing of why. The Job controller counts the pods it
// kills at the deadline as failed, so a Job stopped with no pod counted never had one: the Job
// controller could not create it (a missing ServiceAccount, a quota, an admission refusal),
// which only the Job's events tell.
func failedMessage(job *batchv1.Job) string {
	for _, c := range job.Status.Conditions {
		if c.Type == batchv1.JobFailed && c.Status == corev1.ConditionTrue && c.Reason == batchv1.JobReasonDeadlineExceeded {
			deadline := "its deadline"
			if s := job.Spec.ActiveDeadlineSeconds; s != nil {
				deadline = fmt.Sprintf("its deadline of %s", time.Duration(*s)*time.Second)
			}
			if job.Status.Failed == 0 && job.Status.Succeeded == 0 {
				return fmt.Sprintf("import Job %s was stopped at %s (--import-deadline) without a pod ever running: the Job controller "+
					"could not create one; its events say why (kubectl -n %s describe job %s)", job.Name, deadline, job.Namespace, job.Name)
			}
			return fmt.Sprintf("import Job %s was stopped at %s (--import-deadline): the upload to the host was too slow", job.Name, deadline)
		}
	}
	return "import Job " + job.Name + " failed"
}

// byHandNote is what the zone of a failed import adds: the command that repeats what job ran,
// its own arguments, so a by-hand run writes the same volume (--volume-name) and verifies the
// same digests (--checksum, --extent-digest) as the Job (docs/guides/libvirt-provider.md,
// "Running an import by hand"). Its --source is the artifact's path inside the Job's pod; by
// hand it is that file of the artifacts PVC.
func byHandNote(job *batchv1.Job) string {
	pod := job.Spec.Template.Spec
	if len(pod.Containers) == 0 {
		return ""
	}
	args := pod.Containers[0].Args
	var source, pvc string
	for i := 0; i+1 < len(args); i++ {
		if args[i] == "--source" {
			source = args[i+1]
		}
	}
	for _, v := range pod.Volumes {
		if v.PersistentVolumeClaim != nil {
			pvc = v.PersistentVolumeClaim.ClaimName
		}
	}
	quoted := make([]string, len(args))
	for i, a := range args {
		quoted[i] = shellQuote(a)
	}
	note := "; to repeat it by hand: banlieue " + strings.Join(quoted, " ")
	if source != "" && pvc != "" {
		note += fmt.Sprintf(" (--source %s is file %s of PVC %s/%s)", shellQuote(source),
			strings.TrimPrefix(source, artifactsMount+"/"), job.Namespace, pvc)
	}
	return note
}

// plainWord is an argument a POSIX shell takes as it is.
var plainWord = regexp.MustCompile(`^[A-Za-z0-9_./:=@+,-]+$`)

// shellQuote is a as one word of a POSIX shell command line.
func shellQuote(a string) string {
	if plainWord.MatchString(a) {
		return a
	}
	return "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
}
