package testenv

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// CreateRestrictedNamespace creates namespace name enforcing the `restricted` Pod Security
// level, as the install labels banlieue-imagebuild.
func (e *Env) CreateRestrictedNamespace(ctx context.Context, t testing.TB, name string) {
	t.Helper()
	e.Create(ctx, t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name,
		Labels: map[string]string{"pod-security.kubernetes.io/enforce": "restricted"}}})
}

// AdmitPod asks the API server's admission, Pod Security included, whether a pod of spec may
// run in namespace ns (a server-side dry run: nothing is stored, no kubelet is needed).
func (e *Env) AdmitPod(ctx context.Context, ns string, spec corev1.PodSpec) error {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: "admit-"}, Spec: spec}
	return e.Client.Create(ctx, pod, client.DryRunAll)
}

// Privileged is spec with its first container privileged: the pod a restricted namespace must
// refuse, to show the refusal of AdmitPod is the namespace's doing.
func Privileged(spec corev1.PodSpec) corev1.PodSpec {
	s := *spec.DeepCopy()
	if s.Containers[0].SecurityContext == nil {
		s.Containers[0].SecurityContext = &corev1.SecurityContext{}
	}
	s.Containers[0].SecurityContext.Privileged = ptr.To(true)
	s.Containers[0].SecurityContext.AllowPrivilegeEscalation = ptr.To(true)
	return s
}
