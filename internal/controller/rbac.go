// Package controller is banlieue-controller: it schedules VirtualMachines, builds their
// infrastructure machines, mirrors their status and runs pools and claims. It never talks to a
// hypervisor and never imports pkg/libvirt.
package controller

// The rules below generate config/rbac/controller/role.yaml (ClusterRole banlieue-controller).
// Secrets and ConfigMaps are read for VirtualMachine userData only, by name (never listed or
// watched). Secrets are also created, patched (server-side apply) and deleted: the per-machine
// user-data Secrets (internal/userdata), never a user's. Providers are patched only to add and
// remove the banlieue.io/provider-in-use finalizer, and their status only for status.drain.
//
// +kubebuilder:rbac:groups=banlieue.io,resources=virtualmachines;virtualmachinepools;virtualmachineclaims,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=banlieue.io,resources=virtualmachines/status;virtualmachinepools/status;virtualmachineclaims/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=banlieue.io,resources=virtualmachines/finalizers;virtualmachinepools/finalizers;virtualmachineclaims/finalizers,verbs=update
// +kubebuilder:rbac:groups=banlieue.io,resources=vmimages;vmclasses;providers,verbs=get;list;watch
// VirtualMachineMigrations are read, their finalizer patched and their status written; the
// controller never creates them (users do). LibvirtMachines' spec.migration is patched with the rest.
// +kubebuilder:rbac:groups=banlieue.io,resources=virtualmachinemigrations,verbs=get;list;watch;create;update;patch
// +kubebuilder:rbac:groups=banlieue.io,resources=virtualmachinemigrations/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=banlieue.io,resources=virtualmachinemigrations/finalizers,verbs=update
// VirtualMachineSnapshots and VirtualMachineRestores likewise: read, their finalizer and owner
// reference (the VM) patched, their status written; never created. LibvirtMachines'
// spec.snapshots and spec.restore are patched with the rest.
// +kubebuilder:rbac:groups=banlieue.io,resources=virtualmachinesnapshots;virtualmachinerestores,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=banlieue.io,resources=virtualmachinesnapshots/status;virtualmachinerestores/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=banlieue.io,resources=virtualmachinesnapshots/finalizers;virtualmachinerestores/finalizers,verbs=update
// +kubebuilder:rbac:groups=banlieue.io,resources=providers,verbs=update;patch
// +kubebuilder:rbac:groups=banlieue.io,resources=providers/finalizers,verbs=update
// +kubebuilder:rbac:groups=banlieue.io,resources=vmimages/status;providers/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=infrastructure.banlieue.io,resources=libvirtmachines,verbs=get;list;watch;create;update;patch;delete
// The vsphere kind (vsphere_machine.go): built and deleted like a LibvirtMachine; its status is
// the vsphere provider's alone.
// +kubebuilder:rbac:groups=infrastructure.banlieue.io,resources=vspheremachines,verbs=get;list;watch;create;update;patch;delete
// The LibvirtCluster, Cluster API's InfraCluster (libvirt_cluster.go), and its Cluster (paused).
// +kubebuilder:rbac:groups=infrastructure.banlieue.io,resources=libvirtclusters,verbs=get;list;watch
// +kubebuilder:rbac:groups=infrastructure.banlieue.io,resources=libvirtclusters/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=cluster.x-k8s.io,resources=clusters,verbs=get
// A Cluster API machine without providerRef is placed in its Machine's failure domain
// (capi_placement.go): its Machine read by name, its Scheduled condition written.
// +kubebuilder:rbac:groups=cluster.x-k8s.io,resources=machines,verbs=get
// +kubebuilder:rbac:groups=infrastructure.banlieue.io,resources=libvirtmachines/status,verbs=get;update;patch
// +kubebuilder:rbac:groups="",resources=configmaps,verbs=get
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;create;patch;delete
//
// Namespaces are read for their labels, which shared Providers' allowedNamespaces select on.
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;list;watch
// +kubebuilder:rbac:groups="";events.k8s.io,resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,verbs=get;create;update;patch
//
// /metrics checks each caller's token and its right to get /metrics (internal/app/metrics_server.go).
// +kubebuilder:rbac:groups=authentication.k8s.io,resources=tokenreviews,verbs=create
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create
