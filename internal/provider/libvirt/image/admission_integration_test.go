package image

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
	"banlieue.io/banlieue/internal/jobbounds"
	"banlieue.io/banlieue/internal/testenv"
)

// Two provider accounts as the operator names them (internal/operator/names.go), each with its
// Provider, its import account and its class's image.
const (
	admBuildNs   = "banlieue-imagebuild"
	admSystemNs  = "banlieue-system"
	accountA     = "banlieue-provider-libvirt-host-a-0123456789abcdef"
	accountB     = "banlieue-provider-libvirt-host-b-fedcba9876543210"
	unknownAcct  = "banlieue-provider-libvirt-host-c-00112233445566ff"
	importImageA = "registry.example/banlieue:v0.1.0"
	importImageB = "registry.example/banlieue:v0.2.0"
)

// TestImportJobAdmission installs config/admission/import-jobs.yaml on the real API server, with
// the params ConfigMap the operator keeps, and creates Jobs as provider accounts: the exact Job
// importJob builds is admitted, anything else a provider account could use to run another pod
// is refused (docs/security.md, "Import Jobs: one account per Provider, pinned at admission").
func TestImportJobAdmission(t *testing.T) {
	env := testenv.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	env.CreateRestrictedNamespace(ctx, t, admBuildNs)
	env.Create(ctx, t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: admSystemNs}})
	installAdmission(ctx, t, env.Client, "import-jobs.yaml")
	env.Create(ctx, t, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "banlieue-provider-accounts", Namespace: admBuildNs},
		Data: map[string]string{
			admSystemNs + "." + accountA + ".image":    importImageA,
			admSystemNs + "." + accountA + ".provider": admSystemNs + "/host-a",
			admSystemNs + "." + accountB + ".image":    importImageB,
			admSystemNs + "." + accountB + ".provider": admSystemNs + "/host-b",
		}})
	// The class's additionalRules (examples/09), and pods besides, so that every refusal below
	// is the policy's and not RBAC's.
	env.Create(ctx, t, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "provider-jobs", Namespace: admBuildNs},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{"batch"}, Resources: []string{"jobs"}, Verbs: []string{"create"}},
			{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"create"}}}})
	var subjects []rbacv1.Subject
	for _, a := range []string{accountA, accountB, unknownAcct} {
		subjects = append(subjects, rbacv1.Subject{Kind: "ServiceAccount", Name: a, Namespace: admSystemNs})
	}
	env.Create(ctx, t, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "provider-jobs", Namespace: admBuildNs},
		RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "provider-jobs"}, Subjects: subjects})

	// The import account exists, as the operator creates it, so that the bare Pod below meets
	// the policy and not the ServiceAccount admission plugin.
	env.Create(ctx, t, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: accountA + "-import", Namespace: admBuildNs}})
	asA, asUnknown := impersonate(t, env.Config, accountA), impersonate(t, env.Config, unknownAcct)
	own := func(mutate func(*batchv1.Job)) *batchv1.Job {
		job := admissionJob("host-a", accountA+"-import", importImageA)
		if mutate != nil {
			mutate(job)
		}
		return job
	}
	create := func(c client.Client, job client.Object) error { return c.Create(ctx, job, client.DryRunAll) }

	// A new policy takes effect once the API server has compiled it, and the file holds two
	// that load independently: wait for the first refusal of each.
	testenv.Eventually(t, 30*time.Second, "the import policy in force", func() error {
		return refusedWith(create(asA, own(func(j *batchv1.Job) { j.Spec.Template.Spec.ServiceAccountName = accountB + "-import" })),
			"serviceAccountName must be "+accountA+"-import")
	})
	testenv.Eventually(t, 30*time.Second, "the provider pods policy in force", func() error {
		return refusedWith(create(asA, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{GenerateName: "probe-", Namespace: admBuildNs},
			Spec: own(nil).Spec.Template.Spec}), "may not create or change Pods")
	})
	if err := create(asA, own(nil)); err != nil {
		t.Errorf("provider A's own import Job, exactly as importJob builds it: %v", err)
	}
	ownExtent := func(mutate func([]string)) *batchv1.Job {
		job := admissionJob("host-a", accountA+"-import", importImageA, "extents-sha256:"+strings.Repeat("cd", 32))
		if mutate != nil {
			mutate(job.Spec.Template.Spec.Containers[0].Args)
		}
		return job
	}
	if err := create(asA, ownExtent(nil)); err != nil {
		t.Errorf("provider A's own import Job with --extent-digest, exactly as importJob builds it: %v", err)
	}
	if err := create(env.Client, admissionJob("host-b", accountB+"-import", "anything:latest")); err != nil {
		t.Errorf("an administrator is not a provider account and is not bound by the policy: %v", err)
	}

	tests := []struct {
		name   string
		as     client.Client
		job    client.Object
		reason string
	}{
		{"another Provider's import account", asA, own(func(j *batchv1.Job) {
			j.Spec.Template.Spec.ServiceAccountName = accountB + "-import"
		}), "serviceAccountName must be " + accountA + "-import"},
		// No fallback to default in the operator's build namespace (docs/adr/0145): a Job naming
		// it, or naming none so that its pods would run as it, is refused.
		{"the build namespace's default account", asA, own(func(j *batchv1.Job) {
			j.Spec.Template.Spec.ServiceAccountName = "default"
		}), "serviceAccountName must be " + accountA + "-import"},
		{"no account, so that the pods would run as default", asA, own(func(j *batchv1.Job) {
			j.Spec.Template.Spec.ServiceAccountName = ""
		}), "serviceAccountName must be " + accountA + "-import"},
		{"a foreign image", asA, own(func(j *batchv1.Job) {
			j.Spec.Template.Spec.Containers[0].Image = "evil.example/shell:latest"
		}), "image must be " + importImageA},
		{"the other class's image", asA, own(func(j *batchv1.Job) {
			j.Spec.Template.Spec.Containers[0].Image = importImageB
		}), "image must be " + importImageA},
		{"a shell command", asA, own(func(j *batchv1.Job) {
			j.Spec.Template.Spec.Containers[0].Command = []string{"/bin/sh", "-c", "cat /var/run/secrets/kubernetes.io/serviceaccount/token"}
		}), "must run banlieue's import"},
		{"another subcommand", asA, own(func(j *batchv1.Job) {
			j.Spec.Template.Spec.Containers[0].Args[2] = "check"
		}), "must run banlieue's import"},
		{"an extra flag", asA, own(func(j *batchv1.Job) {
			c := &j.Spec.Template.Spec.Containers[0]
			c.Args = append(c.Args, "--kubeconfig", "/artifacts/k")
		}), "must run banlieue's import"},
		{"another flag in the extent digest's place", asA, ownExtent(func(args []string) { args[17] = "--kubeconfig" }), "must run banlieue's import"},
		{"a flag as the extent digest", asA, ownExtent(func(args []string) { args[18] = "--kubeconfig=/artifacts/k" }), "must run banlieue's import"},
		{"another Provider in the args of a Job with an extent digest", asA, ownExtent(func(args []string) { args[6] = "host-b" }), "--provider-namespace/--provider must be " + admSystemNs + "/host-a"},
		{"a source outside the artifacts mount", asA, own(func(j *batchv1.Job) {
			j.Spec.Template.Spec.Containers[0].Args[12] = "/artifacts/../var/run/secrets/token"
		}), "must run banlieue's import"},
		{"another Provider in the args", asA, own(func(j *batchv1.Job) {
			j.Spec.Template.Spec.Containers[0].Args[6] = "host-b"
		}), "--provider-namespace/--provider must be " + admSystemNs + "/host-a"},
		{"an extra hostPath volume", asA, own(func(j *batchv1.Job) {
			pod := &j.Spec.Template.Spec
			pod.Volumes = append(pod.Volumes, corev1.Volume{Name: "host", VolumeSource: corev1.VolumeSource{
				HostPath: &corev1.HostPathVolumeSource{Path: "/"}}})
			pod.Containers[0].VolumeMounts = append(pod.Containers[0].VolumeMounts, corev1.VolumeMount{Name: "host", MountPath: "/host", ReadOnly: true})
		}), "mounts one volume"},
		{"a Secret as an environment variable", asA, own(func(j *batchv1.Job) {
			c := &j.Spec.Template.Spec.Containers[0]
			c.Env = append(c.Env, corev1.EnvVar{Name: "K", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
				LocalObjectReference: corev1.LocalObjectReference{Name: "build-x"}, Key: "k"}}})
		}), "sets only GOMEMLIMIT"},
		{"a lifecycle hook", asA, own(func(j *batchv1.Job) {
			j.Spec.Template.Spec.Containers[0].Lifecycle = &corev1.Lifecycle{PostStart: &corev1.LifecycleHandler{
				Exec: &corev1.ExecAction{Command: []string{"/bin/sh", "-c", "id"}}}}
		}), "no lifecycle hook"},
		{"the host network", asA, own(func(j *batchv1.Job) { j.Spec.Template.Spec.HostNetwork = true }), "no host namespace"},
		{"a privileged container", asA, own(func(j *batchv1.Job) {
			j.Spec.Template.Spec.Containers[0].SecurityContext.Privileged = ptr.To(true)
		}), "privileged"},
		{"a second container", asA, own(func(j *batchv1.Job) {
			pod := &j.Spec.Template.Spec
			pod.Containers = append(pod.Containers, *pod.Containers[0].DeepCopy())
			pod.Containers[1].Name = "second"
		}), "exactly one container"},
		{"an account the operator does not know", asUnknown, admissionJob("host-c", unknownAcct+"-import", importImageA),
			"serves no Provider the operator knows"},
		{"a bare Pod", asA, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{GenerateName: "bare-", Namespace: admBuildNs},
			Spec: own(nil).Spec.Template.Spec}, "may not create or change Pods"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := refusedWith(create(tt.as, tt.job), tt.reason); err != nil {
				t.Error(err)
			}
		})
	}
}

// admissionJob is the import Job of VMImage kairos for Provider banlieue-system/provider, run
// as account with image, exactly as importJob builds it, for an artifact with the extent
// digest extent[0] when given.
func admissionJob(provider, account, image string, extent ...string) *batchv1.Job {
	img := &banlieuev1.VMImage{ObjectMeta: metav1.ObjectMeta{Name: "kairos", UID: "u1"}}
	img.Status.BuildArtifact = &banlieuev1.BuildArtifact{Phase: banlieuev1.BuildReady, File: "kairos.raw",
		Checksum: "sha256:" + strings.Repeat("ab", 32), PVCRef: &banlieuev1.LocalObjectReference{Name: "banlieue-artifacts"}}
	if len(extent) > 0 {
		img.Status.BuildArtifact.ExtentDigest = extent[0]
	}
	p := &banlieuev1.Provider{ObjectMeta: metav1.ObjectMeta{Name: provider, Namespace: admSystemNs}}
	return importJob(importJobSpec{Image: img, Provider: p, Pool: "default", Volume: artifactVolume(img), Namespace: admBuildNs,
		ContainerImage: image, ServiceAccount: account, Bounds: jobbounds.DefaultImport()})
}

// installAdmission creates every object of config/admission/<file>, as shipped.
func installAdmission(ctx context.Context, t *testing.T, admin client.Client, file string) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "config", "admission", file))
	if err != nil {
		t.Fatal(err)
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for {
		var obj unstructured.Unstructured
		if err := dec.Decode(&obj.Object); err != nil {
			break
		}
		if len(obj.Object) == 0 {
			continue
		}
		if err := admin.Create(ctx, &obj); err != nil {
			t.Fatalf("installing %s %s: %v", obj.GetKind(), obj.GetName(), err)
		}
	}
}

// impersonate is a client acting as the provider ServiceAccount banlieue-system/name.
func impersonate(t *testing.T, cfg *rest.Config, name string) client.Client {
	t.Helper()
	return testenv.ClientAs(t, cfg, testenv.ServiceAccountUser(admSystemNs, name))
}

// refusedWith is nil when err is the admission policy's refusal (403 Invalid or Forbidden, as
// ValidatingAdmissionPolicy reports it) whose message contains reason.
func refusedWith(err error, reason string) error {
	switch {
	case err == nil:
		return fmt.Errorf("admitted; want refused with %q", reason)
	case !apierrors.IsForbidden(err) && !apierrors.IsInvalid(err):
		return fmt.Errorf("refused, but not by admission: %v", err)
	case !strings.Contains(err.Error(), reason):
		return fmt.Errorf("refused with %v; want %q", err, reason)
	}
	return nil
}
