package imagejob

import (
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
	"banlieue.io/banlieue/internal/jobbounds"
	"banlieue.io/banlieue/internal/jobimage"
)

func spec(writes, noToken bool) Spec {
	return Spec{
		Name: "j", Namespace: "ns", Labels: map[string]string{"a": "b"}, Annotations: map[string]string{"c": "d"},
		Owner:        &banlieuev1.VMImage{ObjectMeta: metav1.ObjectMeta{Name: "img", UID: "u1"}},
		BackoffLimit: 2, Container: "c", Image: "banlieue:v1", Args: []string{"x"},
		Env:    []corev1.EnvVar{{Name: "E", Value: "v"}},
		Bounds: jobbounds.Bounds{Deadline: time.Hour, MemoryLimit: resource.MustParse("256Mi")},
		Pull:   jobimage.Pull{Policy: corev1.PullNever}, ServiceAccount: "sa", NoAPIToken: noToken, PVC: "pvc", Writes: writes,
	}
}

// What both kinds of Job share, and the two ways they differ: a Job that writes the artifact
// mounts the PVC read-write with fsGroup and its log as termination message; a reader mounts
// it read-only.
func TestNew(t *testing.T) {
	for _, tt := range []struct {
		name           string
		writes, token  bool
		wantFSGroup    *int64
		wantReadOnly   bool
		wantTermPolicy corev1.TerminationMessagePolicy
	}{
		{"reads the artifact (import)", false, true, nil, true, ""},
		{"writes the artifact (build)", true, false, ptr.To[int64](NonRootUID), false, corev1.TerminationMessageFallbackToLogsOnError},
	} {
		t.Run(tt.name, func(t *testing.T) {
			job := New(spec(tt.writes, !tt.token))
			if o := job.OwnerReferences; len(o) != 1 || o[0].Kind != "VMImage" || o[0].UID != "u1" || !ptr.Deref(o[0].Controller, false) ||
				o[0].BlockOwnerDeletion != nil {
				t.Errorf("owner %+v", o)
			}
			if *job.Spec.BackoffLimit != 2 || *job.Spec.ActiveDeadlineSeconds != 3600 || job.Spec.TTLSecondsAfterFinished != nil {
				t.Errorf("job spec %+v", job.Spec)
			}
			pod := job.Spec.Template.Spec
			if pod.RestartPolicy != corev1.RestartPolicyNever || pod.ServiceAccountName != "sa" || !*pod.SecurityContext.RunAsNonRoot ||
				*pod.SecurityContext.RunAsUser != NonRootUID || pod.SecurityContext.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
				t.Errorf("pod %+v", pod)
			}
			if !ptr.Equal(pod.SecurityContext.FSGroup, tt.wantFSGroup) {
				t.Errorf("fsGroup %v, want %v", pod.SecurityContext.FSGroup, tt.wantFSGroup)
			}
			if got := pod.AutomountServiceAccountToken; tt.token != (got == nil) || got != nil && *got {
				t.Errorf("automountServiceAccountToken %v with a token %v", got, tt.token)
			}
			c := pod.Containers[0]
			if c.Name != "c" || c.Image != "banlieue:v1" || !slices.Equal(c.Args, []string{"x"}) || c.ImagePullPolicy != corev1.PullNever ||
				len(c.Env) != 2 || c.Env[0].Name != "E" || c.Env[1].Name != "GOMEMLIMIT" || c.TerminationMessagePolicy != tt.wantTermPolicy {
				t.Errorf("container %+v", c)
			}
			if sc := c.SecurityContext; *sc.AllowPrivilegeEscalation || !*sc.ReadOnlyRootFilesystem || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) {
				t.Errorf("container securityContext %+v", sc)
			}
			if m := c.VolumeMounts; len(m) != 1 || m[0].MountPath != ArtifactsMount || m[0].ReadOnly != tt.wantReadOnly {
				t.Errorf("mounts %+v", m)
			}
			if v := pod.Volumes; len(v) != 1 || v[0].PersistentVolumeClaim.ClaimName != "pvc" || v[0].PersistentVolumeClaim.ReadOnly != tt.wantReadOnly {
				t.Errorf("volumes %+v", v)
			}
		})
	}
}

// The pod's labels are the Job's, in a map of their own: a caller editing one does not edit the other.
func TestNewLabelsAreCopied(t *testing.T) {
	job := New(spec(false, false))
	job.Spec.Template.Labels["pod-only"] = "x"
	if _, ok := job.Labels["pod-only"]; ok || job.Labels["a"] != "b" {
		t.Errorf("job labels %v", job.Labels)
	}
}
