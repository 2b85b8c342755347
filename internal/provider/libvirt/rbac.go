// Package libvirt is banlieue-provider-libvirt: the Provider, VMImage and LibvirtMachine
// controllers of the libvirt backend. It never reads VirtualMachines; it meets the controller
// only through LibvirtMachine.
package libvirt

// The rules below generate config/rbac/provider-libvirt/role.yaml, the shared ClusterRole
// banlieue-provider-libvirt the operator binds to every libvirt provider workload. It grants no
// Secrets or ConfigMaps: those come by name from the per-Provider Role.
//
// +kubebuilder:rbac:groups=banlieue.io,resources=providers,verbs=get;list;watch
// +kubebuilder:rbac:groups=banlieue.io,resources=providers/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=banlieue.io,resources=vmimages,verbs=get;list;watch
// +kubebuilder:rbac:groups=banlieue.io,resources=vmimages/status,verbs=update;patch
// +kubebuilder:rbac:groups=infrastructure.banlieue.io,resources=libvirtmachines,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=infrastructure.banlieue.io,resources=libvirtmachines/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=infrastructure.banlieue.io,resources=libvirtmachines/finalizers,verbs=update
// +kubebuilder:rbac:groups="";events.k8s.io,resources=events,verbs=create;patch
//
// A machine in another namespace than its Provider's is served only while the Provider's
// allowedNamespaces admits that namespace, read by name, uncached, on every pass.
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get
//
// A LibvirtMachine of a Cluster API Machine: the Machine (its bootstrap data Secret, failure
// domain) and its Cluster (paused), read by name, uncached (internal/capi). The Secret comes by
// name from the per-Provider Role, as the user-data Secrets do.
// +kubebuilder:rbac:groups=cluster.x-k8s.io,resources=machines;clusters,verbs=get
// +kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,verbs=get;create;update;patch
//
// /metrics checks each caller's token and its right to get /metrics (internal/app/metrics_server.go).
// +kubebuilder:rbac:groups=authentication.k8s.io,resources=tokenreviews,verbs=create
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create
