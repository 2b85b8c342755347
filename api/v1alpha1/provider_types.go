package v1alpha1

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ProviderSpec registers one hypervisor host (or endpoint) with banlieue.
// +kubebuilder:validation:XValidation:rule="!has(self.drain) || (has(self.unschedulable) && self.unschedulable)",message="spec.drain needs spec.unschedulable: true (a Provider being drained is cordoned, or the VMs it moves away could be placed back on it)"
type ProviderSpec struct {
	// providerClassRef names the ProviderClass (for this backend: libvirt).
	ProviderClassRef LocalObjectReference `json:"providerClassRef"`
	// connection says how the provider reaches the host.
	Connection ProviderConnection `json:"connection"`
	// capabilities are what the administrator asserts the host offers. The provider narrows them
	// to what it finds on the host and publishes the result as status.failureDomains.
	// +optional
	Capabilities ProviderCapabilities `json:"capabilities,omitempty"`
	// paused stops reconciling this Provider until it is cleared.
	// +optional
	Paused bool `json:"paused,omitempty"`
	// allowedNamespaces are the namespaces whose VirtualMachines may be placed on this Provider
	// (docs/guides/libvirt-provider.md, "Share a host between namespaces"). Unset, only the
	// Provider's own namespace may. The credentials Secret stays in the Provider's namespace
	// either way.
	// +optional
	AllowedNamespaces *AllowedNamespaces `json:"allowedNamespaces,omitempty"`
	// unschedulable cordons the Provider: no new VM is placed on it, while the VMs already
	// placed there stay and are reconciled as before (docs/guides/libvirt-provider.md,
	// "Capacity and maintenance"). kubectl banlieue cordon and uncordon set and clear it.
	// +optional
	Unschedulable bool `json:"unschedulable,omitempty"`
	// overcommit is how far the scheduler may place VMs past the host's size. Unset, the
	// defaults of each field hold.
	// +optional
	Overcommit *ProviderOvercommit `json:"overcommit,omitempty"`
	// drain moves the VMs placed on this cordoned Provider to other hosts, each as its
	// migrationPolicy allows, and reports progress in status.drain
	// (docs/guides/libvirt-provider.md, "Capacity and maintenance"). kubectl banlieue drain
	// sets it with unschedulable; uncordon clears both.
	// +optional
	Drain *ProviderDrain `json:"drain,omitempty"`
}

// ProviderDrain asks for a Provider's VMs to be moved away.
type ProviderDrain struct {
	// maxConcurrent is how many VMs are moved at once. Unset: 1.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=32
	MaxConcurrent *int32 `json:"maxConcurrent,omitempty"`
}

// Phases of a drain (ProviderDrainStatus.Phase).
const (
	// DrainDraining: VMs are being moved, or wait for a slot.
	DrainDraining = "Draining"
	// DrainBlocked: every VM left on the Provider is listed in blocked; the drain waits.
	DrainBlocked = "Blocked"
	// DrainDrained: no VM is placed on the Provider any more.
	DrainDrained = "Drained"
)

// Events of a drain, on its Provider.
const (
	// ReasonDrainStarted: the controller first saw spec.drain.
	ReasonDrainStarted = "DrainStarted"
	// ReasonDrainMoving: the drain started moving a VM.
	ReasonDrainMoving = "DrainMoving"
	// ReasonDrainBlocked: the drain found a VM it cannot move (a Warning).
	ReasonDrainBlocked = "DrainBlocked"
	// ReasonDrainCompleted: no VM is left on the drained Provider.
	ReasonDrainCompleted = "DrainCompleted"
)

// Reasons a drain lists a VM it cannot move (DrainVM.Reason).
const (
	// ReasonDrainMigrationNever: the VM's migrationPolicy is never (or unset); banlieue does
	// not carry a VM's disk to another host, so moving it would lose its data.
	ReasonDrainMigrationNever = "MigrationPolicyNever"
	// ReasonDrainLiveMigrationFailed: the VirtualMachineMigration the drain created for a live
	// or liveOrRecreate VM ended Failed or Cancelled; the VM stays where it is. Deleting that
	// migration lets the drain create another.
	ReasonDrainLiveMigrationFailed = "LiveMigrationFailed"
	// ReasonDrainAwaitingApproval: migrationPolicy manual, and the VM is not annotated
	// banlieue.io/migrate=true.
	ReasonDrainAwaitingApproval = "AwaitingApproval"
	// ReasonDrainPaused: the VM is paused (spec.paused); nothing reconciles it.
	ReasonDrainPaused = "Paused"
	// ReasonDrainNoHostFits: no other Provider can hold the VM; the drain tries it again
	// five minutes later.
	ReasonDrainNoHostFits = ReasonNoHostFits
)

// How the drain moves a VM it lists in status.drain.moving (DrainVM.Reason; unset: recreated
// from its image, as migrationPolicy recreate says).
const (
	// ReasonDrainMovingLive: the drain moves the VM live with the VirtualMachineMigration its
	// message names (migrationPolicy live or liveOrRecreate).
	ReasonDrainMovingLive = "LiveMigration"
	// ReasonDrainLiveImpossible: a liveOrRecreate VM the drain recreates from its image because
	// its live migration was refused as impossible (the VM is not running, or its Provider's
	// class cannot move machines live); the message says which.
	ReasonDrainLiveImpossible = "LiveMigrationImpossible"
)

// DrainVM is a VM a drain moves or cannot move.
type DrainVM struct {
	// namespace of the VirtualMachine.
	// +kubebuilder:validation:MaxLength=63
	Namespace string `json:"namespace"`
	// name of the VirtualMachine.
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
	// reason is why the VM cannot move (blocked), or how it moves (moving): LiveMigration, or
	// LiveMigrationImpossible for a liveOrRecreate VM recreated from its image; unset, a moving
	// VM is recreated from its image.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	Reason string `json:"reason,omitempty"`
	// message says what would let it move (blocked), or names its VirtualMachineMigration or
	// why it is recreated (moving).
	// +optional
	// +kubebuilder:validation:MaxLength=2048
	Message string `json:"message,omitempty"`
	// since is when the VM started moving, or was found unable to.
	Since metav1.Time `json:"since"`
}

// ProviderDrainStatus is a drain's progress, written by the controller.
type ProviderDrainStatus struct {
	// phase: Draining, Blocked or Drained.
	// +kubebuilder:validation:Enum=Draining;Blocked;Drained
	Phase string `json:"phase"`
	// startedAt is when the controller first saw spec.drain.
	StartedAt metav1.Time `json:"startedAt"`
	// total is how many VMs were placed on the Provider when the drain started.
	Total int32 `json:"total"`
	// remaining is how many VMs are still placed on it.
	Remaining int32 `json:"remaining"`
	// moving are the VMs being moved now, at most spec.drain.maxConcurrent.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=32
	Moving []DrainVM `json:"moving,omitempty"`
	// blocked are the VMs the drain cannot move, each with why.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=4096
	Blocked []DrainVM `json:"blocked,omitempty"`
}

// Defaults of ProviderOvercommit's fields.
const (
	DefaultCPUAllocationPercent    = 400
	DefaultMemoryAllocationPercent = 100
	DefaultReservedMemoryMiB       = 1024
)

// ProviderOvercommit bounds what the scheduler places on a host: the vCPUs of its VMs at most
// cpuAllocationPercent of its logical CPUs, their memory at most memoryAllocationPercent of
// the host's memory less reservedMemoryMiB.
type ProviderOvercommit struct {
	// cpuAllocationPercent is the vCPUs placed per 100 logical CPUs of the host. Unset: 400
	// (four vCPUs per CPU).
	// +optional
	// +kubebuilder:validation:Minimum=10
	// +kubebuilder:validation:Maximum=1600
	CPUAllocationPercent *int32 `json:"cpuAllocationPercent,omitempty"`
	// memoryAllocationPercent is the guest memory placed per 100 MiB of the host's memory
	// (after reservedMemoryMiB). Unset: 100, no overcommit: QEMU reserves guest memory lazily,
	// so an overcommitted host runs until its guests touch their memory and then OOM-kills one.
	// +optional
	// +kubebuilder:validation:Minimum=10
	// +kubebuilder:validation:Maximum=400
	MemoryAllocationPercent *int32 `json:"memoryAllocationPercent,omitempty"`
	// reservedMemoryMiB is kept for the host itself (its kernel, libvirtd, QEMU's own
	// overhead) and never placed. Unset: 1024.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=16777216
	ReservedMemoryMiB *int32 `json:"reservedMemoryMiB,omitempty"`
}

// ProviderConnection is the endpoint and the credentials used to reach it.
type ProviderConnection struct {
	// endpoint of the host. For libvirt: qemu+tls://host[:port][/system] or a bare host[:port].
	// Any other scheme is rejected when the Provider is reconciled.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=2048
	Endpoint string `json:"endpoint"`
	// credentialsRef names a Secret in the Provider's namespace. For libvirt it holds the client
	// certificate (tls.crt) and its private key (tls.key).
	CredentialsRef LocalObjectReference `json:"credentialsRef"`
	// caBundle holds the CA that signed the host's server certificate. Required for libvirt.
	// +optional
	CABundle *CABundleSource `json:"caBundle,omitempty"`
	// insecureSkipTLSVerify is refused by the libvirt provider; there is no code path that skips
	// verification.
	// +optional
	InsecureSkipTLSVerify bool `json:"insecureSkipTLSVerify,omitempty"`
}

// ProviderCapabilities are the storage and network classes and features an administrator
// declares for a host.
type ProviderCapabilities struct {
	// storageClasses map a class name used by VMClasses to a backend target (libvirt: pool).
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=64
	StorageClasses []StorageClassMapping `json:"storageClasses,omitempty"`
	// networkClasses map a class name used by VMClasses to a backend target (libvirt: network
	// or bridge).
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=64
	NetworkClasses []NetworkClassMapping `json:"networkClasses,omitempty"`
	// features are copied verbatim into the failure domain; they are never discovered.
	// Well-known: hotAddCPU, hotAddMemory, efiSecureBoot, nestedVirtualization, gpuPassthrough,
	// vtpm.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MaxLength=63
	Features []string `json:"features,omitempty"`
}

// StorageClassMapping names a storage class and where it lives on this host.
type StorageClassMapping struct {
	// name of the storage class.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Name string `json:"name"`
	// target is backend specific. The libvirt key is pool.
	// +optional
	// +kubebuilder:validation:MaxProperties=8
	// +kubebuilder:validation:XValidation:rule="self.all(k, size(self[k]) <= 200)",message="target values must be at most 200 characters, as libvirt pool, network and bridge names are"
	Target map[string]string `json:"target,omitempty"`
}

// NetworkClassMapping names a network class and where it lives on this host.
type NetworkClassMapping struct {
	// name of the network class.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Name string `json:"name"`
	// target is backend specific. libvirt keys: network (a libvirt managed network) or bridge
	// (a host bridge).
	// +optional
	// +kubebuilder:validation:MaxProperties=8
	// +kubebuilder:validation:XValidation:rule="self.all(k, size(self[k]) <= 200)",message="target values must be at most 200 characters, as libvirt pool, network and bridge names are"
	Target map[string]string `json:"target,omitempty"`
	// subnet provides gateway, nameservers and domain to static addresses on this network.
	// +optional
	Subnet *NetworkSubnet `json:"subnet,omitempty"`
}

// NetworkSubnet is the shared addressing of a network class.
type NetworkSubnet struct {
	// gateway is the default route's next hop.
	// +optional
	// +kubebuilder:validation:MaxLength=45
	Gateway string `json:"gateway,omitempty"`
	// nameservers are DNS resolvers' addresses.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=8
	// +kubebuilder:validation:items:MaxLength=45
	Nameservers []string `json:"nameservers,omitempty"`
	// domain is the DNS search domain.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Domain string `json:"domain,omitempty"`
}

// FailureDomain is one failure boundary a Provider offers; libvirt publishes exactly one.
type FailureDomain struct {
	// name of the failure domain (libvirt: the Provider's name).
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
	// labels matched by a VirtualMachine's placement.failureDomainSelector.
	// +optional
	// +kubebuilder:validation:MaxProperties=256
	Labels map[string]string `json:"labels,omitempty"`
	// attributes are what the failure domain verifiably offers.
	Attributes FailureDomainAttributes `json:"attributes"`
	// capacity is the host's size as its last probe read it; unset until a provider that
	// reads it has probed the host, and then the scheduler places on it without a capacity
	// check.
	// +optional
	Capacity *FailureDomainCapacity `json:"capacity,omitempty"`
}

// FailureDomainCapacity is what a host or compute cluster has, from libvirt's node and pool info
// or vCenter's cluster and datastore summaries.
type FailureDomainCapacity struct {
	// cpus is the host's logical CPUs.
	CPUs int32 `json:"cpus"`
	// memoryMiB is the host's memory.
	MemoryMiB int64 `json:"memoryMiB"`
	// pools are the storage pools the Provider's storage classes map, by pool name.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=64
	Pools []PoolCapacity `json:"pools,omitempty"`
	// datastores are the vSphere datastores the Provider's storage classes map that the failure
	// domain reaches, by datastore name, as vCenter last reported them. The scheduler places a
	// new VM only where each of them has the free space for the VM's disks on it, at their full
	// size.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=64
	Datastores []PoolCapacity `json:"datastores,omitempty"`
}

// PoolCapacity is one storage pool's (or datastore's) size, rounded down to whole GiB so that
// a probe finding a disk a few bytes fuller writes nothing.
type PoolCapacity struct {
	// name of the pool on the host (of the datastore in vCenter).
	// +kubebuilder:validation:MaxLength=200
	Name string `json:"name"`
	// capacityGiB is the pool's size.
	CapacityGiB int64 `json:"capacityGiB"`
	// availableGiB is its free space.
	AvailableGiB int64 `json:"availableGiB"`
}

// FailureDomainAttributes are the narrowed capabilities of a failure domain.
type FailureDomainAttributes struct {
	// availableStorageClasses are the declared storage classes found on the host.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=63
	AvailableStorageClasses []string `json:"availableStorageClasses,omitempty"`
	// availableNetworkClasses are the declared network classes found on the host.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=63
	AvailableNetworkClasses []string `json:"availableNetworkClasses,omitempty"`
	// features as declared in spec.capabilities.features.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MaxLength=63
	Features []string `json:"features,omitempty"`
	// raw holds backend facts (libvirt: endpoint, pools, networks, domainType).
	// +optional
	// +kubebuilder:validation:MaxProperties=32
	Raw map[string]string `json:"raw,omitempty"`
}

// ProviderWorkload is the per-Provider Deployment the operator runs.
type ProviderWorkload struct {
	// deploymentName of the provider's Deployment.
	// +kubebuilder:validation:MaxLength=253
	DeploymentName string `json:"deploymentName"`
	// namespace of the Deployment.
	// +kubebuilder:validation:MaxLength=63
	Namespace string `json:"namespace"`
	// readyReplicas of the Deployment.
	ReadyReplicas int32 `json:"readyReplicas"`
	// observedGeneration of the Provider the workload was applied for.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
}

// ProviderStatus is what the provider verified about the host.
type ProviderStatus struct {
	// failureDomains are the verified failure domains; empty until the host has been reached.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=1024
	FailureDomains []FailureDomain `json:"failureDomains,omitempty"`
	// conditions: Ready and ProviderReachable.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=32
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// observedGeneration is the generation the status was computed for.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// workload is written by the operator only.
	// +optional
	Workload *ProviderWorkload `json:"workload,omitempty"`
	// drain is the progress of spec.drain, written by the controller only.
	// +optional
	Drain *ProviderDrainStatus `json:"drain,omitempty"`
	// allocated is what banlieue has placed on each failure domain, summed over the
	// VirtualMachines placed there, written by the controller only. It counts what the
	// scheduler counts: placements not yet realised included. A failure domain with no VM
	// placed on it has no entry.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=1024
	Allocated []FailureDomainAllocation `json:"allocated,omitempty"`
	// consoleKeys are the keys of the console endpoints of the provider's replicas, each
	// written by its own replica: the console relay sends its token only to an endpoint whose
	// key is listed here and was renewed within ConsoleKeyValidity (docs/security.md,
	// "Console").
	// +optional
	// +listType=map
	// +listMapKey=pod
	// +kubebuilder:validation:MaxItems=16
	ConsoleKeys []ConsoleKey `json:"consoleKeys,omitempty"`
}

// ConsoleKeyValidity is how long a published console key is trusted after its renewal; each
// replica renews its own at a third of it, so a replica that crashed is trusted no longer.
const ConsoleKeyValidity = 30 * time.Minute

// ConsoleKey is one provider replica's console endpoint key.
type ConsoleKey struct {
	// pod is the replica's pod name.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Pod string `json:"pod"`
	// sha256 is the SHA-256 of the certificate's public key (its DER SubjectPublicKeyInfo), in
	// lowercase hex.
	// +kubebuilder:validation:Pattern=`^[0-9a-f]{64}$`
	// +kubebuilder:validation:MinLength=64
	// +kubebuilder:validation:MaxLength=64
	SHA256 string `json:"sha256"`
	// renewedAt is when the replica last wrote the entry.
	RenewedAt metav1.Time `json:"renewedAt"`
}

// FailureDomainAllocation is what the VMs placed on one failure domain take, beside what its
// Provider's overcommit policy lets the scheduler place there.
type FailureDomainAllocation struct {
	// name of the failure domain.
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
	// virtualMachines is how many VMs are placed on it.
	VirtualMachines int32 `json:"virtualMachines"`
	// cpus is the vCPUs of those VMs.
	CPUs int64 `json:"cpus"`
	// memoryMiB is their memory.
	MemoryMiB int64 `json:"memoryMiB"`
	// allowedCPUs is the vCPUs the scheduler may place on it (its logical CPUs ×
	// cpuAllocationPercent / 100); unset while the failure domain publishes no capacity.
	// +optional
	AllowedCPUs *int64 `json:"allowedCPUs,omitempty"`
	// allowedMemoryMiB is the memory the scheduler may place on it ((memory −
	// reservedMemoryMiB) × memoryAllocationPercent / 100); unset while the failure domain
	// publishes no capacity.
	// +optional
	AllowedMemoryMiB *int64 `json:"allowedMemoryMiB,omitempty"`
}

// Provider registers one hypervisor host with banlieue.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Namespaced,shortName=bprov,categories=banlieue
// +kubebuilder:printcolumn:name="Class",type=string,JSONPath=`.spec.providerClassRef.name`
// +kubebuilder:printcolumn:name="Endpoint",type=string,JSONPath=`.spec.connection.endpoint`,priority=1
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=='Ready')].status`
// +kubebuilder:printcolumn:name="Unschedulable",type=boolean,JSONPath=`.spec.unschedulable`,priority=1
// +kubebuilder:printcolumn:name="Drain",type=string,JSONPath=`.status.drain.phase`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type Provider struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   ProviderSpec   `json:"spec"`
	Status ProviderStatus `json:"status,omitempty"`
}

// ProviderList is a list of Providers.
//
// +kubebuilder:object:root=true
type ProviderList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Provider `json:"items"`
}

func init() {
	SchemeBuilder.Register(&Provider{}, &ProviderList{})
}
