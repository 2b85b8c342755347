package operator

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap/zapcore"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
	"banlieue.io/banlieue/internal/operator"
	"banlieue.io/banlieue/internal/testenv"
)

const (
	systemNs = "banlieue-system"
	buildNs  = "banlieue-imagebuild"
	provider = "libvirt-edge-host-7"
	workload = "banlieue-provider-libvirt-libvirt-edge-host-7-6f5aeeba6513f8e3"
	// workloadB is the same Provider's under class libvirt-b: cut to 46 characters before the
	// digest of (libvirt-b, banlieue-system, libvirt-edge-host-7).
	workloadB = "banlieue-provider-libvirt-b-libvirt-edge-host-ccdc7f3e98f7a17e"
	operatorS = "banlieue-operator"
)

func TestOperator(t *testing.T) {
	env := testenv.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	admin := env.Client

	for _, ns := range []string{systemNs, buildNs} {
		if err := admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			t.Fatal(err)
		}
	}
	// RBAC must be enforced, or every permission check below would pass vacuously.
	var secrets corev1.SecretList
	testenv.Forbidden(t, "an unbound ServiceAccount lists secrets", as(t, env.Config, systemNs, "nobody").List(ctx, &secrets))

	// The operator runs as a ServiceAccount bound to nothing but the generated ClusterRole.
	startInstalledOperator(ctx, t, env, admin)
	waitClassReady(ctx, t, admin, "libvirt", metav1.ConditionFalse, "MissingClusterRole", 0)

	for _, obj := range []client.Object{
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "libvirt-edge-creds", Namespace: systemNs}, StringData: map[string]string{"tls.crt": "c", "tls.key": "k"}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "libvirt-edge-ca", Namespace: systemNs}, Data: map[string]string{"ca.crt": "ca"}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "someone-elses", Namespace: systemNs}},
	} {
		if err := admin.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	var p banlieuev1.Provider
	repoFile(t, "examples/02-provider-libvirt-edge.yaml", &p)
	if err := admin.Create(ctx, &p); err != nil {
		t.Fatal(err)
	}

	t.Run("the guide's Provider gets its whole workload", func(t *testing.T) { testWorkload(ctx, t, admin, &p) })
	t.Run("ProviderClass Ready once the ClusterRole is installed", func(t *testing.T) {
		installClusterRole(ctx, t, admin, "config/rbac/provider-libvirt/role.yaml")
		waitClassReady(ctx, t, admin, "libvirt", metav1.ConditionTrue, banlieuev1.ReasonReady, 1)
	})
	t.Run("granted permissions, proven by impersonation", func(t *testing.T) { testGrants(ctx, t, env, &p) })
	t.Run("the provider gets its machines' user-data Secrets and no other", func(t *testing.T) { testUserDataGrants(ctx, t, env, admin) })
	t.Run("a tenant cannot read another team's user-data", func(t *testing.T) { testTenantUserData(ctx, t, env, admin) })
	t.Run("the provider gets its Cluster API machines' bootstrap Secrets and no other", func(t *testing.T) { testBootstrapGrants(ctx, t, env, admin) })
	t.Run("a vsphere Provider gets its own workload and account", func(t *testing.T) { testVSphereWorkload(ctx, t, env, admin) })
	t.Run("the operator cannot escalate", func(t *testing.T) {
		op := as(t, env.Config, systemNs, operatorS)
		crb := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "steal"},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"},
			Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: operatorS, Namespace: systemNs}}}
		testenv.Forbidden(t, "operator binds cluster-admin", op.Create(ctx, crb))
		testOperatorPinned(ctx, t, env, admin)
	})
	t.Run("a class edit rolls the Deployment", func(t *testing.T) { testClassEdit(ctx, t, admin, &p) })
	t.Run("a paused class skips its Providers", func(t *testing.T) { testPaused(ctx, t, admin) })
	t.Run("a missing class is reported", func(t *testing.T) { testMissingClass(ctx, t, admin, &p) })
	t.Run("a class change prunes the old workload", func(t *testing.T) { testRename(ctx, t, admin, &p) })
	t.Run("deleting the Provider deletes its workload", func(t *testing.T) { testDelete(ctx, t, admin, &p) })
}

// startOperator runs the operator's controllers as the banlieue-operator ServiceAccount.
// startInstalledOperator runs the operator as its ServiceAccount, bound to nothing but the
// generated ClusterRole, and creates the guide's ProviderClass (examples/09).
func startInstalledOperator(ctx context.Context, t *testing.T, env *testenv.Env, admin client.Client) {
	t.Helper()
	installClusterRole(ctx, t, admin, "config/rbac/operator/role.yaml")
	bind(ctx, t, admin, "banlieue-operator", systemNs, operatorS)
	installRoles(ctx, t, admin, "config/rbac/operator/role.yaml", systemNs, operatorS)
	// The operator runs under the policies that pin its writes, as installed; they are in force
	// (the API server has loaded them) before it writes anything.
	testenv.InstallAdmission(ctx, t, admin, "operator-workloads.yaml")
	op := as(t, env.Config, systemNs, operatorS)
	testenv.Eventually(t, time.Minute, "banlieue-operator-writes in force", func() error {
		err := op.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "probe", Namespace: systemNs}}, client.DryRunAll)
		return testenv.Unmet(apierrors.IsForbidden(err), "create: "+errString(err))
	})
	startOperator(ctx, t, env, operator.Options{})
	var class banlieuev1.ProviderClass
	repoFile(t, "examples/09-providerclass-libvirt.yaml", &class)
	if err := admin.Create(ctx, &class); err != nil {
		t.Fatal(err)
	}
}

func startOperator(ctx context.Context, t *testing.T, env *testenv.Env, opts operator.Options) {
	t.Helper()
	ctrl.SetLogger(zap.New(zap.UseDevMode(true), zap.Level(zapcore.ErrorLevel)))
	mopts := testenv.ManagerOptions()
	mopts.Cache = operator.CacheOptions(opts)
	mgr := testenv.NewManagerWith(t, testenv.Impersonating(env.Config, testenv.ServiceAccountUser(systemNs, operatorS)), mopts)
	if err := operator.Setup(mgr, opts); err != nil {
		t.Fatal(err)
	}
	stop := testenv.StartManager(t, mgr)
	t.Cleanup(func() {
		if err := stop(); err != nil {
			t.Errorf("manager: %v", err)
		}
	})
}

func bind(ctx context.Context, t *testing.T, admin client.Client, role, ns, sa string) {
	t.Helper()
	crb := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: role},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: sa, Namespace: ns}}}
	if err := admin.Create(ctx, crb); err != nil {
		t.Fatal(err)
	}
}

func waitClassReady(ctx context.Context, t *testing.T, c client.Client, name string, status metav1.ConditionStatus, reason string, providers int32) {
	t.Helper()
	testenv.Eventually(t, timeout, "ProviderClass "+name+" status", func() error {
		var class banlieuev1.ProviderClass
		if err := c.Get(ctx, client.ObjectKey{Name: name}, &class); err != nil {
			return err
		}
		ready := meta.FindStatusCondition(class.Status.Conditions, banlieuev1.ConditionReady)
		if ready == nil || ready.Status != status || ready.Reason != reason || class.Status.Providers != providers ||
			class.Status.ObservedGeneration != class.Generation || ready.ObservedGeneration != class.Generation {
			return fmt.Errorf("want Ready=%s %s providers=%d, got %+v", status, reason, providers, class.Status)
		}
		return nil
	})
}

func testWorkload(ctx context.Context, t *testing.T, c client.Client, p *banlieuev1.Provider) {
	wantLabels := map[string]string{
		"app.kubernetes.io/name":         "banlieue",
		"banlieue.io/provider":           provider,
		"banlieue.io/provider-namespace": systemNs,
		"banlieue.io/provider-class":     "libvirt",
		"app.kubernetes.io/component":    "provider-libvirt",
		"app.kubernetes.io/managed-by":   "banlieue-operator",
		"app.kubernetes.io/instance":     workload,
	}
	var dep appsv1.Deployment
	testenv.Eventually(t, timeout, "Deployment", func() error {
		return c.Get(ctx, client.ObjectKey{Namespace: systemNs, Name: workload}, &dep)
	})
	testenv.Eventually(t, timeout, "the provider account's entry", func() error {
		data, err := providerAccounts(ctx, c)
		if err != nil {
			return err
		}
		want := map[string]string{systemNs + "." + workload + ".image": "registry.example/banlieue:v0.1.0",
			systemNs + "." + workload + ".provider": systemNs + "/" + provider}
		if !reflect.DeepEqual(data, want) {
			return fmt.Errorf("data %v, want %v", data, want)
		}
		return nil
	})
	if err := c.Get(ctx, client.ObjectKeyFromObject(p), p); err != nil {
		t.Fatal(err)
	}
	owner := []metav1.OwnerReference{{APIVersion: "banlieue.io/v1alpha1", Kind: "Provider", Name: provider, UID: p.UID,
		Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}}
	objs := map[string]client.Object{
		"ServiceAccount": &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: systemNs, Name: workload}},
		// The Provider's own import account, where its Jobs run; no owner reference can cross
		// into the build namespace.
		"import ServiceAccount": &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: buildNs, Name: workload + "-import"}},
		"Role":                  &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: systemNs, Name: workload}},
		"RoleBinding":           &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: systemNs, Name: workload}},
		"import Role":           &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: systemNs, Name: workload + "-import"}},
		"import RoleBinding":    &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: systemNs, Name: workload + "-import"}},
		"ClusterRoleBinding":    &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: workload}},
		"Deployment":            &dep,
	}
	for what, obj := range objs {
		if err := c.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
			t.Errorf("%s: %v", what, err)
			continue
		}
		if !reflect.DeepEqual(obj.GetLabels(), wantLabels) {
			t.Errorf("%s labels %v", what, obj.GetLabels())
		}
		if got := obj.GetAnnotations()["banlieue.io/provider"]; got != systemNs+"/"+provider {
			t.Errorf("%s identity annotation %q", what, got)
		}
		wantOwner := owner
		if what == "ClusterRoleBinding" || what == "import ServiceAccount" {
			wantOwner = nil
		}
		if !reflect.DeepEqual(obj.GetOwnerReferences(), wantOwner) {
			t.Errorf("%s ownerReferences %+v, want %+v", what, obj.GetOwnerReferences(), wantOwner)
		}
		if i := slices.IndexFunc(obj.GetManagedFields(), func(m metav1.ManagedFieldsEntry) bool {
			return m.Manager == banlieuev1.FieldManagerOperator && m.Operation == metav1.ManagedFieldsOperationApply
		}); i < 0 {
			t.Errorf("%s is not applied by %s: %+v", what, banlieuev1.FieldManagerOperator, obj.GetManagedFields())
		}
	}
	crb := objs["ClusterRoleBinding"].(*rbacv1.ClusterRoleBinding)
	if crb.RoleRef.Name != "banlieue-provider-libvirt" || crb.Subjects[0].Name != workload || crb.Subjects[0].Namespace != systemNs {
		t.Errorf("ClusterRoleBinding %+v %+v", crb.RoleRef, crb.Subjects)
	}
	irb := objs["import RoleBinding"].(*rbacv1.RoleBinding)
	if want := []rbacv1.Subject{{Kind: "ServiceAccount", Name: workload + "-import", Namespace: buildNs}}; !reflect.DeepEqual(irb.Subjects, want) {
		t.Errorf("import RoleBinding subjects %+v", irb.Subjects)
	}

	pod := dep.Spec.Template.Spec
	ctr := pod.Containers[0]
	wantArgs := []string{"provider", "libvirt", "--provider-name", provider, "--namespace", systemNs,
		"--leader-election-id", workload, "--leader-election-namespace", systemNs,
		"--import-image", "registry.example/banlieue:v0.1.0", "--import-service-account", workload + "-import",
		"--console-port", "8443", "--console-relay", "system:serviceaccount:" + systemNs + ":banlieue-controller",
		"--import-deadline", "6h0m0s", "--import-cpu-request", "100m", "--import-cpu-limit", "1", "--import-memory-request", "64Mi", "--import-memory-limit", "256Mi",
		"--import-image-pull-policy", "IfNotPresent",
		// The example class's concurrency (ADR-0132).
		"--workers", "16", "--host-domain-operations", "8", "--host-volume-uploads", "4",
		"--log-level", "info", "--log-format", "json"}
	if !reflect.DeepEqual(ctr.Args, wantArgs) {
		t.Errorf("args %q", ctr.Args)
	}
	if ctr.Name != "provider" || ctr.Image != "registry.example/banlieue:v0.1.0" || ctr.ImagePullPolicy != corev1.PullIfNotPresent ||
		pod.ServiceAccountName != workload || *dep.Spec.Replicas != 1 {
		t.Errorf("container %s image %s policy %s sa %s", ctr.Name, ctr.Image, ctr.ImagePullPolicy, pod.ServiceAccountName)
	}
	if !reflect.DeepEqual(dep.Spec.Selector.MatchLabels, map[string]string{"app.kubernetes.io/name": "banlieue", "app.kubernetes.io/instance": workload}) {
		t.Errorf("selector %v", dep.Spec.Selector.MatchLabels)
	}
	if sc := pod.SecurityContext; !*sc.RunAsNonRoot || *sc.RunAsUser != 65532 || *sc.RunAsGroup != 65532 || *sc.FSGroup != 65532 ||
		sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault || *pod.TerminationGracePeriodSeconds != 30 {
		t.Errorf("pod securityContext %+v", sc)
	}
	if sc := ctr.SecurityContext; *sc.AllowPrivilegeEscalation || !*sc.ReadOnlyRootFilesystem ||
		!reflect.DeepEqual(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) || sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("container securityContext %+v", sc)
	}
	if lp, rp := ctr.LivenessProbe, ctr.ReadinessProbe; lp.HTTPGet.Path != "/livez" || lp.InitialDelaySeconds != 10 || lp.PeriodSeconds != 30 ||
		lp.TimeoutSeconds != 3 || lp.FailureThreshold != 3 || rp.HTTPGet.Path != "/readyz" || rp.InitialDelaySeconds != 2 ||
		rp.PeriodSeconds != 5 || rp.TimeoutSeconds != 2 || rp.FailureThreshold != 3 || lp.HTTPGet.Port.StrVal != "health" {
		t.Errorf("probes %+v %+v", lp, rp)
	}
	if len(ctr.Ports) != 3 || ctr.Ports[0].Name != "metrics" || ctr.Ports[0].ContainerPort != 8080 ||
		ctr.Ports[1].Name != "health" || ctr.Ports[1].ContainerPort != 8081 ||
		ctr.Ports[2].Name != "console" || ctr.Ports[2].ContainerPort != 8443 {
		t.Errorf("ports %+v", ctr.Ports)
	}
	var env []string
	for _, e := range ctr.Env {
		env = append(env, e.Name+"="+e.ValueFrom.FieldRef.FieldPath)
	}
	if want := []string{"POD_NAME=metadata.name", "POD_NAMESPACE=metadata.namespace", "POD_SERVICE_ACCOUNT=spec.serviceAccountName"}; !reflect.DeepEqual(env, want) {
		t.Errorf("env %v", env)
	}
	if r := ctr.Resources; r.Requests.Cpu().String() != "50m" || r.Requests.Memory().String() != "128Mi" ||
		r.Limits.Cpu().String() != "1" || r.Limits.Memory().String() != "512Mi" {
		t.Errorf("resources %+v", r)
	}

	testenv.Eventually(t, timeout, "status.workload and finalizer", func() error {
		if err := c.Get(ctx, client.ObjectKeyFromObject(p), p); err != nil {
			return err
		}
		w := p.Status.Workload
		if w == nil || w.DeploymentName != workload || w.Namespace != systemNs || w.ReadyReplicas != 0 || w.ObservedGeneration != p.Generation {
			return fmt.Errorf("status.workload %+v", w)
		}
		if !slices.Contains(p.Finalizers, banlieuev1.FinalizerProviderWorkload) {
			return fmt.Errorf("finalizers %v", p.Finalizers)
		}
		return nil
	})
	if len(p.Status.Conditions) != 0 {
		t.Errorf("the operator must not write conditions: %+v", p.Status.Conditions)
	}
	testenv.Eventually(t, timeout, "WorkloadApplied event", func() error {
		return hasEvent(ctx, c, systemNs, provider, banlieuev1.ReasonWorkloadApplied, workload)
	})

	// A pass that applies the same workload is no news: drift the Deployment's replicas, wait
	// for the operator's pass to put them back, and find the one WorkloadApplied event alone,
	// with no series (a repeat would have patched series.count to 2).
	if err := c.Get(ctx, client.ObjectKey{Namespace: systemNs, Name: workload}, &dep); err != nil {
		t.Fatal(err)
	}
	want := *dep.Spec.Replicas
	dep.Spec.Replicas = ptr.To(want + 4)
	if err := c.Update(ctx, &dep); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, timeout, "the operator's pass repairs the replicas", func() error {
		if err := c.Get(ctx, client.ObjectKey{Namespace: systemNs, Name: workload}, &dep); err != nil {
			return err
		}
		return testenv.Unmet(*dep.Spec.Replicas == want, fmt.Sprintf("replicas %d", *dep.Spec.Replicas))
	})
	// The recorder writes asynchronously; give a wrongly emitted event time to land.
	time.Sleep(3 * time.Second)
	evs, err := eventsAbout(ctx, c, systemNs, provider, banlieuev1.ReasonWorkloadApplied)
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 1 || evs[0].Series != nil || !strings.Contains(evs[0].Note, dep.Annotations[banlieuev1.AnnotationWorkloadFingerprint]) {
		t.Errorf("WorkloadApplied events after an unchanged pass = %+v, want the first apply's alone", evs)
	}
}

func testGrants(ctx context.Context, t *testing.T, env *testenv.Env, p *banlieuev1.Provider) {
	sa := as(t, env.Config, systemNs, workload)
	get := func(c client.Client, obj client.Object, ns, name string) error {
		return c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, obj)
	}
	testenv.Allowed(t, "provider reads its credentials Secret", get(sa, &corev1.Secret{}, systemNs, "libvirt-edge-creds"))
	testenv.Allowed(t, "provider reads its CA ConfigMap", get(sa, &corev1.ConfigMap{}, systemNs, "libvirt-edge-ca"))
	testenv.Forbidden(t, "provider reads another Secret", get(sa, &corev1.Secret{}, systemNs, "someone-elses"))
	testenv.Forbidden(t, "provider lists Secrets", sa.List(ctx, &corev1.SecretList{}, client.InNamespace(systemNs)))
	testenv.Forbidden(t, "provider watches ConfigMaps", sa.List(ctx, &corev1.ConfigMapList{}, client.InNamespace(systemNs)))
	// Import Jobs live in the build namespace; the class's additionalRules are granted there
	// (the guide: "Import Job 403 on jobs: the ProviderClass is missing additionalRules").
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "import-probe", Namespace: buildNs}, Spec: batchv1.JobSpec{
		Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever,
			Containers: []corev1.Container{{Name: "import", Image: "registry.example/banlieue:v0.1.0"}}}}}}
	testenv.Allowed(t, "provider creates an import Job in "+buildNs, sa.Create(ctx, job.DeepCopy(), client.DryRunAll))
	testenv.Allowed(t, "provider reads an import Job by name", ignoreNotFound(get(sa, &batchv1.Job{}, buildNs, "import-probe")))
	testenv.Allowed(t, "provider watches its import Jobs", sa.List(ctx, &batchv1.JobList{}, client.InNamespace(buildNs)))
	testenv.Forbidden(t, "provider lists Jobs outside the build namespace", sa.List(ctx, &batchv1.JobList{}, client.InNamespace(systemNs)))
	testenv.Forbidden(t, "provider creates Jobs outside the build namespace", sa.Create(ctx, &batchv1.Job{ObjectMeta: metav1.ObjectMeta{
		Name: "elsewhere", Namespace: systemNs}, Spec: job.Spec}, client.DryRunAll))
	testenv.Allowed(t, "provider updates its own Provider status", ignoreNotFound(sa.Status().Patch(ctx, p.DeepCopy(), client.Merge, client.DryRunAll)))

	imp := as(t, env.Config, buildNs, workload+"-import")
	testenv.Allowed(t, "import reads its Provider", get(imp, &banlieuev1.Provider{}, systemNs, provider))
	testenv.Allowed(t, "import reads the credentials Secret", get(imp, &corev1.Secret{}, systemNs, "libvirt-edge-creds"))
	testenv.Allowed(t, "import reads the CA ConfigMap", get(imp, &corev1.ConfigMap{}, systemNs, "libvirt-edge-ca"))
	testenv.Forbidden(t, "import reads another Secret", get(imp, &corev1.Secret{}, systemNs, "someone-elses"))
	testenv.Forbidden(t, "import reads another Provider", get(imp, &banlieuev1.Provider{}, systemNs, "other-host"))
	testenv.Forbidden(t, "import lists Providers", imp.List(ctx, &banlieuev1.ProviderList{}, client.InNamespace(systemNs)))
	testenv.Forbidden(t, "import creates Jobs", imp.Create(ctx, job.DeepCopy(), client.DryRunAll))

	// The operator's build namespace's default account gets nothing of any Provider (docs/adr/0145):
	// it runs the build pods.
	def := as(t, env.Config, buildNs, "default")
	testenv.Forbidden(t, "the build namespace's default account reads the Provider", get(def, &banlieuev1.Provider{}, systemNs, provider))
	testenv.Forbidden(t, "the build namespace's default account reads the credentials Secret", get(def, &corev1.Secret{}, systemNs, "libvirt-edge-creds"))
	testenv.Forbidden(t, "the build namespace's default account reads the CA ConfigMap", get(def, &corev1.ConfigMap{}, systemNs, "libvirt-edge-ca"))
}

func testClassEdit(ctx context.Context, t *testing.T, c client.Client, p *banlieuev1.Provider) {
	// The provider owns the rest of the status; the operator's status.workload apply must leave
	// it alone.
	providerStatus := &unstructured.Unstructured{Object: map[string]any{"status": map[string]any{
		"conditions": []any{map[string]any{"type": "Ready", "status": "True", "reason": "Reconciled", "message": "ok",
			"lastTransitionTime": "2026-01-01T00:00:00Z"}},
	}}}
	providerStatus.SetGroupVersionKind(banlieuev1.GroupVersion.WithKind("Provider"))
	providerStatus.SetNamespace(p.Namespace)
	providerStatus.SetName(p.Name)
	if err := c.Status().Apply(ctx, client.ApplyConfigurationFromUnstructured(providerStatus),
		client.FieldOwner("banlieue.io/provider-libvirt"), client.ForceOwnership); err != nil {
		t.Fatal(err)
	}
	patchClass(ctx, t, c, "libvirt", func(cl *banlieuev1.ProviderClass) { cl.Spec.Image.Tag = "v0.2.0" })
	testenv.Eventually(t, timeout, "Deployment image after a tag change", func() error {
		var dep appsv1.Deployment
		if err := c.Get(ctx, client.ObjectKey{Namespace: systemNs, Name: workload}, &dep); err != nil {
			return err
		}
		ctr := dep.Spec.Template.Spec.Containers[0]
		if ctr.Image != "registry.example/banlieue:v0.2.0" || !slices.Contains(ctr.Args, "registry.example/banlieue:v0.2.0") {
			return fmt.Errorf("image %s args %q", ctr.Image, ctr.Args)
		}
		return nil
	})
	// A changed workload is announced, under its new fingerprint.
	testenv.Eventually(t, timeout, "WorkloadApplied for the new tag", func() error {
		var dep appsv1.Deployment
		if err := c.Get(ctx, client.ObjectKey{Namespace: systemNs, Name: workload}, &dep); err != nil {
			return err
		}
		return hasEvent(ctx, c, systemNs, provider, banlieuev1.ReasonWorkloadApplied,
			"(fingerprint "+dep.Annotations[banlieuev1.AnnotationWorkloadFingerprint]+")")
	})
	// Another workload status write has happened once the tag change was applied.
	testenv.Eventually(t, timeout, "provider conditions kept next to status.workload", func() error {
		var got banlieuev1.Provider
		if err := c.Get(ctx, client.ObjectKeyFromObject(p), &got); err != nil {
			return err
		}
		if got.Status.Workload == nil || meta.FindStatusCondition(got.Status.Conditions, banlieuev1.ConditionReady) == nil {
			return fmt.Errorf("status %+v", got.Status)
		}
		return nil
	})
}

func testPaused(ctx context.Context, t *testing.T, c client.Client) {
	patchClass(ctx, t, c, "libvirt", func(cl *banlieuev1.ProviderClass) { cl.Spec.Paused = true })
	testenv.Eventually(t, timeout, "ReconcileSkipped event", func() error {
		return hasEvent(ctx, c, systemNs, provider, banlieuev1.ReasonReconcileSkipped, "ProviderClass libvirt is paused")
	})
	patchClass(ctx, t, c, "libvirt", func(cl *banlieuev1.ProviderClass) { cl.Spec.Paused = false })
}

func testMissingClass(ctx context.Context, t *testing.T, c client.Client, p *banlieuev1.Provider) {
	patchProvider(ctx, t, c, p, func(p *banlieuev1.Provider) { p.Spec.ProviderClassRef.Name = "libvirt-b" })
	testenv.Eventually(t, timeout, "ProviderClassNotFound event", func() error {
		return hasEvent(ctx, c, systemNs, provider, banlieuev1.ReasonProviderClassNotFound, `"libvirt-b"`)
	})
}

// testRename: the Provider now names class libvirt-b, which appears; its workload has new names
// and the libvirt-class objects are pruned.
func testRename(ctx context.Context, t *testing.T, c client.Client, p *banlieuev1.Provider) {
	var classB banlieuev1.ProviderClass
	repoFile(t, "examples/09-providerclass-libvirt.yaml", &classB)
	classB.Name = "libvirt-b"
	if err := c.Create(ctx, &classB); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, timeout, "workload of the new class", func() error {
		return c.Get(ctx, client.ObjectKey{Namespace: systemNs, Name: workloadB}, &appsv1.Deployment{})
	})
	for _, obj := range []client.Object{
		&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: systemNs, Name: workload}},
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: systemNs, Name: workload}},
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: buildNs, Name: workload + "-import"}},
		&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: systemNs, Name: workload}},
		&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: systemNs, Name: workload + "-import"}},
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: systemNs, Name: workload}},
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: systemNs, Name: workload + "-import"}},
		&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: workload}},
	} {
		testenv.Eventually(t, timeout, fmt.Sprintf("old %T %s pruned", obj, obj.GetName()), func() error { return gone(ctx, c, obj) })
	}
	testenv.Eventually(t, timeout, "WorkloadPruned event", func() error {
		return hasEvent(ctx, c, systemNs, provider, banlieuev1.ReasonWorkloadPruned, workload)
	})
	waitClassReady(ctx, t, c, "libvirt", metav1.ConditionTrue, banlieuev1.ReasonReady, 0)
	waitClassReady(ctx, t, c, "libvirt-b", metav1.ConditionTrue, banlieuev1.ReasonReady, 1)
}

func testDelete(ctx context.Context, t *testing.T, c client.Client, p *banlieuev1.Provider) {
	if err := c.Delete(ctx, p); err != nil {
		t.Fatal(err)
	}
	for _, obj := range []client.Object{
		p,
		&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: workloadB}},
		&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: systemNs, Name: workloadB}},
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: systemNs, Name: workloadB}},
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: buildNs, Name: workloadB + "-import"}},
		&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: systemNs, Name: workloadB}},
		&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: systemNs, Name: workloadB + "-import"}},
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: systemNs, Name: workloadB}},
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: systemNs, Name: workloadB + "-import"}},
	} {
		// envtest runs no garbage collector: everything must go through the operator's cleanup.
		testenv.Eventually(t, timeout, fmt.Sprintf("%T %s deleted", obj, obj.GetName()), func() error { return gone(ctx, c, obj) })
	}
	testenv.Eventually(t, timeout, "the provider account's entry removed", func() error {
		if data, err := providerAccounts(ctx, c); err != nil || len(data) != 0 {
			return fmt.Errorf("data %v, err %v", data, err)
		}
		return nil
	})
	testenv.Eventually(t, timeout, "WorkloadDeleted event", func() error {
		return hasEvent(ctx, c, systemNs, provider, banlieuev1.ReasonWorkloadDeleted, "")
	})
	waitClassReady(ctx, t, c, "libvirt-b", metav1.ConditionTrue, banlieuev1.ReasonReady, 0)
}

func patchClass(ctx context.Context, t *testing.T, c client.Client, name string, mutate func(*banlieuev1.ProviderClass)) {
	t.Helper()
	var class banlieuev1.ProviderClass
	if err := c.Get(ctx, client.ObjectKey{Name: name}, &class); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(class.DeepCopy())
	mutate(&class)
	if err := c.Patch(ctx, &class, patch); err != nil {
		t.Fatal(err)
	}
}

func patchProvider(ctx context.Context, t *testing.T, c client.Client, p *banlieuev1.Provider, mutate func(*banlieuev1.Provider)) {
	t.Helper()
	if err := c.Get(ctx, client.ObjectKeyFromObject(p), p); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(p.DeepCopy())
	mutate(p)
	if err := c.Patch(ctx, p, patch); err != nil {
		t.Fatal(err)
	}
}
