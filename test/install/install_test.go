package install

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
	"banlieue.io/banlieue/internal/operator"
	"banlieue.io/banlieue/internal/testenv"
)

const (
	systemNS = "banlieue-system"
	buildNS  = "banlieue-imagebuild"
	tenantNS = "tenant-a" // stands in for a Provider's namespace
	image    = "registry.example/banlieue:v0.1.0"
)

// roles are the Deployments (and ServiceAccounts, ClusterRoles, bindings) config/default runs.
var roles = []string{"controller", "operator", "imagebuilder"}

var crds = []string{
	"libvirtclusters.infrastructure.banlieue.io", "libvirtmachines.infrastructure.banlieue.io",
	"libvirtmachinetemplates.infrastructure.banlieue.io", "providerclasses.banlieue.io", "providers.banlieue.io",
	"virtualmachineclaims.banlieue.io", "virtualmachineexports.banlieue.io", "virtualmachinemigrations.banlieue.io", "virtualmachinepools.banlieue.io", "virtualmachinerestores.banlieue.io", "virtualmachines.banlieue.io", "virtualmachinesnapshots.banlieue.io",
	"vmclasses.banlieue.io", "vmimages.banlieue.io", "vspheremachines.infrastructure.banlieue.io",
	"vspheremachinetemplates.infrastructure.banlieue.io",
}

func defaultDir() string { return filepath.Join(testenv.RepoRoot(), "config", "default") }

// TestRenderIsStable renders config/default twice: the output must be byte-identical, so a
// diff between two renderings is always a real change.
func TestRenderIsStable(t *testing.T) {
	kubectl := kubectlBinary(t)
	var renders []string
	for range 2 {
		start := time.Now()
		out, errOut, err := runKubectl(kubectl, "kustomize", defaultDir())
		if err != nil {
			t.Fatalf("kubectl kustomize config/default: %v\n%s", err, errOut)
		}
		t.Logf("kubectl kustomize config/default: %d bytes in %v", len(out), time.Since(start).Round(time.Millisecond))
		renders = append(renders, out)
	}
	if renders[0] != renders[1] {
		t.Fatal("two renderings of config/default differ")
	}
	// The default ProviderClass is examples/09 with the images: entry's image; no Provider.
	var classes []*unstructured.Unstructured
	for _, o := range parseObjects(t, []byte(renders[0])) {
		switch o.GetKind() {
		case "ProviderClass":
			classes = append(classes, o)
		case "Provider":
			t.Errorf("config/default renders Provider %s/%s", o.GetNamespace(), o.GetName())
		}
	}
	if len(classes) != 1 || classes[0].GetName() != "libvirt" {
		t.Fatalf("config/default renders %d ProviderClasses, want exactly libvirt", len(classes))
	}
	var got, want banlieuev1.ProviderClass
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(classes[0].Object, &got); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "examples", "09-providerclass-libvirt.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(data, &want); err != nil {
		t.Fatal(err)
	}
	repo, tag, _ := strings.Cut(image, ":")
	if got.Spec.Image.Repository != repo || got.Spec.Image.Tag != tag || got.Spec.Image.Digest != "" {
		t.Errorf("ProviderClass image %+v, want %s (the images: entry of config/default)", got.Spec.Image, image)
	}
	if !equality.Semantic.DeepEqual(got.Spec, want.Spec) {
		t.Errorf("config/default's ProviderClass differs from examples/09:\n got %+v\nwant %+v", got.Spec, want.Spec)
	}
}

// TestInstall applies config/default to an empty API server and checks what it installed.
func TestInstall(t *testing.T) {
	start := time.Now()
	c := startCluster(t)
	t.Logf("API server up in %v", time.Since(start).Round(time.Millisecond))
	ctx := context.Background()

	// The documented order: the CRDs first (the default ProviderClass needs its CRD), then the
	// preflight: a server-side dry run of the whole install only resolves once the namespaces
	// exist (a dry-run Namespace is not persisted, so the objects inside it 404).
	installCRDsAndNamespaces(t, c)
	if out, errOut, err := c.run("apply", "--server-side", "--dry-run=server", "-k", defaultDir()); err != nil {
		t.Fatalf("kubectl apply --server-side --dry-run=server -k config/default: %v\n%s%s", err, out, errOut)
	}

	start = time.Now()
	out, errOut, err := c.run("apply", "--server-side", "-k", defaultDir())
	if err != nil {
		t.Fatalf("kubectl apply --server-side -k config/default: %v\n%s%s", err, out, errOut)
	}
	t.Logf("kubectl apply --server-side -k config/default: %d objects in %v", strings.Count(out, "serverside-applied"), time.Since(start).Round(time.Millisecond))
	// A Deployment whose pod template breaks its namespace's Pod Security level draws a
	// "would violate PodSecurity" warning; any warning is a defect of the manifests.
	if strings.Contains(errOut, "Warning") {
		t.Errorf("kubectl apply printed warnings:\n%s", errOut)
	}

	t.Run("reapply is a no-op", func(t *testing.T) {
		out, errOut, err := c.run("diff", "--server-side", "-k", defaultDir())
		if err != nil {
			t.Errorf("kubectl diff --server-side after apply: %v (want no difference)\n%s%s", err, out, errOut)
		}
		out, errOut, err = c.run("apply", "--server-side", "--dry-run=server", "-k", defaultDir())
		if err != nil {
			t.Errorf("kubectl apply --dry-run=server on the installed cluster: %v\n%s%s", err, out, errOut)
		}
	})

	t.Run("CRDs established", func(t *testing.T) {
		for _, name := range crds {
			var crd apiextensionsv1.CustomResourceDefinition
			if err := c.admin.Get(ctx, client.ObjectKey{Name: name}, &crd); err != nil {
				t.Errorf("CRD %s: %v", name, err)
				continue
			}
			if !crdEstablished(&crd) {
				t.Errorf("CRD %s is not Established: %+v", name, crd.Status.Conditions)
			}
		}
		// The new types are served: an empty list of VirtualMachines works.
		deadline := time.Now().Add(10 * time.Second)
		for {
			err := c.admin.List(ctx, &banlieuev1.VirtualMachineList{})
			if err == nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("VirtualMachines not served: %v", err)
			}
			time.Sleep(100 * time.Millisecond)
		}
	})

	t.Run("namespaces carry the Pod Security labels", func(t *testing.T) {
		want := map[string]map[string]string{
			systemNS: {"enforce": "restricted", "audit": "restricted", "warn": "restricted"},
			buildNS:  {"enforce": "restricted", "audit": "restricted", "warn": "restricted"},
		}
		for ns, levels := range want {
			var n corev1.Namespace
			if err := c.admin.Get(ctx, client.ObjectKey{Name: ns}, &n); err != nil {
				t.Fatalf("namespace %s: %v", ns, err)
			}
			for mode, level := range levels {
				key := "pod-security.kubernetes.io/" + mode
				if got := n.Labels[key]; got != level {
					t.Errorf("namespace %s: %s = %q, want %q", ns, key, got, level)
				}
			}
		}
	})

	t.Run("deployments", func(t *testing.T) {
		for _, role := range roles {
			var d appsv1.Deployment
			if err := c.admin.Get(ctx, client.ObjectKey{Namespace: systemNS, Name: "banlieue-" + role}, &d); err != nil {
				t.Fatalf("Deployment banlieue-%s: %v", role, err)
			}
			checkDeployment(t, role, &d)
		}
	})

	t.Run("pod templates pass their namespace's Pod Security level", func(t *testing.T) {
		admin, warns := c.withWarnings(t)
		for _, role := range roles {
			var d appsv1.Deployment
			if err := c.admin.Get(ctx, client.ObjectKey{Namespace: systemNS, Name: "banlieue-" + role}, &d); err != nil {
				t.Fatal(err)
			}
			// PodSecurity admission only warns about Deployments; a Pod is where it enforces.
			pod := &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Name: "pss-" + role, Namespace: systemNS, Labels: d.Spec.Template.Labels},
				Spec:       d.Spec.Template.Spec,
			}
			testenv.Allowed(t, role+" pod in "+systemNS+" (dry run)", admin.Create(ctx, pod, client.DryRunAll))
			if w := warns.take(); len(w) > 0 {
				t.Errorf("%s pod: warnings %q", role, w)
			}
		}
		// Controls, proving the levels are live: a bare pod is refused in both namespaces
		// (banlieue-imagebuild once enforced privileged; ADR-0092).
		bare := func(ns, sa string) *corev1.Pod {
			return &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Name: "bare", Namespace: ns},
				Spec: corev1.PodSpec{ServiceAccountName: sa,
					Containers: []corev1.Container{{Name: "c", Image: image}}},
			}
		}
		// The install ships no account in the build namespace (each Provider's import account is
		// the operator's), so the control runs as one made for it.
		probe := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "bare-probe", Namespace: buildNS}}
		if err := admin.Create(ctx, probe); err != nil {
			t.Fatal(err)
		}
		defer func() { _ = admin.Delete(ctx, probe) }() // best effort: the namespace goes at uninstall
		for ns, sa := range map[string]string{systemNS: "banlieue-controller", buildNS: probe.Name} {
			err := admin.Create(ctx, bare(ns, sa), client.DryRunAll)
			if err == nil || !strings.Contains(err.Error(), `violates PodSecurity "restricted`) {
				t.Errorf("bare pod in %s: want a restricted PodSecurity refusal, got %v", ns, err)
			}
		}
		warns.take()
	})

	checkRoleBoundaries(t, c, systemNS)

	t.Run("artifacts PVC", func(t *testing.T) {
		var pvc corev1.PersistentVolumeClaim
		if err := c.admin.Get(ctx, client.ObjectKey{Namespace: buildNS, Name: "banlieue-artifacts"}, &pvc); err != nil {
			t.Fatalf("PVC banlieue-artifacts: %v", err)
		}
		if !slices.Equal(pvc.Spec.AccessModes, []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany}) {
			t.Errorf("PVC access modes %v, want [ReadWriteMany]", pvc.Spec.AccessModes)
		}
		if pvc.Spec.StorageClassName != nil {
			t.Errorf("PVC storageClassName %q, want unset (the cluster default)", *pvc.Spec.StorageClassName)
		}
	})

	t.Run("default ProviderClass", func(t *testing.T) {
		var class banlieuev1.ProviderClass
		if err := c.admin.Get(ctx, client.ObjectKey{Name: "libvirt"}, &class); err != nil {
			t.Fatalf("ProviderClass libvirt: %v", err)
		}
		if got := class.Spec.Image.Repository + ":" + class.Spec.Image.Tag; got != image || class.Spec.Backend != "libvirt" {
			t.Errorf("ProviderClass libvirt: backend %q image %q, want libvirt and %q", class.Spec.Backend, got, image)
		}
	})

	// RBAC, by impersonating the installed ServiceAccounts.
	t.Run("admission policies on provider accounts, the controller and the operator", func(t *testing.T) {
		// Their behaviour is TestImportJobAdmission's and TestProviderWritesAdmission's
		// (internal/provider/libvirt/image); here: installed, bound, denying, with their params.
		for _, name := range []string{"banlieue-import-jobs", "banlieue-provider-pods", "banlieue-provider-writes", "banlieue-controller-secrets",
			"banlieue-operator-writes", "banlieue-operator-images"} {
			var policy admissionregistrationv1.ValidatingAdmissionPolicy
			testenv.Allowed(t, "ValidatingAdmissionPolicy "+name, c.admin.Get(ctx, client.ObjectKey{Name: name}, &policy))
			var binding admissionregistrationv1.ValidatingAdmissionPolicyBinding
			if err := c.admin.Get(ctx, client.ObjectKey{Name: name}, &binding); err != nil {
				t.Errorf("ValidatingAdmissionPolicyBinding %s: %v", name, err)
				continue
			}
			if binding.Spec.PolicyName != name || !slices.Equal(binding.Spec.ValidationActions, []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny}) {
				t.Errorf("binding %s: policy %q actions %v", name, binding.Spec.PolicyName, binding.Spec.ValidationActions)
			}
			if ref := binding.Spec.ParamRef; policy.Spec.ParamKind != nil && (ref == nil || ref.Name != "banlieue-provider-accounts" ||
				ref.Namespace != buildNS || ref.ParameterNotFoundAction == nil || *ref.ParameterNotFoundAction != admissionregistrationv1.DenyAction) {
				t.Errorf("binding %s: paramRef %+v, want banlieue-provider-accounts in %s, denying when absent", name, ref, buildNS)
			}
		}
	})

	t.Run("the provider accounts' params ship empty", func(t *testing.T) {
		// A binding's params are resolved before its match conditions: without this ConfigMap
		// every Job in the build namespace and every status write would be refused.
		var cm corev1.ConfigMap
		testenv.Allowed(t, "ConfigMap "+buildNS+"/banlieue-provider-accounts",
			c.admin.Get(ctx, client.ObjectKey{Namespace: buildNS, Name: "banlieue-provider-accounts"}, &cm))
		if len(cm.Data) != 0 {
			t.Errorf("data %v, want none until the operator writes it", cm.Data)
		}
	})

	t.Run("no shared import ServiceAccount", func(t *testing.T) {
		// Once, one banlieue-import account ran every Provider's import and could read
		// every Provider's credentials; each Provider now has its own (docs/security.md, "Import
		// Jobs: one account per Provider, pinned at admission").
		err := c.admin.Get(ctx, client.ObjectKey{Namespace: buildNS, Name: "banlieue-import"}, &corev1.ServiceAccount{})
		if !apierrors.IsNotFound(err) {
			t.Errorf("ServiceAccount %s/banlieue-import: want not found, got %v", buildNS, err)
		}
	})

	t.Run("uninstall", func(t *testing.T) {
		// The documented order: ProviderClasses go while the roles still run (step 1), then the
		// install. --ignore-not-found: the ProviderClass is part of config/default but already
		// gone (and kubectl may delete its CRD first). --wait=false: envtest has no namespace
		// controller, so namespaces stay Terminating.
		if out, errOut, err := c.run("delete", "providerclasses", "--all"); err != nil {
			t.Fatalf("kubectl delete providerclasses --all: %v\n%s%s", err, out, errOut)
		}
		start := time.Now()
		out, errOut, err := c.run("delete", "-k", defaultDir(), "--ignore-not-found", "--wait=false")
		if err != nil {
			t.Fatalf("kubectl delete -k config/default: %v\n%s%s", err, out, errOut)
		}
		t.Logf("kubectl delete -k config/default in %v", time.Since(start).Round(time.Millisecond))
		for _, role := range roles {
			err := c.admin.Get(ctx, client.ObjectKey{Name: "banlieue-" + role}, &rbacv1.ClusterRole{})
			if !apierrors.IsNotFound(err) {
				t.Errorf("ClusterRole banlieue-%s after uninstall: %v", role, err)
			}
		}
	})
}

func crdEstablished(crd *apiextensionsv1.CustomResourceDefinition) bool {
	for _, c := range crd.Status.Conditions {
		if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
			return true
		}
	}
	return false
}

// checkDeployment holds one role's Deployment to the documented shape.
func checkDeployment(t *testing.T, role string, d *appsv1.Deployment) {
	t.Helper()
	pod := d.Spec.Template.Spec
	if pod.ServiceAccountName != "banlieue-"+role {
		t.Errorf("%s: serviceAccountName %q", role, pod.ServiceAccountName)
	}
	sc := pod.SecurityContext
	if sc == nil || !ptr.Deref(sc.RunAsNonRoot, false) || ptr.Deref(sc.RunAsUser, 0) != 65532 ||
		sc.SeccompProfile == nil || sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("%s: pod securityContext %+v", role, sc)
	}
	if len(pod.Containers) != 1 {
		t.Fatalf("%s: %d containers, want 1", role, len(pod.Containers))
	}
	ctr := pod.Containers[0]
	if ctr.Image != image {
		t.Errorf("%s: image %q, want %q (the images: entry of config/default)", role, ctr.Image, image)
	}
	if len(ctr.Command) != 0 {
		t.Errorf("%s: command %q; the image's entrypoint is the binary, args select the role", role, ctr.Command)
	}
	if len(ctr.Args) == 0 || ctr.Args[0] != role {
		t.Errorf("%s: args %q, want the role first", role, ctr.Args)
	}
	for _, want := range []string{"--leader-election-id=banlieue-" + role, "--leader-election-namespace=$(POD_NAMESPACE)"} {
		if !slices.Contains(ctr.Args, want) {
			t.Errorf("%s: args %q lack %s", role, ctr.Args, want)
		}
	}
	if slices.ContainsFunc(ctr.Args, func(a string) bool { return strings.HasPrefix(a, "--no-leader-elect") }) {
		t.Errorf("%s: leader election is off: %q", role, ctr.Args)
	}
	env := map[string]string{}
	for _, e := range ctr.Env {
		if e.ValueFrom != nil && e.ValueFrom.FieldRef != nil {
			env[e.Name] = e.ValueFrom.FieldRef.FieldPath
		}
	}
	if env["POD_NAME"] != "metadata.name" || env["POD_NAMESPACE"] != "metadata.namespace" {
		t.Errorf("%s: downward API env %v", role, env)
	}
	ports := map[string]int32{}
	for _, p := range ctr.Ports {
		ports[p.Name] = p.ContainerPort
	}
	if ports["metrics"] != 8080 || ports["health"] != 8081 {
		t.Errorf("%s: ports %v, want metrics 8080 and health 8081", role, ports)
	}
	for probe, path := range map[*corev1.Probe]string{ctr.LivenessProbe: "/livez", ctr.ReadinessProbe: "/readyz"} {
		if probe == nil || probe.HTTPGet == nil || probe.HTTPGet.Path != path || probe.HTTPGet.Port.String() != "health" {
			t.Errorf("%s: probe for %s: %+v", role, path, probe)
		}
	}
	csc := ctr.SecurityContext
	if csc == nil || ptr.Deref(csc.AllowPrivilegeEscalation, true) || !ptr.Deref(csc.ReadOnlyRootFilesystem, false) ||
		csc.Capabilities == nil || !slices.Equal(csc.Capabilities.Drop, []corev1.Capability{"ALL"}) {
		t.Errorf("%s: container securityContext %+v", role, csc)
	}
	for _, res := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		if _, ok := ctr.Resources.Requests[res]; !ok {
			t.Errorf("%s: no %s request", role, res)
		}
		if _, ok := ctr.Resources.Limits[res]; !ok {
			t.Errorf("%s: no %s limit", role, res)
		}
	}
}

func libvirtMachine(t *testing.T) *unstructured.Unstructured {
	t.Helper()
	var m map[string]any
	if err := yaml.Unmarshal([]byte(`
apiVersion: infrastructure.banlieue.io/v1alpha1
kind: LibvirtMachine
metadata: {name: lm, namespace: `+tenantNS+`}
spec:
  providerRef: {name: p}
  pool: default
  domainName: tenant-a-lm
  bootSource: {kind: backingVolume, volume: img.raw}
  vcpus: 1
  memoryMiB: 512
  firmware: efi
  disks: [{name: os, sizeGiB: 10}]
  network: [{name: nic0, source: {kind: network, name: default}, ipam: {}}]
`), &m); err != nil {
		t.Fatal(err)
	}
	return &unstructured.Unstructured{Object: m}
}

func podSpec() corev1.PodSpec {
	return corev1.PodSpec{
		RestartPolicy:   corev1.RestartPolicyNever,
		SecurityContext: &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true), RunAsUser: ptr.To[int64](65532), SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
		Containers: []corev1.Container{{Name: "c", Image: image, SecurityContext: &corev1.SecurityContext{
			AllowPrivilegeEscalation: ptr.To(false),
			Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		}}},
	}
}

func deployment(ns string) *appsv1.Deployment {
	labels := map[string]string{"app": "probe"}
	spec := podSpec()
	spec.RestartPolicy = corev1.RestartPolicyAlways
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "probe", Namespace: ns},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: spec},
		},
	}
}

func job(ns string) *batchv1.Job {
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: "build-probe", Namespace: ns},
		Spec:       batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: podSpec()}},
	}
}

func clusterRoleBinding(role string) *rbacv1.ClusterRoleBinding {
	return &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: providerAccount + "-" + role, Labels: operatorLabels()},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: providerAccount, Namespace: tenantNS}},
	}
}

// ownerRef is what controllerutil.SetControllerReference writes: controller and
// blockOwnerDeletion both true.
func vsphereMachine(t *testing.T) *unstructured.Unstructured {
	t.Helper()
	var m map[string]any
	if err := yaml.Unmarshal([]byte(`
apiVersion: infrastructure.banlieue.io/v1alpha1
kind: VSphereMachine
metadata: {name: vsm, namespace: `+tenantNS+`}
spec:
  providerRef: {name: p}
  vmName: tenant-a-vsm
  template: /dc1/vm/templates/ubuntu-24.04
  cpus: 1
  memoryMiB: 512
  disks: [{name: os, sizeGiB: 10, datastore: ds1}]
  network: [{name: nic0, portGroup: pg, ipam: {}}]
`), &m); err != nil {
		t.Fatal(err)
	}
	return &unstructured.Unstructured{Object: m}
}

func ownerRef(kind string, owner client.Object) metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: "banlieue.io/v1alpha1", Kind: kind, Name: owner.GetName(), UID: owner.GetUID(),
		Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}
}

func provider(t *testing.T, ctx context.Context, c *cluster) *banlieuev1.Provider {
	t.Helper()
	p := &banlieuev1.Provider{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: tenantNS},
		Spec: banlieuev1.ProviderSpec{
			ProviderClassRef: banlieuev1.LocalObjectReference{Name: "libvirt"},
			Connection: banlieuev1.ProviderConnection{
				Endpoint:       "qemu+tls://host.example/system",
				CredentialsRef: banlieuev1.LocalObjectReference{Name: "p-tls"},
			},
		},
	}
	if err := c.admin.Create(ctx, p); err != nil {
		t.Fatalf("creating Provider: %v", err)
	}
	return p
}

// buildRole is the operator's Role in the build namespace: the additionalRules of
// examples/09-providerclass-libvirt.yaml, read from the example so the two cannot drift.
func buildRole(t *testing.T) *rbacv1.Role {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "examples", "09-providerclass-libvirt.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var class banlieuev1.ProviderClass
	if err := yaml.Unmarshal(data, &class); err != nil {
		t.Fatal(err)
	}
	if len(class.Spec.AdditionalRules) == 0 {
		t.Fatal("examples/09 has no additionalRules")
	}
	return &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "banlieue-provider-libvirt-p-build", Namespace: buildNS, Labels: operatorLabels()},
		Rules:      operator.RBACRules(class.Spec.AdditionalRules),
	}
}

// userDataRole is the operator's user-data grant of a Provider in a machine's namespace
// (internal/operator/userdata.go): get on the machines' per-machine Secrets, by name.
func userDataRole() *rbacv1.Role {
	return &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "banlieue-provider-libvirt-p-userdata", Namespace: tenantNS, Labels: operatorLabels()},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get"}, ResourceNames: []string{"userdata-web-0123456789abcdef"}},
		},
	}
}

// providerRole is the per-Provider Role of docs/guides/libvirt-provider.md, "5. What the operator creates for it" in the Provider's namespace.
func providerRole() *rbacv1.Role {
	return &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "banlieue-provider-libvirt-p", Namespace: tenantNS, Labels: operatorLabels()},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get"}, ResourceNames: []string{"p-tls"}},
			{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get"}, ResourceNames: []string{"p-ca"}},
			{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"create"}},
			{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"get", "update", "patch"}, ResourceNames: []string{"banlieue-provider-libvirt-p"}},
			{APIGroups: []string{"", "events.k8s.io"}, Resources: []string{"events"}, Verbs: []string{"create", "patch"}},
		},
	}
}
