// Package vsphere is banlieue-provider-vsphere's Kubernetes side: the VSphereMachine reconciler
// and the pure decisions it takes, over a Backend that speaks to vCenter. It never reads
// VirtualMachines (it meets the controller only through VSphereMachine) and never imports the
// vSphere SDK itself: the Backend is the seam (docs/guides/vsphere-provider.md).
package vsphere

// The rules below generate config/rbac/provider-vsphere/role.yaml, the shared ClusterRole
// banlieue-provider-vsphere the operator binds to every vsphere provider workload. It grants no
// Secrets or ConfigMaps: the vCenter credentials, the CA and the per-machine user-data Secrets
// come by name from the per-Provider Role, as for libvirt, and so do the bootstrap data Secrets
// of Cluster API Machines. No LibvirtMachine, no Job: the vsphere provider serves no image
// imports.
//
// +kubebuilder:rbac:groups=banlieue.io,resources=providers,verbs=get;list;watch
// +kubebuilder:rbac:groups=banlieue.io,resources=providers/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=banlieue.io,resources=vmimages,verbs=get;list;watch
// +kubebuilder:rbac:groups=banlieue.io,resources=vmimages/status,verbs=update;patch
// +kubebuilder:rbac:groups=infrastructure.banlieue.io,resources=vspheremachines,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=infrastructure.banlieue.io,resources=vspheremachines/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=infrastructure.banlieue.io,resources=vspheremachines/finalizers,verbs=update
// +kubebuilder:rbac:groups="";events.k8s.io,resources=events,verbs=create;patch
//
// A VSphereMachine of a Cluster API Machine reads that Machine (its bootstrap data Secret's name,
// failure domain, cluster) and its Cluster (spec.paused) by name (machine_capi.go).
// +kubebuilder:rbac:groups=cluster.x-k8s.io,resources=machines;clusters,verbs=get
//
// A machine in another namespace than its Provider's is served only while the Provider's
// allowedNamespaces admits that namespace, read by name, uncached, on every pass.
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get
// +kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,verbs=get;create;update;patch
//
// /metrics checks each caller's token and its right to get /metrics (internal/app/metrics_server.go).
// +kubebuilder:rbac:groups=authentication.k8s.io,resources=tokenreviews,verbs=create
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create
