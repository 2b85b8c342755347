// Package operator is banlieue-operator: it turns each Provider into its workload (Deployment,
// ServiceAccount, Roles, bindings) and reports ProviderClass status.
package operator

// The rules below generate config/rbac/operator/role.yaml (ClusterRole banlieue-operator). The
// operator may only grant what it holds, so it also holds every rule of the per-Provider Roles
// and of the libvirt ProviderClass's additionalRules; it binds the shipped provider ClusterRoles
// through the bind verb rather than holding their rules.
//
// +kubebuilder:rbac:groups=banlieue.io,resources=providers,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=banlieue.io,resources=providers/status;providerclasses/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=banlieue.io,resources=providers/finalizers,verbs=update
// +kubebuilder:rbac:groups=banlieue.io,resources=providerclasses,verbs=get;list;watch
// +kubebuilder:rbac:groups=apps,resources=deployments,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="",resources=serviceaccounts,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=rbac.authorization.k8s.io,resources=roles;rolebindings;clusterrolebindings,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=rbac.authorization.k8s.io,resources=clusterroles,verbs=get;list;watch;bind
// +kubebuilder:rbac:groups="",resources=secrets;configmaps,verbs=get
// +kubebuilder:rbac:groups=batch,resources=jobs,verbs=get;create;patch
// +kubebuilder:rbac:groups="";events.k8s.io,resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,verbs=get;create;update;patch
