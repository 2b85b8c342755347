package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
)

// ProviderKey is the namespace and name of the machine's Provider, the namespace defaulted to
// the machine's own. Unplaced (no providerRef yet), its name is empty and no Provider has it.
func (m *VSphereMachine) ProviderKey() types.NamespacedName {
	if m.Spec.ProviderRef == nil {
		return types.NamespacedName{Namespace: m.Namespace}
	}
	ns := m.Spec.ProviderRef.Namespace
	if ns == "" {
		ns = m.Namespace
	}
	return types.NamespacedName{Namespace: ns, Name: m.Spec.ProviderRef.Name}
}

// VSphereMachineSpec is one vSphere virtual machine, cloned from a template.
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.providerRef) || has(self.providerRef)",message="spec.providerRef cannot be removed once set"
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.vmName) || (has(self.vmName) && self.vmName == oldSelf.vmName)",message="spec.vmName is immutable: the virtual machine in vCenter keeps the name it was cloned with"
type VSphereMachineSpec struct {
	// providerID is vsphere://<bios-uuid>, the BIOS UUID of the virtual machine in lower case,
	// as the vSphere cloud provider names nodes; the provider sets it once the clone exists.
	// +optional
	// +kubebuilder:validation:MaxLength=47
	// +kubebuilder:validation:Pattern=`^vsphere://[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`
	ProviderID string `json:"providerID,omitempty"`
	// failureDomain the scheduler chose: one of the Provider's status.failureDomains, each a
	// compute cluster of the vCenter inventory. The provider clones into that failure domain's
	// datacenter, resource pool and folder, which it reads from its own inventory, never from
	// this object.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	FailureDomain string `json:"failureDomain,omitempty"`
	// providerRef names the Provider: in the machine's namespace, or in providerRef.namespace
	// when that Provider's allowedNamespaces admits the machine's namespace. Immutable: the
	// virtual machine was cloned on that Provider's vCenter, and another Provider must never
	// inherit it as its own.
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="providerRef is immutable: delete the machine and create it on the other Provider"
	// +optional
	ProviderRef *ProviderReference `json:"providerRef,omitempty"`
	// vmName of the virtual machine in vCenter: <vm-namespace>-<vm-name>, as banlieue-controller
	// sets it; at most 80 characters, vCenter's limit. The name is a label, never proof of
	// ownership: the provider adopts only a virtual machine that carries this machine's UID.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=80
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9][A-Za-z0-9._-]*$`
	VMName string `json:"vmName,omitempty"`
	// template is the inventory path of the virtual machine template the machine is cloned
	// from (/<datacenter>/vm/<folder>/<template>), as the VMImage's Template source names it.
	// Read only for the clone: a machine that exists keeps the template it was cloned from.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1024
	// +kubebuilder:validation:Pattern=`^/[^/].*$`
	Template string `json:"template"`
	// cpus of the virtual machine.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=256
	CPUs int32 `json:"cpus"`
	// memoryMiB of the virtual machine.
	// +kubebuilder:validation:Minimum=128
	// +kubebuilder:validation:Maximum=4194304
	MemoryMiB int32 `json:"memoryMiB"`
	// firmware of the virtual machine; efi-secure turns on UEFI secure boot.
	// +optional
	Firmware banlieuev1.Firmware `json:"firmware,omitempty"`
	// tpmEnabled adds a virtual TPM; the provider refuses it in a failure domain that does not
	// advertise the vtpm feature (a vCenter without a key provider cannot encrypt one).
	// +optional
	TPMEnabled bool `json:"tpmEnabled,omitempty"`
	// disks of the virtual machine; the first is the template's OS disk, grown to sizeGiB, the
	// rest are new blank disks.
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=32
	Disks []VSphereDisk `json:"disks"`
	// network interfaces of the virtual machine, in order; vSphere allows at most 10.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=10
	Network []VSphereNetworkInterface `json:"network,omitempty"`
	// userDataSecretRef names the Secret, in this machine's namespace, that holds the rendered
	// cloud-init user-data. banlieue-controller writes it, controlled by this machine (an owner
	// reference), so user-data never sits in clear in a custom resource; the provider reads it
	// only when that owner reference is there and passes it to the guest as
	// guestinfo.userdata. Unset: the guest gets an empty user-data.
	// +optional
	UserDataSecretRef *banlieuev1.LocalObjectReference `json:"userDataSecretRef,omitempty"`
	// userDataHash is the salted SHA-256 of the user-data in userDataSecretRef, in hex. A change
	// of the user-data changes it, and so the machine's generation, without revealing the
	// content; the provider uses only a Secret that matches it.
	// +optional
	// +kubebuilder:validation:Pattern=`^[0-9a-f]{64}$`
	// +kubebuilder:validation:MaxLength=64
	UserDataHash string `json:"userDataHash,omitempty"`
	// desiredPowerState of the virtual machine.
	// +optional
	// +kubebuilder:default=PoweredOn
	DesiredPowerState banlieuev1.PowerState `json:"desiredPowerState,omitempty"`
	// powerOffMode is how PoweredOff and a restart reach the guest: TrySoft (the default) asks
	// VMware Tools for a guest shutdown, then powers off after powerOffTimeout (at once when
	// Tools are not running); Soft asks only; Hard powers off at once (a power cut). Teardown
	// always powers off.
	// +optional
	// +kubebuilder:default=TrySoft
	PowerOffMode banlieuev1.PowerOffMode `json:"powerOffMode,omitempty"`
	// powerOffTimeout is how long TrySoft waits after the guest shutdown before powering off.
	// Default 2m; between 1s and 30m.
	// +optional
	// +kubebuilder:default="2m"
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('1s') && duration(self) <= duration('30m')",message="powerOffTimeout must be between 1s and 30m"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	PowerOffTimeout *metav1.Duration `json:"powerOffTimeout,omitempty"`
	// nextRestartTime asks for one restart when it is later than status.lastRestartTime.
	// +optional
	NextRestartTime *metav1.Time `json:"nextRestartTime,omitempty"`
}

// VSphereDisk is one disk of the virtual machine.
type VSphereDisk struct {
	// name of the disk (the class disk's name).
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9._-]+$`
	Name string `json:"name"`
	// sizeGiB of the disk; it never shrinks.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65536
	// +kubebuilder:validation:XValidation:rule="self >= oldSelf",message="disks[].sizeGiB must not shrink"
	SizeGiB int32 `json:"sizeGiB"`
	// datastore the disk is placed in: the target the Provider maps the class disk's storage
	// class to (its datastore key). The first disk's datastore holds the virtual machine.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=200
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="disks[].datastore is immutable: a disk is never moved between datastores"
	Datastore string `json:"datastore"`
	// provisioning of the disk's space.
	// +optional
	// +kubebuilder:default=thin
	Provisioning banlieuev1.DiskProvisioning `json:"provisioning,omitempty"`
}

// VSphereNetworkInterface is one network adapter of the virtual machine.
type VSphereNetworkInterface struct {
	// name of the interface (the class interface's name).
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=15
	Name string `json:"name"`
	// portGroup the adapter connects to: the target the Provider maps the interface's network
	// class to (its portGroup key), a standard or distributed port group by name.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=200
	PortGroup string `json:"portGroup"`
	// macAddress of the adapter; unset lets vCenter generate one.
	// +optional
	// +kubebuilder:validation:Pattern=`^([0-9A-Fa-f]{2}:){5}[0-9A-Fa-f]{2}$`
	// +kubebuilder:validation:MaxLength=17
	MACAddress string `json:"macAddress,omitempty"`
	// ipam of the interface, passed to the guest in guestinfo.metadata's network config.
	// +optional
	IPAM banlieuev1.IpamSpec `json:"ipam,omitempty"`
}

// VSphereMachineStatus is what the provider observed of the virtual machine.
type VSphereMachineStatus struct {
	// initialization.provisioned is true while the virtual machine exists and is in its desired
	// power state.
	// +optional
	Initialization *banlieuev1.InitializationStatus `json:"initialization,omitempty"`
	// failureDomain copied from the spec.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	FailureDomain string `json:"failureDomain,omitempty"`
	// addresses of the guest as VMware Tools report them (InternalIP; loopback and link-local
	// filtered out).
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=32
	Addresses []banlieuev1.MachineAddress `json:"addresses,omitempty"`
	// vmRef is the managed object reference of the virtual machine this machine cloned (vm-42),
	// recorded once the clone exists. Only that virtual machine, carrying this machine's UID, is
	// ever changed, powered or destroyed for it.
	// +optional
	// +kubebuilder:validation:MaxLength=80
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9_.:-]+$`
	VMRef string `json:"vmRef,omitempty"`
	// biosUuid of the virtual machine, in canonical 36-character lower-case form.
	// +optional
	// +kubebuilder:validation:MaxLength=36
	BIOSUUID string `json:"biosUuid,omitempty"`
	// template is the spec.template the virtual machine was cloned from.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Template string `json:"template,omitempty"`
	// observedPowerState of the virtual machine.
	// +optional
	ObservedPowerState banlieuev1.PowerState `json:"observedPowerState,omitempty"`
	// toolsRunning is whether VMware Tools run in the guest, which a graceful shutdown needs.
	// +optional
	ToolsRunning *bool `json:"toolsRunning,omitempty"`
	// powerOffRequestedAt is when the provider asked the guest to shut down through VMware
	// Tools for the power-off under way (Soft, TrySoft); TrySoft's timeout counts from it,
	// across provider restarts. Cleared once the virtual machine is off or PoweredOff is no
	// longer asked for.
	// +optional
	PowerOffRequestedAt *metav1.Time `json:"powerOffRequestedAt,omitempty"`
	// lastRestartTime is the spec.nextRestartTime the virtual machine last restarted (or
	// started) for.
	// +optional
	LastRestartTime *metav1.Time `json:"lastRestartTime,omitempty"`
	// tpmAttached is true when the virtual machine has a virtual TPM.
	// +optional
	TPMAttached *bool `json:"tpmAttached,omitempty"`
	// conditions: Ready and GuestReady.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=32
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// observedGeneration is the generation the status was computed for.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
}

// VSphereMachine is one vSphere virtual machine, realised by the vsphere provider. The API
// server selects machines by spec.providerRef.name (kubectl get vspheremachines -A
// --field-selector spec.providerRef.name=<provider>), as the provider of one Provider watches
// them.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:selectablefield:JSONPath=".spec.providerRef.name"
// +kubebuilder:metadata:labels="cluster.x-k8s.io/v1beta2=v1alpha1"
// +kubebuilder:resource:scope=Namespaced,shortName=bvsm,categories=banlieue
// +kubebuilder:printcolumn:name="Provider",type=string,JSONPath=`.spec.providerRef.name`
// +kubebuilder:printcolumn:name="FailureDomain",type=string,JSONPath=`.spec.failureDomain`
// +kubebuilder:printcolumn:name="Provisioned",type=boolean,JSONPath=`.status.initialization.provisioned`
// +kubebuilder:printcolumn:name="Power",type=string,JSONPath=`.status.observedPowerState`
// +kubebuilder:printcolumn:name="VM",type=string,JSONPath=`.spec.vmName`,priority=1
// +kubebuilder:printcolumn:name="ProviderID",type=string,JSONPath=`.spec.providerID`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type VSphereMachine struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   VSphereMachineSpec   `json:"spec"`
	Status VSphereMachineStatus `json:"status,omitempty"`
}

// VSphereMachineList is a list of VSphereMachines.
//
// +kubebuilder:object:root=true
type VSphereMachineList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []VSphereMachine `json:"items"`
}

func init() {
	SchemeBuilder.Register(&VSphereMachine{}, &VSphereMachineList{})
}
