// Package operator is banlieue-operator: it turns each Provider into its workload (Deployment,
// ServiceAccount, Roles, bindings) and reports ProviderClass status.
package operator

// The rules below generate config/rbac/operator/role.yaml (ClusterRole banlieue-operator), and
// are exactly what the operator uses. The API server lets a subject create a Role or RoleBinding
// only with permissions it holds itself, so the operator also holds every rule it grants: the
// per-Provider Role (secrets and configmaps get, leases, events), the import Role (providers get)
// and the libvirt ProviderClass's additionalRules (jobs). Holding them is narrower than the
// escalate verb, which would let it grant anything. The shipped provider ClusterRoles are bound
// through bind, restricted by name: bind on every ClusterRole would let it bind cluster-admin.
// A new backend adds its ClusterRole's name here.
//
// Provider: watched (list/watch), finalizer (patch); status.workload (status patch). The
// finalizers subresource is needed where OwnerReferencesPermissionEnforcement is on, because
// workload objects set blockOwnerDeletion on their Provider.
// +kubebuilder:rbac:groups=banlieue.io,resources=providers,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=banlieue.io,resources=providers/status;providerclasses/status,verbs=patch
// +kubebuilder:rbac:groups=banlieue.io,resources=providers/finalizers,verbs=update
// +kubebuilder:rbac:groups=banlieue.io,resources=providerclasses,verbs=get;list;watch
//
// Workload objects: applied (create for the first apply, patch after), listed by label across
// namespaces for pruning and deleted. Only Deployments are watched.
// +kubebuilder:rbac:groups=apps,resources=deployments,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups="",resources=serviceaccounts,verbs=list;create;patch;delete
// +kubebuilder:rbac:groups="",resources=services,verbs=list;create;patch;delete
// +kubebuilder:rbac:groups=rbac.authorization.k8s.io,resources=roles;rolebindings;clusterrolebindings,verbs=list;create;patch;delete
// +kubebuilder:rbac:groups=rbac.authorization.k8s.io,resources=clusterroles,verbs=get;list;watch
// +kubebuilder:rbac:groups=rbac.authorization.k8s.io,resources=clusterroles,verbs=bind,resourceNames=banlieue-provider-libvirt;banlieue-provider-vsphere
//
// LibvirtMachines and VSphereMachines are watched only to list, by name, the user-data Secrets
// each provider's grants give it (userdata.go, vsphere.go); the operator never writes them.
// +kubebuilder:rbac:groups=infrastructure.banlieue.io,resources=libvirtmachines;vspheremachines,verbs=get;list;watch
//
// A machine's user-data Secret is granted in the machine's namespace, so the Roles and
// RoleBindings above are written in tenant namespaces too; a namespace other than the
// Provider's is granted only while its allowedNamespaces admits it, which the operator decides
// from the Namespace's labels, read by name (get only: nothing is watched or cached).
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get
// The Cluster API Machine of a LibvirtMachine names its bootstrap data Secret (bootstrap.go).
// +kubebuilder:rbac:groups=cluster.x-k8s.io,resources=machines,verbs=get
//
// Held to be granted (see above); the operator itself reads no Secret, ConfigMap or Job. The
// additionalRules are granted only in the build namespace (buildName), so the Jobs are held only
// there, as a Role: held cluster-wide, they would let a compromised operator run a pod as any
// ServiceAccount of any namespace.
// +kubebuilder:rbac:groups="",resources=secrets;configmaps,verbs=get
// +kubebuilder:rbac:groups=batch,namespace=banlieue-imagebuild,resources=jobs,verbs=get;list;watch;create;patch;delete
//
// The provider accounts' admission params (provideraccounts.go), a Role in the build namespace: create cannot be
// restricted by name, patch is, to that one ConfigMap.
// +kubebuilder:rbac:groups="",namespace=banlieue-imagebuild,resources=configmaps,verbs=create
// +kubebuilder:rbac:groups="",namespace=banlieue-imagebuild,resources=configmaps,verbs=patch,resourceNames=banlieue-provider-accounts
//
// Its own events and leader lease, also granted to each provider.
// +kubebuilder:rbac:groups="";events.k8s.io,resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,verbs=get;create;update;patch
//
// /metrics checks each caller's token and its right to get /metrics (internal/app/metrics_server.go).
// +kubebuilder:rbac:groups=authentication.k8s.io,resources=tokenreviews,verbs=create
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create
