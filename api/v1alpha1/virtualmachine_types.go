package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// VirtualMachineSpec declares one VM.
type VirtualMachineSpec struct {
	// classRef names the VMClass.
	ClassRef LocalObjectReference `json:"classRef"`
	// imageRef names the VMImage.
	ImageRef LocalObjectReference `json:"imageRef"`
	// placement narrows where the VM may be scheduled.
	// +optional
	Placement *Placement `json:"placement,omitempty"`
	// desiredPowerState of the VM: PoweredOn (the default) starts it (and resumes a suspended
	// one); PoweredOff powers it off the way powerOffMode says; Suspended pauses a running VM's
	// virtual CPUs (its memory stays allocated on the host) and PoweredOn resumes it. A VM that
	// is off stays off when asked for Suspended.
	// +optional
	// +kubebuilder:default=PoweredOn
	DesiredPowerState PowerState `json:"desiredPowerState,omitempty"`
	// powerOffMode is how PoweredOff and a restart reach the guest. TrySoft (the default) asks
	// the guest to shut down, through qemu-guest-agent when it answers, else the virtual ACPI
	// power button, waits powerOffTimeout, then destroys the domain. Soft asks once and waits as
	// long as the guest takes (a guest with neither never goes off). Hard destroys at once: a
	// power cut, and the guest loses writes it has not flushed. Deleting a VM always destroys
	// its domain, whatever the mode.
	// +optional
	// +kubebuilder:default=TrySoft
	PowerOffMode PowerOffMode `json:"powerOffMode,omitempty"`
	// powerOffTimeout is how long TrySoft waits for the guest to shut down after pressing the
	// power button, counted from the first press, before destroying the domain. Default 2m;
	// between 1s and 30m. Soft and Hard ignore it.
	// +optional
	// +kubebuilder:default="2m"
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('1s') && duration(self) <= duration('30m')",message="powerOffTimeout must be between 1s and 30m"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	PowerOffTimeout *metav1.Duration `json:"powerOffTimeout,omitempty"`
	// nextRestartTime asks for a restart: set it to the current time (RFC 3339) and a running VM
	// restarts once, when it is later than status.lastRestartTime. Soft and TrySoft reboot the
	// guest through its agent, else the ACPI power button (a guest with neither does not); Hard
	// destroys and starts the domain (a power cut). A VM that is off or suspended restarts when
	// it next starts.
	// +optional
	NextRestartTime *metav1.Time `json:"nextRestartTime,omitempty"`
	// migrationPolicy says what happens when the placement decision changes or the VM's
	// Provider is drained. recreate recreates the VM from its image on the new host, with a new
	// empty disk, at once; manual does so once the VM is annotated banlieue.io/migrate=true;
	// never (the default) does not move the VM. live lets a VirtualMachineMigration (or a drain)
	// move the running VM with its memory and disk, and refuses a move that cannot be live;
	// liveOrRecreate moves it live when it runs, and recreates it like recreate when a live move
	// is impossible. automatic is the former name of recreate.
	// +optional
	// +kubebuilder:validation:Enum=recreate;automatic;manual;never;live;liveOrRecreate
	MigrationPolicy string `json:"migrationPolicy,omitempty"`
	// userData is the guest's cloud-init user-data, read from a Secret or a ConfigMap key
	// (default key user-data) in the VM's namespace. Placeholders ${VM_NAME}, ${FQDN}, ${IP},
	// ${PREFIX}, ${GATEWAY}, ${DNS} and ${DOMAIN} are substituted from the first
	// networkOverrides entry.
	// +optional
	UserData *UserDataSource `json:"userData,omitempty"`
	// networkOverrides give interfaces static addresses, matched by interface name.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=16
	NetworkOverrides []NetworkOverride `json:"networkOverrides,omitempty"`
	// hardwareOverride replaces parts of the class's hardware for this VM.
	// +optional
	HardwareOverride *HardwareOverride `json:"hardwareOverride,omitempty"`
	// paused stops reconciling this VM until it is cleared.
	// +optional
	Paused bool `json:"paused,omitempty"`
}

// LabelSelectorOperator is the operator of a label selector requirement.
// +kubebuilder:validation:Enum=In;NotIn;Exists;DoesNotExist
type LabelSelectorOperator string

// LabelSelectorRequirement is one requirement of a label selector.
type LabelSelectorRequirement struct {
	// key is the label key.
	// +kubebuilder:validation:MaxLength=317
	Key string `json:"key"`
	// operator relates the key to values.
	Operator LabelSelectorOperator `json:"operator"`
	// values for In and NotIn.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=63
	Values []string `json:"values,omitempty"`
}

// LabelSelector matches labels; a nil selector matches everything.
type LabelSelector struct {
	// matchLabels must all be present with these values.
	// +optional
	// +kubebuilder:validation:MaxProperties=64
	MatchLabels map[string]string `json:"matchLabels,omitempty"`
	// matchExpressions must all hold.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=32
	MatchExpressions []LabelSelectorRequirement `json:"matchExpressions,omitempty"`
}

// Placement constrains scheduling.
type Placement struct {
	// providerSelector is matched against Provider labels; candidates are the Providers of the
	// VM's namespace and those of other namespaces whose allowedNamespaces admit it.
	// +optional
	ProviderSelector *LabelSelector `json:"providerSelector,omitempty"`
	// failureDomainSelector is matched against failure domain labels. The libvirt failure
	// domain carries name: <provider-name>.
	// +optional
	FailureDomainSelector *LabelSelector `json:"failureDomainSelector,omitempty"`
	// antiAffinity spreads VMs over failure domains.
	// +optional
	// +kubebuilder:validation:MaxItems=8
	// +listType=atomic
	AntiAffinity []AntiAffinityRule `json:"antiAffinity,omitempty"`
	// strategy chooses among the failure domains that can hold the VM: Spread (unset) the
	// least allocated, Binpack the most allocated, keeping other hosts free for large VMs.
	// +optional
	// +kubebuilder:validation:Enum=Spread;Binpack
	Strategy string `json:"strategy,omitempty"`
}

// Placement strategies.
const (
	PlacementSpread  = "Spread"
	PlacementBinpack = "Binpack"
)

// AntiAffinityRule keeps this VM away from failure domains holding matching siblings.
type AntiAffinityRule struct {
	// topologyKey is a failure domain label.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=317
	TopologyKey string `json:"topologyKey"`
	// labelSelector selects the sibling VMs.
	LabelSelector LabelSelector `json:"labelSelector"`
	// mode: required filters candidates; preferred breaks ties.
	// +optional
	// +kubebuilder:default=required
	// +kubebuilder:validation:Enum=required;preferred
	Mode string `json:"mode,omitempty"`
}

// UserDataSource selects the user-data. Exactly one of secretRef and configMapRef is set.
// +kubebuilder:validation:XValidation:rule="has(self.secretRef) != has(self.configMapRef)",message="userData: set exactly one of secretRef and configMapRef"
type UserDataSource struct {
	// secretRef selects a Secret key (default user-data); the value must be UTF-8.
	// +optional
	SecretRef *KeySelector `json:"secretRef,omitempty"`
	// configMapRef selects a ConfigMap key (default user-data).
	// +optional
	ConfigMapRef *KeySelector `json:"configMapRef,omitempty"`
}

// NetworkOverride gives one interface a static address.
type NetworkOverride struct {
	// name of the class interface.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=15
	Name string `json:"name"`
	// static address of the interface.
	Static StaticIpamConfig `json:"static"`
}

// HardwareOverride replaces what it sets of the class's hardware.
type HardwareOverride struct {
	// cpus replaces the class's cpus.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=256
	CPUs *int32 `json:"cpus,omitempty"`
	// memoryMiB replaces the class's memoryMiB.
	// +optional
	// +kubebuilder:validation:Minimum=128
	// +kubebuilder:validation:Maximum=4194304
	MemoryMiB *int32 `json:"memoryMiB,omitempty"`
	// diskOverrides resize class disks by name. A size may grow but never shrink.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=32
	DiskOverrides []DiskOverride `json:"diskOverrides,omitempty"`
}

// DiskOverride resizes one class disk.
type DiskOverride struct {
	// name of the class disk.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=32
	Name string `json:"name"`
	// sizeGiB of the disk; it may grow but must not shrink once set. A larger size grows the
	// VM's disk, live while it runs.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65536
	// +kubebuilder:validation:XValidation:rule="self >= oldSelf",message="hardwareOverride.diskOverrides[].sizeGiB must not shrink: shrinking a disk is refused, as it would lose the data past the new size"
	SizeGiB int32 `json:"sizeGiB"`
}

// ResolvedMapping is the backend target a class name resolved to.
type ResolvedMapping struct {
	// className is the storage or network class.
	// +kubebuilder:validation:MaxLength=63
	ClassName string `json:"className"`
	// backendID is the backend target (libvirt: a pool, network or bridge name).
	// +kubebuilder:validation:MaxLength=200
	BackendID string `json:"backendId"`
}

// ScheduledPlacement is the scheduler's decision.
type ScheduledPlacement struct {
	// providerName of the chosen Provider.
	// +kubebuilder:validation:MaxLength=253
	ProviderName string `json:"providerName"`
	// providerNamespace of the chosen Provider: the VM's own, or that of a shared Provider whose
	// allowedNamespaces admits the VM's namespace. Empty in placements recorded before the field
	// existed, which were all in the VM's namespace.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	ProviderNamespace string `json:"providerNamespace,omitempty"`
	// providerClass of the chosen Provider.
	// +kubebuilder:validation:MaxLength=253
	ProviderClass string `json:"providerClass"`
	// failureDomain chosen.
	// +kubebuilder:validation:MaxLength=256
	FailureDomain string `json:"failureDomain"`
	// resolvedStorage per disk.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=32
	ResolvedStorage []ResolvedMapping `json:"resolvedStorage,omitempty"`
	// resolvedNetworks per interface.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=16
	ResolvedNetworks []ResolvedMapping `json:"resolvedNetworks,omitempty"`
	// cpus the placement takes on the failure domain: the VM's class's, when it was placed.
	// The scheduler adds up these (and memoryMiB) to know what a host has left.
	// +optional
	CPUs int32 `json:"cpus,omitempty"`
	// memoryMiB the placement takes on the failure domain.
	// +optional
	MemoryMiB int32 `json:"memoryMiB,omitempty"`
	// scheduledAt is when the decision was made.
	// +optional
	ScheduledAt *metav1.Time `json:"scheduledAt,omitempty"`
}

// InfrastructureReference points at a VM's infrastructure machine.
type InfrastructureReference struct {
	// apiGroup of the machine kind.
	// +kubebuilder:validation:MaxLength=253
	APIGroup string `json:"apiGroup"`
	// kind of the machine, e.g. LibvirtMachine.
	// +kubebuilder:validation:MaxLength=63
	Kind string `json:"kind"`
	// name of the machine.
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
	// namespace of the machine.
	// +kubebuilder:validation:MaxLength=63
	Namespace string `json:"namespace"`
}

// VirtualMachinePhase is a one-word summary of a VM, for `kubectl get` and the
// banlieue_virtualmachines metric: the first that applies of Deleting, Paused, Ready, Stopped
// and Suspended (provisioned and off, or suspended, as desiredPowerState asks), Provisioning
// (scheduled, not yet as its spec asks) and Pending (not scheduled).
// +kubebuilder:validation:Enum=Pending;Provisioning;Ready;Stopped;Suspended;Paused;Deleting
type VirtualMachinePhase string

// VM phases, in the order they are derived.
const (
	VMPhaseDeleting     VirtualMachinePhase = "Deleting"
	VMPhasePaused       VirtualMachinePhase = "Paused"
	VMPhaseReady        VirtualMachinePhase = "Ready"
	VMPhaseStopped      VirtualMachinePhase = "Stopped"
	VMPhaseSuspended    VirtualMachinePhase = "Suspended"
	VMPhaseProvisioning VirtualMachinePhase = "Provisioning"
	VMPhasePending      VirtualMachinePhase = "Pending"
)

// VirtualMachineStatus is the VM's placement and the mirrored machine status.
type VirtualMachineStatus struct {
	// phase summarises the VM in one word: Pending (not scheduled), Provisioning (scheduled,
	// not yet as its spec asks), Ready (running), Stopped (its machine is provisioned and off,
	// as desiredPowerState PoweredOff, or Suspended of a VM that was off, asks), Suspended
	// (suspended as desiredPowerState asks), Paused (spec.paused: banlieue leaves the VM alone)
	// or Deleting. Ready stays False for a Stopped or Suspended VM: it means running. The
	// conditions say why.
	// +optional
	Phase VirtualMachinePhase `json:"phase,omitempty"`
	// scheduled is the placement decision.
	// +optional
	Scheduled *ScheduledPlacement `json:"scheduled,omitempty"`
	// infrastructureRef is the infrastructure machine realising the VM.
	// +optional
	InfrastructureRef *InfrastructureReference `json:"infrastructureRef,omitempty"`
	// initialization mirrors the machine's.
	// +optional
	Initialization *InitializationStatus `json:"initialization,omitempty"`
	// addresses mirror the machine's.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=32
	Addresses []MachineAddress `json:"addresses,omitempty"`
	// observedPowerState mirrors the machine's.
	// +optional
	ObservedPowerState PowerState `json:"observedPowerState,omitempty"`
	// lastRestartTime is the spec.nextRestartTime the VM last restarted (or started) for.
	// +optional
	LastRestartTime *metav1.Time `json:"lastRestartTime,omitempty"`
	// tpmEndorsementCertificates are the vTPM's EK certificates (PEM); later.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=8
	// +kubebuilder:validation:items:MaxLength=16384
	TPMEndorsementCertificates []string `json:"tpmEndorsementCertificates,omitempty"`
	// conditions: Ready, Scheduled, PlacementValid, InfrastructureReady, GuestReady, Migrating,
	// and DisksGrown while a disk could not be grown.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=32
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// observedGeneration is the generation the status was computed for.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
}

// VirtualMachine is a VM a user declares; banlieue schedules it onto a Provider.
//
// +kubebuilder:validation:XValidation:rule="size(self.metadata.name) <= 63",message="metadata.name must be at most 63 characters: it is a label value on the VM's machine"
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Namespaced,shortName=bvm,categories=banlieue
// +kubebuilder:printcolumn:name="Class",type=string,JSONPath=`.spec.classRef.name`
// +kubebuilder:printcolumn:name="Image",type=string,JSONPath=`.spec.imageRef.name`
// +kubebuilder:printcolumn:name="Provider",type=string,JSONPath=`.status.scheduled.providerName`
// +kubebuilder:printcolumn:name="FailureDomain",type=string,JSONPath=`.status.scheduled.failureDomain`,priority=1
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Power",type=string,JSONPath=`.status.observedPowerState`
// +kubebuilder:printcolumn:name="IP",type=string,JSONPath=`.status.addresses[?(@.type=='InternalIP')].address`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=='Ready')].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type VirtualMachine struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   VirtualMachineSpec   `json:"spec"`
	Status VirtualMachineStatus `json:"status,omitempty"`
}

// VirtualMachineList is a list of VirtualMachines.
//
// +kubebuilder:object:root=true
type VirtualMachineList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []VirtualMachine `json:"items"`
}

func init() {
	SchemeBuilder.Register(&VirtualMachine{}, &VirtualMachineList{})
}
