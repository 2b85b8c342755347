// Package imagejob builds the Jobs banlieue runs for a VMImage, the imagebuilder's build Job and
// the libvirt provider's import Jobs alike: one container running the banlieue binary against
// the artifacts PVC, owned by the VMImage, bounded (internal/jobbounds), pulled as the roles'
// pods are (internal/jobimage), non-root with a read-only root filesystem and no capability, so
// it passes the build namespace's `restricted` Pod Security level. What differs between the two
// is in Spec; the rest is written once, here.
package imagejob

import (
	"maps"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
	"banlieue.io/banlieue/internal/jobbounds"
	"banlieue.io/banlieue/internal/jobimage"
)

const (
	// ArtifactsMount is where the artifacts PVC appears in the pod.
	ArtifactsMount = "/artifacts"
	// NonRootUID is the distroless "nonroot" user the image ships.
	NonRootUID = 65532
	// artifactsVolume names the PVC's volume in the pod.
	artifactsVolume = "artifacts"
)

// Spec is what one Job is made of.
type Spec struct {
	Name, Namespace string
	// Labels go on the Job and its pods; Annotations on the Job only.
	Labels, Annotations map[string]string
	// Owner is the VMImage the Job works for, its controller.
	Owner *banlieuev1.VMImage
	// BackoffLimit is the Job's retries; TTLAfterFinished, when set, how long a finished Job
	// stays.
	BackoffLimit     int32
	TTLAfterFinished *int32
	// Container is the container's name, Image its image, Args its arguments and Env its
	// environment besides GOMEMLIMIT (from Bounds, always last).
	Container, Image string
	Args             []string
	Env              []corev1.EnvVar
	Bounds           jobbounds.Bounds
	Pull             jobimage.Pull
	// ServiceAccount the pod runs as. NoAPIToken mounts it no token, for a pod that never talks
	// to the API server.
	ServiceAccount string
	NoAPIToken     bool
	NodeSelector   map[string]string
	Tolerations    []corev1.Toleration
	// PVC is the artifacts claim. A Job that writes the artifact (Writes) mounts it read-write
	// with the non-root user as fsGroup, so it can write to a freshly provisioned volume, and
	// keeps the end of its log as its termination message when it fails without writing one;
	// any other mounts it read-only.
	PVC    string
	Writes bool
}

// New is the Job of s.
func New(s Spec) *batchv1.Job {
	container := corev1.Container{
		Name:  s.Container,
		Image: s.Image,
		Args:  s.Args,
		Env:   append(append([]corev1.EnvVar(nil), s.Env...), s.Bounds.GoMemLimit()),
		// The memory limit covers what the binary holds at once (jobbounds' defaults).
		Resources:    s.Bounds.Resources(),
		VolumeMounts: []corev1.VolumeMount{{Name: artifactsVolume, MountPath: ArtifactsMount, ReadOnly: !s.Writes}},
		SecurityContext: &corev1.SecurityContext{
			AllowPrivilegeEscalation: ptr.To(false),
			ReadOnlyRootFilesystem:   ptr.To(true),
			Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		},
	}
	podSecurity := &corev1.PodSecurityContext{
		RunAsNonRoot:   ptr.To(true),
		RunAsUser:      ptr.To[int64](NonRootUID),
		SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
	if s.Writes {
		podSecurity.FSGroup = ptr.To[int64](NonRootUID)
		// The Job's result (or its error) is its termination message; a crash before writing it
		// still leaves the tail of its output.
		container.TerminationMessagePolicy = corev1.TerminationMessageFallbackToLogsOnError
	}
	pod := corev1.PodSpec{
		RestartPolicy:      corev1.RestartPolicyNever,
		ServiceAccountName: s.ServiceAccount,
		NodeSelector:       s.NodeSelector,
		Tolerations:        s.Tolerations,
		SecurityContext:    podSecurity,
		Containers:         []corev1.Container{container},
		Volumes: []corev1.Volume{{
			Name: artifactsVolume,
			VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{
				ClaimName: s.PVC, ReadOnly: !s.Writes,
			}},
		}},
	}
	if s.NoAPIToken {
		pod.AutomountServiceAccountToken = ptr.To(false)
	}
	s.Pull.Apply(&pod)
	return &batchv1.Job{
		TypeMeta: metav1.TypeMeta{APIVersion: "batch/v1", Kind: "Job"},
		ObjectMeta: metav1.ObjectMeta{
			Name:        s.Name,
			Namespace:   s.Namespace,
			Labels:      s.Labels,
			Annotations: s.Annotations,
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: banlieuev1.GroupVersion.String(),
				Kind:       "VMImage",
				Name:       s.Owner.Name,
				UID:        s.Owner.UID,
				// Controller lets the VMImage's controllers watch their Jobs; blockOwnerDeletion
				// is left unset because it needs an update grant on vmimages/finalizers.
				Controller: ptr.To(true),
			}},
		},
		Spec: batchv1.JobSpec{
			BackoffLimit:            ptr.To(s.BackoffLimit),
			TTLSecondsAfterFinished: s.TTLAfterFinished,
			// The deadline covers the retries: a source or a host that trickles keeps no Job forever.
			ActiveDeadlineSeconds: s.Bounds.ActiveDeadlineSeconds(),
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: maps.Clone(s.Labels)},
				Spec:       pod,
			},
		},
	}
}
