package install

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"banlieue.io/banlieue/internal/testenv"
)

// providerAccount is the provider account (and Deployment) of Provider tenant-a/p in these
// tests, named as the operator names workloads: banlieue-provider-*.
const providerAccount = "banlieue-provider-libvirt-p"

// operatorLabels are the label banlieue-operator-writes requires on what the operator writes.
func operatorLabels() map[string]string {
	return map[string]string{"app.kubernetes.io/managed-by": "banlieue-operator"}
}

// setProviderAccounts replaces the data of the provider accounts' params ConfigMap, as the
// operator does; nil empties it, as the install ships it.
func setProviderAccounts(ctx context.Context, t *testing.T, c *cluster, data map[string]string) {
	t.Helper()
	var cm corev1.ConfigMap
	if err := c.admin.Get(ctx, client.ObjectKey{Namespace: buildNS, Name: "banlieue-provider-accounts"}, &cm); err != nil {
		t.Fatal(err)
	}
	cm.Data = data
	if err := c.admin.Update(ctx, &cm); err != nil {
		t.Fatal(err)
	}
}

// providerDeployment is the provider Deployment of Provider ns/p as internal/operator's
// deployment builds it, in the shape banlieue-operator-writes admits.
func providerDeployment(ns string) *appsv1.Deployment {
	labels := operatorLabels()
	labels["app.kubernetes.io/instance"] = providerAccount
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: providerAccount, Namespace: ns, Labels: labels},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app.kubernetes.io/instance": providerAccount}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{
				ServiceAccountName: providerAccount,
				SecurityContext: &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true), RunAsUser: ptr.To[int64](65532),
					SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
				Containers: []corev1.Container{{
					Name: "provider", Image: image,
					Args: []string{"provider", "libvirt", "--provider-name", "p", "--namespace", ns,
						"--leader-election-id", providerAccount, "--leader-election-namespace", ns,
						"--import-image", image, "--import-service-account", providerAccount + "-import",
						"--console-port", "8443", "--console-relay", "system:serviceaccount:banlieue-system:banlieue-controller",
						"--import-deadline", "1h0m0s", "--build-toleration", "build:NoSchedule"},
					Env: []corev1.EnvVar{{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}}},
					SecurityContext: &corev1.SecurityContext{
						AllowPrivilegeEscalation: ptr.To(false), ReadOnlyRootFilesystem: ptr.To(true),
						Capabilities:   &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
						SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
					},
				}},
			}},
		},
	}
}

// checkOperatorAdmission: banlieue-operator-writes and -images hold the operator (as op) to
// banlieue's provider workloads, with the provider account's params in place: no Deployment
// as another account, image or shape; no binding of anything but banlieue's roles to anyone but
// provider accounts; nobody else's object changed or deleted; and provider accounts write none
// of these.
func checkOperatorAdmission(ctx context.Context, t *testing.T, c *cluster, op client.Client) {
	t.Helper()
	refused := func(what, want string, err error) {
		t.Helper()
		testenv.Forbidden(t, what, err)
		if err != nil && !strings.Contains(err.Error(), want) {
			t.Errorf("%s: refusal %q lacks %q", what, err, want)
		}
	}
	deploy := func(mutate func(d *appsv1.Deployment)) error {
		d := providerDeployment(tenantNS)
		d.Name += "-x"
		d.Spec.Template.Spec.ServiceAccountName = d.Name
		d.Spec.Template.Spec.Containers[0].Args[7] = d.Name
		d.Spec.Template.Spec.Containers[0].Args[13] = d.Name + "-import"
		mutate(d)
		return op.Create(ctx, d, client.DryRunAll)
	}
	// The same Deployment as admitted above, under another name: admitted by
	// banlieue-operator-writes, refused by -images (no params for that account).
	refused("operator creates a Deployment for an account the params do not list", "serves no Provider the operator knows",
		deploy(func(*appsv1.Deployment) {}))

	pod := func(mutate func(*corev1.PodSpec)) error {
		d := providerDeployment(tenantNS)
		mutate(&d.Spec.Template.Spec)
		return op.Create(ctx, d, client.DryRunAll)
	}
	for _, tc := range []struct {
		what, want string
		mutate     func(*corev1.PodSpec)
	}{
		{"runs as another account", "serviceAccountName must be", func(p *corev1.PodSpec) { p.ServiceAccountName = "default" }},
		{"runs kube-system's account name", "serviceAccountName must be", func(p *corev1.PodSpec) { p.ServiceAccountName = "generic-garbage-collector" }},
		{"runs another image", "image and --import-image must be", func(p *corev1.PodSpec) { p.Containers[0].Image = "registry.example/other:v1" }},
		{"runs a command", "runs one container", func(p *corev1.PodSpec) { p.Containers[0].Command = []string{"/bin/sh"} }},
		{"adds a container", "runs one container", func(p *corev1.PodSpec) {
			sidecar := p.Containers[0]
			sidecar.Name = "sidecar"
			p.Containers = append(p.Containers, sidecar)
		}},
		{"mounts a Secret", "runs one container", func(p *corev1.PodSpec) {
			p.Volumes = []corev1.Volume{{Name: "s", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "p-tls"}}}}
			p.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "s", MountPath: "/s"}}
		}},
		{"reads a Secret into its environment", "runs one container", func(p *corev1.PodSpec) {
			p.Containers[0].Env = append(p.Containers[0].Env, corev1.EnvVar{Name: "K", ValueFrom: &corev1.EnvVarSource{
				SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "p-tls"}, Key: "tls.key"}}})
		}},
		{"uses the host's network", "restricted security context", func(p *corev1.PodSpec) { p.HostNetwork = true }},
		{"runs privileged", "restricted security context", func(p *corev1.PodSpec) {
			p.Containers[0].SecurityContext.Privileged = ptr.To(true)
			p.Containers[0].SecurityContext.AllowPrivilegeEscalation = nil
		}},
		{"adds a capability", "restricted security context", func(p *corev1.PodSpec) {
			p.Containers[0].SecurityContext.Capabilities.Add = []corev1.Capability{"NET_ADMIN"}
		}},
		{"runs as root", "restricted security context", func(p *corev1.PodSpec) { p.SecurityContext.RunAsUser = ptr.To[int64](0) }},
		{"runs another role", "args must be the provider's", func(p *corev1.PodSpec) { p.Containers[0].Args[0] = "controller" }},
		{"overrides its import image", "args must be the provider's", func(p *corev1.PodSpec) {
			p.Containers[0].Args = append(p.Containers[0].Args, "--import-image", "registry.example/other:v1")
		}},
		{"passes a flag as flag=value", "args must be the provider's", func(p *corev1.PodSpec) {
			p.Containers[0].Args = append(p.Containers[0].Args, "--import-image=registry.example/other:v1", "x")
		}},
		{"serves another Provider", "--namespace/--provider-name must be", func(p *corev1.PodSpec) { p.Containers[0].Args[3] = "q" }},
	} {
		refused("operator creates a provider Deployment that "+tc.what, tc.want, pod(tc.mutate))
	}
	refused("operator creates a Deployment not named as a provider's", "must be named banlieue-provider-*",
		op.Create(ctx, deployment(tenantNS), client.DryRunAll))
	unlabelled := providerDeployment(tenantNS)
	unlabelled.Labels = nil
	refused("operator creates an unlabelled provider Deployment", "must be named banlieue-provider-*", op.Create(ctx, unlabelled, client.DryRunAll))

	// Nobody else's objects: a team's Deployment, Service and ServiceAccount are neither
	// changed nor deleted.
	theirs := deployment(tenantNS)
	theirs.Name = "team-app"
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "team-app", Namespace: tenantNS},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}}}
	for _, o := range []client.Object{theirs, svc} {
		if err := c.admin.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	refused("operator deletes a team's Deployment", "must be named banlieue-provider-*", op.Delete(ctx, theirs.DeepCopy(), client.DryRunAll))
	refused("operator deletes a team's Service", "must be named banlieue-provider-*", op.Delete(ctx, svc.DeepCopy(), client.DryRunAll))
	// Relabelled as the operator's it also meets banlieue-operator-images: either refuses.
	refused("operator takes a team's Deployment over", "ValidatingAdmissionPolicy 'banlieue-operator-",
		op.Patch(ctx, theirs.DeepCopy(), client.RawPatch("application/merge-patch+json",
			[]byte(`{"metadata":{"labels":{"app.kubernetes.io/managed-by":"banlieue-operator"}},"spec":{"template":{"spec":{"serviceAccountName":"default"}}}}`)), client.DryRunAll))
	exposed := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: providerAccount, Namespace: tenantNS, Labels: operatorLabels()},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 8443}}, ExternalIPs: []string{"192.0.2.10"}}}
	refused("operator creates a provider Service with external IPs", "ClusterIP Service without externalIPs", op.Create(ctx, exposed, client.DryRunAll))

	// Bindings: banlieue-operator is a ClusterRole whose rules the operator holds, so RBAC's
	// escalation check lets it bind it; the policy does not.
	refused("operator binds banlieue-operator", "binds its own Role (of its name) or a banlieue-provider-* ClusterRole",
		op.Create(ctx, clusterRoleBinding("banlieue-operator"), client.DryRunAll))
	anyone := clusterRoleBinding("banlieue-provider-libvirt")
	anyone.Subjects = []rbacv1.Subject{{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: "system:authenticated"}}
	refused("operator binds banlieue-provider-libvirt to every user", "subjects are provider accounts only", op.Create(ctx, anyone, client.DryRunAll))
	// The Role exists, so the API server's escalation check (which runs first) passes.
	other := providerRole()
	other.Name += "-probe"
	if err := c.admin.Create(ctx, other); err != nil {
		t.Fatal(err)
	}
	rb := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: other.Name, Namespace: tenantNS, Labels: operatorLabels()},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: other.Name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: "kube-system", Name: "default"}}}
	refused("operator binds a provider Role to kube-system's default account", "subjects are provider accounts only", op.Create(ctx, rb, client.DryRunAll))
	rb.Subjects = []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: tenantNS, Name: providerAccount}}
	rb.Name += "-other"
	refused("operator binds a Role of another name", "binds its own Role", op.Create(ctx, rb, client.DryRunAll))

	// A provider account given the operator's Deployment rights still writes no Deployment.
	grant := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "probe-provider-deployments", Namespace: tenantNS},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "banlieue-operator"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: tenantNS, Name: providerAccount}}}
	if err := c.admin.Create(ctx, grant); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.admin.Delete(ctx, grant) }() // best effort: the namespace goes with the test's API server
	asProvider := c.as(t, tenantNS, providerAccount)
	testenv.Eventually(t, time.Minute, "a provider account's Deployment refused by the policy, not RBAC", func() error {
		err := asProvider.Create(ctx, deployment(tenantNS), client.DryRunAll)
		return testenv.Unmet(err != nil && strings.Contains(err.Error(), "only banlieue-operator writes a provider's workload"), fmt.Sprintf("create: %v", err))
	})
}
