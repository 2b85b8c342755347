package install

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	batchv1 "k8s.io/api/batch/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
	"banlieue.io/banlieue/internal/testenv"
)

// checkRoleBoundaries impersonates the three roles' ServiceAccounts, installed in rolesNS (by
// config/default in banlieue-system, or by the chart in its release namespace), and checks that
// each holds what it needs and nothing more. It creates the tenant namespaces it probes.
func checkRoleBoundaries(t *testing.T, c *cluster, rolesNS string) {
	t.Helper()
	ctx := context.Background()

	// Leader election: each role's Lease lives in its own namespace (--leader-election-namespace
	// is the pod's namespace).
	t.Run("leases in the roles' namespace", func(t *testing.T) {
		for _, role := range roles {
			lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "banlieue-" + role, Namespace: rolesNS}}
			testenv.Allowed(t, "banlieue-"+role+" creates its Lease in "+rolesNS, c.as(t, rolesNS, "banlieue-"+role).Create(ctx, lease, client.DryRunAll))
		}
	})

	t.Run("service accounts and bindings", func(t *testing.T) {
		sas := map[string]string{}
		for _, role := range roles {
			sas["banlieue-"+role] = rolesNS
		}
		for name, ns := range sas {
			var sa corev1.ServiceAccount
			testenv.Allowed(t, "ServiceAccount "+ns+"/"+name, c.admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &sa))
		}
		for _, role := range roles {
			var crb rbacv1.ClusterRoleBinding
			if err := c.admin.Get(ctx, client.ObjectKey{Name: "banlieue-" + role}, &crb); err != nil {
				t.Errorf("ClusterRoleBinding banlieue-%s: %v", role, err)
				continue
			}
			wantRef := rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "banlieue-" + role}
			wantSubjects := []rbacv1.Subject{{Kind: "ServiceAccount", Name: "banlieue-" + role, Namespace: rolesNS}}
			if crb.RoleRef != wantRef || !slices.Equal(crb.Subjects, wantSubjects) {
				t.Errorf("ClusterRoleBinding banlieue-%s: roleRef %+v subjects %+v", role, crb.RoleRef, crb.Subjects)
			}
		}
		// The shared provider ClusterRole is installed but bound only by the operator, per
		// Provider; and nothing installed grants an account of the build namespace, where only the
		// operator's per-Provider import accounts live.
		var providerRole rbacv1.ClusterRole
		testenv.Allowed(t, "ClusterRole banlieue-provider-libvirt", c.admin.Get(ctx, client.ObjectKey{Name: "banlieue-provider-libvirt"}, &providerRole))
		testenv.Allowed(t, "ClusterRole banlieue-provider-vsphere", c.admin.Get(ctx, client.ObjectKey{Name: "banlieue-provider-vsphere"}, &rbacv1.ClusterRole{}))
		var crbs rbacv1.ClusterRoleBindingList
		if err := c.admin.List(ctx, &crbs); err != nil {
			t.Fatal(err)
		}
		var rbs rbacv1.RoleBindingList
		if err := c.admin.List(ctx, &rbs); err != nil {
			t.Fatal(err)
		}
		check := func(kind, name string, ref rbacv1.RoleRef, subjects []rbacv1.Subject) {
			if ref.Name == "banlieue-provider-libvirt" || ref.Name == "banlieue-provider-vsphere" {
				t.Errorf("%s %s binds %s; only the operator may", kind, name, ref.Name)
			}
			for _, s := range subjects {
				if s.Kind == "ServiceAccount" && s.Namespace == buildNS {
					t.Errorf("%s %s grants %s/%s; only the operator's per-Provider RoleBinding may", kind, name, s.Namespace, s.Name)
				}
			}
		}
		for _, b := range crbs.Items {
			check("ClusterRoleBinding", b.Name, b.RoleRef, b.Subjects)
		}
		for _, b := range rbs.Items {
			check("RoleBinding", b.Namespace+"/"+b.Name, b.RoleRef, b.Subjects)
		}
	})

	// Every role's /metrics reviews its callers (internal/app/metrics_server.go): each role may
	// create the two reviews, and banlieue-metrics-reader is the one rule a scraper needs.
	t.Run("metrics reviews and reader", func(t *testing.T) {
		for _, role := range roles {
			as := c.as(t, rolesNS, "banlieue-"+role)
			testenv.Allowed(t, "banlieue-"+role+" creates a TokenReview", as.Create(ctx,
				&authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: "not-a-token"}}))
			testenv.Allowed(t, "banlieue-"+role+" creates a SubjectAccessReview", as.Create(ctx,
				&authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{User: "someone",
					NonResourceAttributes: &authorizationv1.NonResourceAttributes{Path: "/metrics", Verb: "get"}}}))
		}
		// The provider's ClusterRole is bound only by the operator, per Provider: read its rules.
		var providerRole rbacv1.ClusterRole
		if err := c.admin.Get(ctx, client.ObjectKey{Name: "banlieue-provider-libvirt"}, &providerRole); err != nil {
			t.Fatal(err)
		}
		for _, want := range []rbacv1.PolicyRule{
			{APIGroups: []string{"authentication.k8s.io"}, Resources: []string{"tokenreviews"}, Verbs: []string{"create"}},
			{APIGroups: []string{"authorization.k8s.io"}, Resources: []string{"subjectaccessreviews"}, Verbs: []string{"create"}},
		} {
			if !slices.ContainsFunc(providerRole.Rules, func(r rbacv1.PolicyRule) bool { return equality.Semantic.DeepEqual(r, want) }) {
				t.Errorf("ClusterRole banlieue-provider-libvirt lacks %v", want)
			}
		}
		var reader rbacv1.ClusterRole
		if err := c.admin.Get(ctx, client.ObjectKey{Name: "banlieue-metrics-reader"}, &reader); err != nil {
			t.Fatalf("ClusterRole banlieue-metrics-reader: %v", err)
		}
		wantRules := []rbacv1.PolicyRule{{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}}}
		if !equality.Semantic.DeepEqual(reader.Rules, wantRules) {
			t.Errorf("ClusterRole banlieue-metrics-reader rules %+v, want %+v", reader.Rules, wantRules)
		}
	})

	// Every role records events (ADR-0106) about objects in any namespace: VMs and machines in
	// tenant namespaces, cluster-scoped VMImages in default. The events library creates, then
	// patches a series, through either API group.
	t.Run("events from every role", func(t *testing.T) {
		const tenant = "tenant-events"
		if err := c.admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: tenant}}); err != nil {
			t.Fatal(err)
		}
		for _, ns := range []string{tenant, metav1.NamespaceDefault} {
			seed := &eventsv1.Event{ObjectMeta: metav1.ObjectMeta{Name: "install-probe", Namespace: ns},
				EventTime: metav1.NowMicro(), ReportingController: "banlieue-test", ReportingInstance: "install",
				Action: "Probe", Reason: "Probe", Type: corev1.EventTypeNormal,
				Regarding: corev1.ObjectReference{Kind: "ConfigMap", Namespace: ns, Name: "probe"}}
			if err := c.admin.Create(ctx, seed); err != nil && !apierrors.IsAlreadyExists(err) {
				t.Fatal(err)
			}
			for _, role := range roles {
				as := c.as(t, rolesNS, "banlieue-"+role)
				ev := seed.DeepCopy()
				ev.Name, ev.ResourceVersion, ev.UID = "install-probe-"+role, "", ""
				testenv.Allowed(t, "banlieue-"+role+" creates an events.k8s.io Event in "+ns, as.Create(ctx, ev, client.DryRunAll))
				testenv.Allowed(t, "banlieue-"+role+" creates a core Event in "+ns, as.Create(ctx, &corev1.Event{
					ObjectMeta:     metav1.ObjectMeta{Name: "install-probe-core-" + role, Namespace: ns},
					InvolvedObject: corev1.ObjectReference{Kind: "ConfigMap", Namespace: ns, Name: "probe"}, Reason: "Probe", Type: corev1.EventTypeNormal,
				}, client.DryRunAll))
				testenv.Allowed(t, "banlieue-"+role+" patches an Event's series in "+ns, as.Patch(ctx, seed.DeepCopy(),
					client.RawPatch(types.MergePatchType, []byte(`{"series":{"count":2,"lastObservedTime":"2026-12-01T00:00:00.000000Z"}}`)), client.DryRunAll))
			}
		}
		var providerRole rbacv1.ClusterRole
		if err := c.admin.Get(ctx, client.ObjectKey{Name: "banlieue-provider-libvirt"}, &providerRole); err != nil {
			t.Fatal(err)
		}
		want := rbacv1.PolicyRule{APIGroups: []string{"", "events.k8s.io"}, Resources: []string{"events"}, Verbs: []string{"create", "patch"}}
		if !slices.ContainsFunc(providerRole.Rules, func(r rbacv1.PolicyRule) bool { return equality.Semantic.DeepEqual(r, want) }) {
			t.Errorf("ClusterRole banlieue-provider-libvirt lacks %v", want)
		}
	})

	if err := c.admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: tenantNS}}); err != nil {
		t.Fatal(err)
	}

	t.Run("controller RBAC", func(t *testing.T) {
		ctrl := c.as(t, rolesNS, "banlieue-controller")
		testenv.Allowed(t, "controller lists VirtualMachines", ctrl.List(ctx, &banlieuev1.VirtualMachineList{}))
		machine := libvirtMachine(t)
		testenv.Allowed(t, "controller creates a LibvirtMachine", ctrl.Create(ctx, machine))
		testenv.Forbidden(t, "controller creates a Deployment", ctrl.Create(ctx, deployment(tenantNS), client.DryRunAll))
		testenv.Forbidden(t, "controller lists Secrets", ctrl.List(ctx, &corev1.SecretList{}))
		testenv.Forbidden(t, "controller lists Secrets in a namespace", ctrl.List(ctx, &corev1.SecretList{}, client.InNamespace(tenantNS)))
		// The per-machine user-data copies (ADR-0095), as banlieue-controller-secrets admits
		// them: applied, read by name and deleted.
		userData := func(name string) *corev1ac.SecretApplyConfiguration {
			return corev1ac.Secret(name, tenantNS).
				WithLabels(map[string]string{banlieuev1.LabelUserData: "machine", banlieuev1.LabelManagedBy: "banlieue-controller"}).
				WithOwnerReferences(metav1ac.OwnerReference().WithAPIVersion("infrastructure.banlieue.io/v1alpha1").
					WithKind("LibvirtMachine").WithName(machine.GetName()).WithUID(machine.GetUID()).WithController(true)).
				WithType(corev1.SecretTypeOpaque).
				WithData(map[string][]byte{"user-data": []byte("#cloud-config\n")})
		}
		testenv.Allowed(t, "controller applies a user-data Secret", ctrl.Apply(ctx, userData("userdata-probe"), client.FieldOwner("banlieue.io/controller"), client.ForceOwnership))
		testenv.Allowed(t, "controller gets a user-data Secret", ctrl.Get(ctx, client.ObjectKey{Namespace: tenantNS, Name: "userdata-probe"}, &corev1.Secret{}))
		testenv.Allowed(t, "controller deletes a user-data Secret", ctrl.Delete(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: tenantNS, Name: "userdata-probe"}}))
		// Any other Secret is refused at admission (the policy is installed and bound).
		testenv.Forbidden(t, "controller applies an unlabelled Secret", ctrl.Apply(ctx, corev1ac.Secret("userdata-bare", tenantNS).
			WithData(map[string][]byte{"k": []byte("v")}), client.FieldOwner("banlieue.io/controller"), client.ForceOwnership))
		// A user's Secret under a per-machine name: neither deleted nor taken over.
		if err := c.admin.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "userdata-theirs", Namespace: tenantNS}}); err != nil {
			t.Fatal(err)
		}
		testenv.Forbidden(t, "controller deletes a Secret not its own", ctrl.Delete(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: tenantNS, Name: "userdata-theirs"}}))
		testenv.Forbidden(t, "controller takes a Secret over", ctrl.Apply(ctx, userData("userdata-theirs"), client.FieldOwner("banlieue.io/controller"), client.ForceOwnership))
		// The controller owns (controller, blockOwnerDeletion) what it creates: LibvirtMachines
		// of VirtualMachines, and the VirtualMachines of a pool.
		vm := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "banlieue.io/v1alpha1", "kind": "VirtualMachine",
			"metadata": map[string]any{"name": "vm", "namespace": tenantNS},
			"spec":     map[string]any{"classRef": map[string]any{"name": "cls"}, "imageRef": map[string]any{"name": "img"}},
		}}
		if err := c.admin.Create(ctx, vm); err != nil {
			t.Fatal(err)
		}
		lm := libvirtMachine(t)
		lm.SetName("owned")
		lm.SetOwnerReferences([]metav1.OwnerReference{ownerRef("VirtualMachine", vm)})
		testenv.Allowed(t, "controller creates a LibvirtMachine owned by a VirtualMachine", createOwned(ctx, t, ctrl, lm))
		// The vsphere kind the same way; its status is the vsphere provider's alone.
		vsm := vsphereMachine(t)
		vsm.SetOwnerReferences([]metav1.OwnerReference{ownerRef("VirtualMachine", vm)})
		testenv.Allowed(t, "controller creates a VSphereMachine owned by a VirtualMachine", createOwned(ctx, t, ctrl, vsm))
		for _, p := range []struct{ sub, verb string }{{"status", "update"}, {"status", "patch"}} {
			if selfCan(ctx, t, ctrl, tenantNS, "infrastructure.banlieue.io", "vspheremachines", p.sub, p.verb) {
				t.Errorf("controller may %s vspheremachines/%s, want denied: the provider writes it", p.verb, p.sub)
			}
		}
		pool := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "banlieue.io/v1alpha1", "kind": "VirtualMachinePool",
			"metadata": map[string]any{"name": "pool", "namespace": tenantNS},
			"spec": map[string]any{"warmReplicas": int64(1), "maxReplicas": int64(3), "readiness": "InfrastructureReady",
				"template": map[string]any{"spec": map[string]any{"classRef": map[string]any{"name": "cls"}, "imageRef": map[string]any{"name": "img"}}}},
		}}
		if err := c.admin.Create(ctx, pool); err != nil {
			t.Fatal(err)
		}
		member := vm.DeepCopy()
		member.SetName("pool-member")
		member.SetResourceVersion("")
		member.SetUID("")
		member.SetOwnerReferences([]metav1.OwnerReference{ownerRef("VirtualMachinePool", pool)})
		testenv.Allowed(t, "controller creates a VirtualMachine owned by a pool", createOwned(ctx, t, ctrl, member))
	})

	t.Run("operator RBAC", func(t *testing.T) {
		op := c.as(t, rolesNS, "banlieue-operator")
		p := provider(t, ctx, c)
		// The operator's params for the Provider's account, as it writes them before the
		// Deployment (the install ships them empty: restored below).
		setProviderAccounts(ctx, t, c, map[string]string{
			tenantNS + "." + providerAccount + ".image": image, tenantNS + "." + providerAccount + ".provider": tenantNS + "/" + p.Name})
		// The API server reads a policy's params through an informer: a loaded machine admits
		// with the old (empty) params for a moment after the update, as the operator's retry
		// absorbs in a real install. A dry run shows when the new ones are in force.
		testenv.Eventually(t, 30*time.Second, "the provider accounts' params in force", func() error {
			return op.Create(ctx, providerDeployment(tenantNS), client.DryRunAll)
		})
		testenv.Allowed(t, "operator creates a provider Deployment in a Provider namespace", op.Create(ctx, providerDeployment(tenantNS)))
		checkOperatorAdmission(ctx, t, c, op)
		setProviderAccounts(ctx, t, c, nil)
		// The shared provider ClusterRole is bindable (bind, by name); cluster-admin is not.
		testenv.Allowed(t, "operator binds banlieue-provider-libvirt",
			op.Create(ctx, clusterRoleBinding("banlieue-provider-libvirt"), client.DryRunAll))
		testenv.Allowed(t, "operator binds banlieue-provider-vsphere",
			op.Create(ctx, clusterRoleBinding("banlieue-provider-vsphere"), client.DryRunAll))
		testenv.Forbidden(t, "operator binds cluster-admin", op.Create(ctx, clusterRoleBinding("cluster-admin"), client.DryRunAll))
		// The per-Provider Roles pass the API server's escalation check: the one in the
		// Provider's namespace, and the build one carrying examples/09's additionalRules.
		testenv.Allowed(t, "operator creates a per-Provider Role", op.Create(ctx, providerRole(), client.DryRunAll))
		testenv.Allowed(t, "operator creates the build Role in "+buildNS, op.Create(ctx, buildRole(t), client.DryRunAll))
		// A shared Provider's machines' user-data Secrets are granted in each machine's namespace,
		// which the operator decides from that Namespace's labels, read by name.
		testenv.Allowed(t, "operator creates a user-data grant Role in a machine's namespace", op.Create(ctx, userDataRole(), client.DryRunAll))
		testenv.Allowed(t, "operator gets a Namespace", op.Get(ctx, client.ObjectKey{Name: tenantNS}, &corev1.Namespace{}))
		testenv.Forbidden(t, "operator lists Namespaces", op.List(ctx, &corev1.NamespaceList{}))
		// Its workload objects set blockOwnerDeletion on their Provider.
		owned := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: providerAccount + "-owned", Namespace: tenantNS,
			Labels: operatorLabels(), OwnerReferences: []metav1.OwnerReference{ownerRef("Provider", p)}}}
		testenv.Allowed(t, "operator creates a ServiceAccount owned by a Provider", createOwned(ctx, t, op, owned))
		testenv.Forbidden(t, "operator lists Secrets", op.List(ctx, &corev1.SecretList{}, client.InNamespace(tenantNS)))
		// It holds the Job rights it grants only where it grants them: cluster-wide they would
		// let it run a pod as any ServiceAccount of any namespace.
		testenv.Forbidden(t, "operator creates a Job in "+tenantNS, op.Create(ctx, job(tenantNS), client.DryRunAll))
		testenv.Forbidden(t, "operator lists Jobs cluster-wide", op.List(ctx, &batchv1.JobList{}))
		testenv.Allowed(t, "operator lists Jobs in "+buildNS, op.List(ctx, &batchv1.JobList{}, client.InNamespace(buildNS)))
	})

	t.Run("imagebuilder RBAC", func(t *testing.T) {
		ib := c.as(t, rolesNS, "banlieue-imagebuilder")
		testenv.Allowed(t, "imagebuilder creates a Job in "+buildNS, ib.Create(ctx, job(buildNS)))
		// Its Job and pod rights are a Role in the build namespace: cluster-wide, a compromised
		// imagebuilder could run a pod as any ServiceAccount of any namespace.
		testenv.Forbidden(t, "imagebuilder creates a Job in "+tenantNS, ib.Create(ctx, job(tenantNS), client.DryRunAll))
		testenv.Forbidden(t, "imagebuilder lists Jobs cluster-wide", ib.List(ctx, &batchv1.JobList{}))
		testenv.Allowed(t, "imagebuilder lists pods in "+buildNS, ib.List(ctx, &corev1.PodList{}, client.InNamespace(buildNS)))
		testenv.Forbidden(t, "imagebuilder lists pods in "+tenantNS, ib.List(ctx, &corev1.PodList{}, client.InNamespace(tenantNS)))
		testenv.Forbidden(t, "imagebuilder creates a Deployment", ib.Create(ctx, deployment(buildNS), client.DryRunAll))
		// Build Secrets: written (server-side apply) in the build namespace only, never read.
		buildSecret := func(ns string) *corev1ac.SecretApplyConfiguration {
			return corev1ac.Secret("build-x", ns).WithData(map[string][]byte{"from": []byte("https://example.org/x.raw")})
		}
		testenv.Allowed(t, "imagebuilder applies a build Secret in "+buildNS,
			ib.Apply(ctx, buildSecret(buildNS), client.FieldOwner("banlieue-imagebuilder"), client.ForceOwnership))
		testenv.Forbidden(t, "imagebuilder applies a Secret in "+tenantNS,
			ib.Apply(ctx, buildSecret(tenantNS), client.FieldOwner("banlieue-imagebuilder"), client.ForceOwnership))
		testenv.Forbidden(t, "imagebuilder gets a Secret in "+buildNS, ib.Get(ctx, client.ObjectKey{Namespace: buildNS, Name: "build-x"}, &corev1.Secret{}))
		testenv.Forbidden(t, "imagebuilder lists Secrets in "+buildNS, ib.List(ctx, &corev1.SecretList{}, client.InNamespace(buildNS)))
		testenv.Forbidden(t, "imagebuilder lists Secrets cluster-wide", ib.List(ctx, &corev1.SecretList{}))
	})

}

// createOwned dry-runs the creation of obj, whose owner reference sets blockOwnerDeletion, as c.
// The API server's owner-reference admission maps the owner's kind through its own discovery,
// which learns a CRD the install created a moment ago somewhat later than the CRD serves
// ("cannot find RESTMapping"): that refusal is waited out, any other is the answer.
func createOwned(ctx context.Context, t *testing.T, c client.Client, obj client.Object) error {
	t.Helper()
	var err error
	testenv.Eventually(t, 30*time.Second, "the API server's admission maps the owner's kind", func() error {
		err = c.Create(ctx, obj.DeepCopyObject().(client.Object), client.DryRunAll)
		if err != nil && strings.Contains(err.Error(), "cannot find RESTMapping") {
			return err
		}
		return nil
	})
	return err
}
