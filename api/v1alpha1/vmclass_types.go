package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// VMClassSpec is the hardware shape shared by the VMs of a class.
type VMClassSpec struct {
	// hardware of each VM.
	Hardware ClassHardware `json:"hardware"`
	// network interfaces of each VM; a class may have none.
	// +optional
	Network ClassNetwork `json:"network,omitempty"`
	// firmware of each VM. efi-secure requires the failure domain feature efiSecureBoot.
	// +optional
	// +kubebuilder:default=efi
	Firmware Firmware `json:"firmware,omitempty"`
	// features the failure domain must advertise.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MaxLength=63
	Features []string `json:"features,omitempty"`
	// tpmEnabled attaches an emulated TPM 2.0. It requires the failure domain feature vtpm and
	// an image whose installMode is not immediate.
	// +optional
	TPMEnabled bool `json:"tpmEnabled,omitempty"`
	// consoleLog is where the serial console is recorded besides its live stream (`banlieue
	// console`): Host (unset means Host) appends it to <domain>-serial.log in the host's QEMU log
	// directory, None writes nothing on the host.
	// +optional
	ConsoleLog ConsoleLog `json:"consoleLog,omitempty"`
}

// ClassHardware is CPU, memory and disks.
type ClassHardware struct {
	// cpus of each VM.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=256
	CPUs int32 `json:"cpus"`
	// memoryMiB of each VM.
	// +kubebuilder:validation:Minimum=128
	// +kubebuilder:validation:Maximum=4194304
	MemoryMiB int32 `json:"memoryMiB"`
	// disks of each VM. The first is the OS disk; the rest are blank data disks.
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=32
	Disks []ClassDisk `json:"disks"`
}

// ClassDisk is one disk of a class.
type ClassDisk struct {
	// name of the disk; it is part of the volume name, so it is a short DNS label.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([a-z0-9-]*[a-z0-9])?$`
	Name string `json:"name"`
	// sizeGiB of the disk; it may grow but never shrink. A larger size grows the disk of every
	// VM of the class that does not override it, live while the VM runs.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65536
	// +kubebuilder:validation:XValidation:rule="self >= oldSelf",message="hardware.disks[].sizeGiB must not shrink: shrinking a disk is refused, as it would lose the data past the new size"
	SizeGiB int32 `json:"sizeGiB"`
	// storageClass the disk is placed in; it must be offered by the failure domain.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	StorageClass string `json:"storageClass"`
	// provisioning of the disk's space.
	// +optional
	// +kubebuilder:default=thin
	Provisioning DiskProvisioning `json:"provisioning,omitempty"`
}

// ClassNetwork lists a class's interfaces.
type ClassNetwork struct {
	// interfaces of each VM, in order.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=16
	Interfaces []ClassInterface `json:"interfaces,omitempty"`
}

// ClassInterface is one network interface of a class.
type ClassInterface struct {
	// name of the interface; networkOverrides refer to it.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=15
	Name string `json:"name"`
	// networkClass the interface attaches to; it must be offered by the failure domain.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	NetworkClass string `json:"networkClass"`
	// ipam: {} means DHCP.
	IPAM IpamShape `json:"ipam"`
	// mtu of the interface.
	// +optional
	// +kubebuilder:validation:Minimum=576
	// +kubebuilder:validation:Maximum=65535
	MTU *int32 `json:"mtu,omitempty"`
}

// VMClass is a hardware shape VMs are declared with.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,shortName=bclass,categories=banlieue
// +kubebuilder:printcolumn:name="CPUs",type=integer,JSONPath=`.spec.hardware.cpus`
// +kubebuilder:printcolumn:name="MemoryMiB",type=integer,JSONPath=`.spec.hardware.memoryMiB`
// +kubebuilder:printcolumn:name="Firmware",type=string,JSONPath=`.spec.firmware`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type VMClass struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec VMClassSpec `json:"spec"`
}

// VMClassList is a list of VMClasses.
//
// +kubebuilder:object:root=true
type VMClassList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []VMClass `json:"items"`
}

func init() {
	SchemeBuilder.Register(&VMClass{}, &VMClassList{})
}
