package operator

import (
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	rbacv1ac "k8s.io/client-go/applyconfigurations/rbac/v1"

	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
	"banlieue.io/banlieue/internal/console"
)

// workload is every object of one Provider's workload, as it is applied.
type workload struct {
	serviceAccount *corev1ac.ServiceAccountApplyConfiguration
	// importAccount is the Provider's own import Job identity, in the build namespace: one per
	// Provider, so an import pod can read this Provider's credentials and no other's
	// (docs/security.md, "Import Jobs: one account per Provider, pinned at admission").
	importAccount     *corev1ac.ServiceAccountApplyConfiguration
	role              *rbacv1ac.RoleApplyConfiguration
	roleBinding       *rbacv1ac.RoleBindingApplyConfiguration
	importRole        *rbacv1ac.RoleApplyConfiguration
	importRoleBinding *rbacv1ac.RoleBindingApplyConfiguration
	// exportAccount is the Provider's export Job identity, in the build namespace, with its own
	// Role and RoleBinding in the Provider's namespace: the same reads as the import account's,
	// this Provider's and its credentials, kept apart so the two can change apart
	// (docs/adr/0157-vm-export-flattened-copy-of-a-stopped-disk.md).
	exportAccount      *corev1ac.ServiceAccountApplyConfiguration
	exportRole         *rbacv1ac.RoleApplyConfiguration
	exportRoleBinding  *rbacv1ac.RoleBindingApplyConfiguration
	buildRole          *rbacv1ac.RoleApplyConfiguration
	buildRoleBinding   *rbacv1ac.RoleBindingApplyConfiguration
	clusterRoleBinding *rbacv1ac.ClusterRoleBindingApplyConfiguration
	// userData are the user-data grants, a Role and RoleBinding per namespace (userDataObjects).
	userData []applyObject
	// service fronts the provider's console endpoint for the console relay, which finds it by
	// the Deployment's name (ADR-0140).
	service    *corev1ac.ServiceApplyConfiguration
	deployment *appsv1ac.DeploymentApplyConfiguration
}

// applyObject is what the reconciler needs of an apply configuration: to send it, and to know
// which object it is so everything else can be pruned.
type applyObject interface {
	runtime.ApplyConfiguration
	GetKind() *string
	GetName() *string
	GetNamespace() *string
}

// workloadNamespace is where the Deployment and its ServiceAccount run.
func workloadNamespace(p *banlieuev1.Provider, class *banlieuev1.ProviderClass) string {
	if class.Spec.WorkloadNamespace != "" {
		return class.Spec.WorkloadNamespace
	}
	return p.Namespace
}

// desiredWorkload builds the workload of p under class (docs/guides/libvirt-provider.md, "5. What the operator creates for it");
// userDataGrants are the user-data Secrets of p's machines, by namespace, it may read
// (userDataGrants).
func desiredWorkload(p *banlieuev1.Provider, class *banlieuev1.ProviderClass, opts Options, userDataGrants map[string][]string) workload {
	name := workloadName(class.Name, p.Namespace, p.Name)
	imp, exp, build := importName(name), ExportAccountName(name), buildName(name)
	wns := workloadNamespace(p, class)
	lbls, ann := workloadLabels(p, class), workloadAnnotations(p)
	sa := rbacv1ac.Subject().WithKind(rbacv1.ServiceAccountKind).WithName(name).WithNamespace(wns)
	return workload{
		serviceAccount: withOwner(corev1ac.ServiceAccount(name, wns).WithLabels(lbls).WithAnnotations(ann), p, wns),
		importAccount:  withOwner(corev1ac.ServiceAccount(imp, opts.BuildNamespace).WithLabels(lbls).WithAnnotations(ann), p, opts.BuildNamespace),
		role: withOwner(rbacv1ac.Role(name, p.Namespace).WithLabels(lbls).WithAnnotations(ann), p, p.Namespace).
			WithRules(policyRules(roleRules(p, class))...),
		roleBinding: withOwner(rbacv1ac.RoleBinding(name, p.Namespace).WithLabels(lbls).WithAnnotations(ann), p, p.Namespace).
			WithRoleRef(roleRef("Role", name)).
			WithSubjects(sa),
		importRole: withOwner(rbacv1ac.Role(imp, p.Namespace).WithLabels(lbls).WithAnnotations(ann), p, p.Namespace).
			WithRules(policyRules(importRoleRules(p))...),
		importRoleBinding: withOwner(rbacv1ac.RoleBinding(imp, p.Namespace).WithLabels(lbls).WithAnnotations(ann), p, p.Namespace).
			WithRoleRef(roleRef("Role", imp)).
			WithSubjects(rbacv1ac.Subject().WithKind(rbacv1.ServiceAccountKind).WithName(imp).WithNamespace(opts.BuildNamespace)),
		exportAccount: withOwner(corev1ac.ServiceAccount(exp, opts.BuildNamespace).WithLabels(lbls).WithAnnotations(ann), p, opts.BuildNamespace),
		exportRole: withOwner(rbacv1ac.Role(exp, p.Namespace).WithLabels(lbls).WithAnnotations(ann), p, p.Namespace).
			WithRules(policyRules(importRoleRules(p))...),
		exportRoleBinding: withOwner(rbacv1ac.RoleBinding(exp, p.Namespace).WithLabels(lbls).WithAnnotations(ann), p, p.Namespace).
			WithRoleRef(roleRef("Role", exp)).
			WithSubjects(rbacv1ac.Subject().WithKind(rbacv1.ServiceAccountKind).WithName(exp).WithNamespace(opts.BuildNamespace)),
		// The class's additionalRules apply where the import Jobs live. Owner references cannot
		// cross namespaces, so these are pruned and cleaned up by workloadOwner like the other
		// cross-namespace objects.
		buildRole: withOwner(rbacv1ac.Role(build, opts.BuildNamespace).WithLabels(lbls).WithAnnotations(ann), p, opts.BuildNamespace).
			WithRules(policyRules(RBACRules(class.Spec.AdditionalRules))...),
		buildRoleBinding: withOwner(rbacv1ac.RoleBinding(build, opts.BuildNamespace).WithLabels(lbls).WithAnnotations(ann), p, opts.BuildNamespace).
			WithRoleRef(roleRef("Role", build)).
			WithSubjects(sa),
		// Never owner-referenced: a namespaced owner of a cluster-scoped object is invalid and
		// the garbage collector would delete the binding at once. Cleanup removes it instead.
		clusterRoleBinding: rbacv1ac.ClusterRoleBinding(name).
			WithLabels(lbls).WithAnnotations(ann).
			WithRoleRef(roleRef("ClusterRole", providerClusterRole(class.Spec.Backend))).
			WithSubjects(sa),
		userData: userDataObjects(p, name, lbls, ann, sa, userDataGrants),
		service: withOwner(corev1ac.Service(name, wns).WithLabels(lbls).WithAnnotations(ann), p, wns).
			WithSpec(corev1ac.ServiceSpec().
				WithSelector(selectorLabels(p, class)).
				WithPorts(corev1ac.ServicePort().WithName("console").WithPort(console.ProviderPort).
					WithTargetPort(intstr.FromString("console")).WithProtocol(corev1.ProtocolTCP))),
		deployment: deployment(p, class, wns, opts),
	}
}

// objects are the workload's objects in the order docs/guides/libvirt-provider.md, "5. What the operator creates for it" applies them: identities and grants
// before the Deployment, so its pods never start without their permissions.
func (w workload) objects() []applyObject {
	objs := []applyObject{w.serviceAccount, w.importAccount, w.role, w.roleBinding, w.importRole, w.importRoleBinding,
		w.exportAccount, w.exportRole, w.exportRoleBinding, w.buildRole, w.buildRoleBinding, w.clusterRoleBinding}
	return append(append(objs, w.userData...), w.service, w.deployment)
}

// ownable is an apply configuration that takes owner references.
type ownable[T any] interface {
	WithOwnerReferences(...*metav1ac.OwnerReferenceApplyConfiguration) T
}

// withOwner makes p the controller of obj when obj lives in p's namespace; owner references
// cannot cross namespaces.
func withOwner[T ownable[T]](obj T, p *banlieuev1.Provider, namespace string) T {
	if namespace != p.Namespace {
		return obj
	}
	return obj.WithOwnerReferences(metav1ac.OwnerReference().
		WithAPIVersion(banlieuev1.GroupVersion.String()).
		WithKind("Provider").
		WithName(p.Name).
		WithUID(p.UID).
		WithController(true).
		WithBlockOwnerDeletion(true))
}

func roleRef(kind, name string) *rbacv1ac.RoleRefApplyConfiguration {
	return rbacv1ac.RoleRef().WithAPIGroup(rbacv1.GroupName).WithKind(kind).WithName(name)
}

func policyRules(rules []rbacv1.PolicyRule) []*rbacv1ac.PolicyRuleApplyConfiguration {
	out := make([]*rbacv1ac.PolicyRuleApplyConfiguration, 0, len(rules))
	for _, r := range rules {
		out = append(out, rbacv1ac.PolicyRule().
			WithAPIGroups(r.APIGroups...).
			WithResources(r.Resources...).
			WithVerbs(r.Verbs...).
			WithResourceNames(r.ResourceNames...).
			WithNonResourceURLs(r.NonResourceURLs...))
	}
	return out
}

// RBACRules are a class's additionalRules as RBAC's own type.
func RBACRules(rules []banlieuev1.PolicyRule) []rbacv1.PolicyRule {
	out := make([]rbacv1.PolicyRule, 0, len(rules))
	for _, r := range rules {
		out = append(out, rbacv1.PolicyRule{Verbs: r.Verbs, APIGroups: r.APIGroups, Resources: r.Resources,
			ResourceNames: r.ResourceNames, NonResourceURLs: r.NonResourceURLs})
	}
	return out
}
