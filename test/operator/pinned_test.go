package operator

import (
	"context"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"banlieue.io/banlieue/internal/testenv"
)

// testOperatorPinned: the Deployment the operator wrote under banlieue-operator-writes and
// -images (config/admission/operator-workloads.yaml) is its only shape. Starting from that very
// Deployment, the operator's account cannot make it run as another account or image, mount a
// host path, nor place it in kube-system as kube-system's account; nor delete a Deployment that
// is not a provider's (docs/security.md, "The operator writes only provider workloads").
func testOperatorPinned(ctx context.Context, t *testing.T, env *testenv.Env, admin client.Client) {
	op := as(t, env.Config, systemNs, operatorS)
	var real appsv1.Deployment
	if err := admin.Get(ctx, client.ObjectKey{Namespace: systemNs, Name: workload}, &real); err != nil {
		t.Fatalf("the operator's Deployment: %v", err)
	}
	// want lists the refusals that may answer, separated by " | ": where two policies both
	// deny, the API server reports whichever it evaluated first, and that order is not fixed.
	refused := func(what, want string, err error) {
		t.Helper()
		testenv.Forbidden(t, what, err)
		if err == nil {
			return
		}
		for _, w := range strings.Split(want, " | ") {
			if strings.Contains(err.Error(), w) {
				return
			}
		}
		t.Errorf("%s: refusal %q lacks %q", what, err, want)
	}
	changed := func(mutate func(*corev1.PodSpec)) *appsv1.Deployment {
		d := real.DeepCopy()
		mutate(&d.Spec.Template.Spec)
		return d
	}
	refused("operator makes its Deployment run as another account", "serviceAccountName must be",
		op.Patch(ctx, changed(func(p *corev1.PodSpec) { p.ServiceAccountName = "default" }), client.MergeFrom(&real), client.DryRunAll))
	refused("operator makes its Deployment run another image", "image and --import-image must be",
		op.Patch(ctx, changed(func(p *corev1.PodSpec) { p.Containers[0].Image = "registry.example/other:v1" }), client.MergeFrom(&real), client.DryRunAll))
	refused("operator mounts a host path into its Deployment", "runs one container",
		op.Patch(ctx, changed(func(p *corev1.PodSpec) {
			p.Volumes = []corev1.Volume{{Name: "root", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/"}}}}
			p.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "root", MountPath: "/host"}}
		}), client.MergeFrom(&real), client.DryRunAll))

	// The same Deployment in kube-system, as one of its accounts.
	moved := changed(func(p *corev1.PodSpec) { p.ServiceAccountName = "generic-garbage-collector" })
	moved.ObjectMeta = metav1.ObjectMeta{Name: real.Name, Namespace: metav1.NamespaceSystem, Labels: real.Labels}
	refused("operator runs its Deployment in kube-system as kube-system's account",
		"serviceAccountName must be | serves no Provider the operator knows",
		op.Create(ctx, moved, client.DryRunAll))

	theirs := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "team-app", Namespace: systemNs},
		Spec: appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "team"}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "team"}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.example/app:v1"}}}}}}
	if err := admin.Create(ctx, theirs); err != nil {
		t.Fatal(err)
	}
	refused("operator deletes a Deployment not a provider's", "must be named banlieue-provider-*", op.Delete(ctx, theirs.DeepCopy()))
	if err := admin.Delete(ctx, theirs); err != nil {
		t.Fatal(err)
	}
}
