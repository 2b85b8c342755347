package imagebuilder

import (
	"fmt"
	"net/url"
	"path"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"

	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
	"banlieue.io/banlieue/internal/imagebuilder/build"
	"banlieue.io/banlieue/internal/imagejob"
	"banlieue.io/banlieue/internal/jobbounds"
	"banlieue.io/banlieue/internal/jobimage"
	"banlieue.io/banlieue/internal/naming"
)

// Labels and annotations of a build Job.
const (

	// ComponentBuild tells build Jobs from the provider's import Jobs, which share the other
	// labels and the namespace.
	ComponentBuild = "image-build"

	appName = "banlieue"
	// ArtifactsMount is where the artifacts PVC appears in the build pod.
	ArtifactsMount = imagejob.ArtifactsMount
	// caMount is where the ConfigMap of --build-ca-configmap appears in the build pod. Go's
	// crypto/x509 reads every file of SSL_CERT_DIR beside the image's bundle file
	// (/etc/ssl/certs/ca-certificates.crt), so the image's roots stay trusted.
	caMount = "/etc/banlieue/source-ca"
	// buildBackoffLimit: a download resumes where the last attempt stopped (the partial file
	// lives on the PVC), so two retries ride out a flaky mirror without hammering a broken one.
	buildBackoffLimit = 2
)

// BuildJobName is `build-<vmimage>`, capped at 63 with a hash suffix (docs/decisions.md).
func BuildJobName(vmimage string) string {
	return naming.Capped("build-" + vmimage)
}

// urlSource is the first Url source with importFrom set (docs/guides/libvirt-provider.md, "6. Get an image onto the host"), whatever its provider
// class: the artifact is the same for every backend. i is its index in spec.sources.
func urlSource(img *banlieuev1.VMImage) (src banlieuev1.ImageSource, i int, ok bool) {
	for i, s := range img.Spec.Sources {
		if s.Kind == banlieuev1.SourceURL && s.ImportFrom != "" {
			return s, i, true
		}
	}
	return banlieuev1.ImageSource{}, 0, false
}

// checkSource refuses what the build would refuse anyway, so the user learns it from the status
// without a Job: plain http without a checksum is unauthenticated, other schemes are not
// supported, and an OCI reference (a string without "://") needs a digest or a checksum
// unless the source opts out (docs/guides/image-sources.md, "Transport"). i is the source's
// index in spec.sources, for the message.
func checkSource(src banlieuev1.ImageSource, i int) error {
	from := src.ImportFrom
	switch {
	case strings.HasPrefix(from, "https://"):
	case strings.HasPrefix(from, "http://"):
		if src.Checksum == "" {
			return fmt.Errorf("importFrom %s: a plain http:// source needs a checksum", build.RedactURL(from))
		}
	case strings.Contains(from, "://"):
		return fmt.Errorf("importFrom %s: neither an https:// URL nor an OCI reference", build.RedactURL(from))
	case src.Checksum == "" && !src.AllowUnverifiedTag:
		// A malformed reference is the build's to report; only a well-formed tag is refused.
		if ref, err := name.ParseReference(from); err == nil && !isDigest(ref) {
			return fmt.Errorf("importFrom %s names a tag without a digest: set spec.sources[%d].checksum, pin it as @sha256:<digest>, "+
				"or set spec.sources[%d].allowUnverifiedTag", from, i, i)
		}
	}
	return nil
}

func isDigest(ref name.Reference) bool {
	_, ok := ref.(name.Digest)
	return ok
}

// compressionSuffixes are stripped before looking at an URL's extension: `x.iso.xz` is an ISO.
var compressionSuffixes = []string{".gz", ".xz", ".zst"}

// urlKind guesses the artifact kind from importFrom's path before anything is downloaded: the
// output file must be named before the build runs, and the provider names the imported volume
// after the file (`<vmimage>.iso` for an ISO, docs/decisions.md, "Installer ISOs"). The build reports the
// real kind; a wrong guess is corrected by one more build (outputKindMismatch).
func urlKind(importFrom string) banlieuev1.ArtifactKind {
	if !strings.Contains(importFrom, "://") {
		return banlieuev1.ArtifactCloudImage
	}
	p := importFrom
	if u, err := url.Parse(importFrom); err == nil {
		p = u.Path
	}
	p = strings.ToLower(p)
	for _, s := range compressionSuffixes {
		p = strings.TrimSuffix(p, s)
	}
	if path.Ext(p) == ".iso" {
		return banlieuev1.ArtifactISO
	}
	return banlieuev1.ArtifactCloudImage
}

// artifactFile is the artifact's name on the PVC.
func artifactFile(vmimage string, kind banlieuev1.ArtifactKind) string {
	if kind == banlieuev1.ArtifactISO {
		return vmimage + ".iso"
	}
	return vmimage + ".raw"
}

// jobSpec is everything a build Job is made of.
type jobSpec struct {
	Image          *banlieuev1.VMImage
	Source         banlieuev1.ImageSource
	Kind           banlieuev1.ArtifactKind
	Namespace      string
	ContainerImage string
	PVC            string
	NodeSelector   map[string]string
	Tolerations    []corev1.Toleration
	Limits         build.Limits
	Bounds         jobbounds.Bounds
	Pull           jobimage.Pull
	CAConfigMap    string
}

// jobLabels are the labels of a VMImage's build Job, its pods and its Secret.
func jobLabels(img *banlieuev1.VMImage) map[string]string {
	return map[string]string{
		banlieuev1.LabelName:      appName,
		banlieuev1.LabelComponent: ComponentBuild,
		// A VMImage name may be longer than a label value may be.
		banlieuev1.LabelVMImage: naming.Capped(img.Name),
	}
}

// buildJob is the build Job of docs/guides/libvirt-provider.md, "6. Get an image onto the host",
// built as the import Jobs are (internal/imagejob): it passes the build namespace's `restricted`
// audit and warn levels.
func buildJob(s jobSpec) *batchv1.Job {
	labels := jobLabels(s.Image)
	// No --from: the source comes from the build Secret (sourceEnv).
	args := []string{"imagebuilder", "build",
		"--vmimage", s.Image.Name,
		"--output", path.Join(ArtifactsMount, artifactFile(s.Image.Name, s.Kind)),
	}
	if s.Source.Checksum != "" {
		args = append(args, "--checksum", s.Source.Checksum)
	}
	annotations := map[string]string{
		banlieuev1.AnnotationSourceHash:   SourceHash(s.Source),
		banlieuev1.AnnotationArtifactKind: string(s.Kind),
	}
	if s.Source.AllowUnverifiedTag {
		args = append(args, "--"+build.FlagAllowUnverifiedTag)
		annotations[banlieuev1.AnnotationAllowUnverifiedTag] = "true"
	}
	if s.Image.Spec.Architecture != "" {
		args = append(args, "--architecture", s.Image.Spec.Architecture)
	}
	args = append(args, s.Limits.Args()...)
	job := imagejob.New(imagejob.Spec{
		Name:        BuildJobName(s.Image.Name),
		Namespace:   s.Namespace,
		Labels:      labels,
		Annotations: annotations,
		Owner:       s.Image,
		// No TTLAfterFinished: the finished Job (and its pod's termination message) is the
		// record of the artifact; a collected Job would be rebuilt.
		BackoffLimit: buildBackoffLimit,
		Container:    "build",
		Image:        s.ContainerImage,
		Args:         args,
		Env:          []corev1.EnvVar{sourceEnv(s.Image.Name)},
		Bounds:       s.Bounds,
		Pull:         s.Pull,
		// The build talks to image servers, never to the API server.
		NoAPIToken:   true,
		NodeSelector: s.NodeSelector,
		Tolerations:  s.Tolerations,
		PVC:          s.PVC,
		Writes:       true,
	})
	pod := &job.Spec.Template.Spec
	if s.CAConfigMap != "" {
		pod.Volumes = append(pod.Volumes, corev1.Volume{Name: "source-ca", VolumeSource: corev1.VolumeSource{
			ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: s.CAConfigMap}},
		}})
		c := &pod.Containers[0]
		c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: "source-ca", MountPath: caMount, ReadOnly: true})
		c.Env = append(c.Env, corev1.EnvVar{Name: "SSL_CERT_DIR", Value: caMount})
	}
	return job
}

// stale says the Job builds another source than the VMImage now names. A Job without the hash
// predates the build Secret and carries the URL in its argv: replacing it removes that copy.
func stale(job *batchv1.Job, src banlieuev1.ImageSource) bool {
	return job.Annotations[banlieuev1.AnnotationSourceHash] != SourceHash(src) ||
		(job.Annotations[banlieuev1.AnnotationAllowUnverifiedTag] == "true") != src.AllowUnverifiedTag
}

// jobKind is the artifact kind the Job's output name assumes.
func jobKind(job *batchv1.Job) banlieuev1.ArtifactKind {
	if banlieuev1.ArtifactKind(job.Annotations[banlieuev1.AnnotationArtifactKind]) == banlieuev1.ArtifactISO {
		return banlieuev1.ArtifactISO
	}
	return banlieuev1.ArtifactCloudImage
}

// outputKindMismatch says the build found another kind than the output name assumed: an ISO
// behind a URL without `.iso` (or the reverse) was published under the wrong extension, and the
// provider would import it under the wrong volume name.
func outputKindMismatch(job *batchv1.Job, res build.Result) bool {
	return res.Kind != jobKind(job)
}

// jobState is where a Job stands, from the conditions the Job controller sets when it is done.
type jobState int

const (
	jobPending jobState = iota
	jobRunning
	jobSucceeded
	jobFailed
)

func stateOf(job *batchv1.Job) jobState {
	for _, c := range job.Status.Conditions {
		if c.Status != corev1.ConditionTrue {
			continue
		}
		switch c.Type {
		case batchv1.JobComplete:
			return jobSucceeded
		case batchv1.JobFailed:
			return jobFailed
		}
	}
	// A failed pod whose retry is about to start is still building.
	if job.Status.Active > 0 || job.Status.Failed > 0 {
		return jobRunning
	}
	return jobPending
}

// failedMessage is the Job's own account of a failure, for when no pod tells more.
func failedMessage(job *batchv1.Job) string {
	for _, c := range job.Status.Conditions {
		if c.Type == batchv1.JobFailed && c.Status == corev1.ConditionTrue && c.Message != "" {
			return fmt.Sprintf("build Job %s failed: %s", job.Name, c.Message)
		}
	}
	return fmt.Sprintf("build Job %s failed", job.Name)
}

// deadlineMessage says the Job was stopped at its deadline. It outranks what the last pod left:
// a pod the Job controller killed leaves only the tail of its log, which tells nothing of why.
func deadlineMessage(job *batchv1.Job) (string, bool) {
	for _, c := range job.Status.Conditions {
		if c.Type == batchv1.JobFailed && c.Status == corev1.ConditionTrue && c.Reason == batchv1.JobReasonDeadlineExceeded {
			deadline := "its deadline"
			if s := job.Spec.ActiveDeadlineSeconds; s != nil {
				deadline = fmt.Sprintf("its deadline of %s", time.Duration(*s)*time.Second)
			}
			return fmt.Sprintf("build Job %s was stopped at %s (--build-deadline): the source was too slow or too large to build in time",
				job.Name, deadline), true
		}
	}
	return "", false
}
