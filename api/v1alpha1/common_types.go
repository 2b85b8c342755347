package v1alpha1

// LocalObjectReference names an object in the same namespace (or a cluster-scoped object).
type LocalObjectReference struct {
	// name of the referenced object.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
}

// KeySelector selects one key of a Secret or ConfigMap in the referring object's namespace.
type KeySelector struct {
	// name of the Secret or ConfigMap.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
	// key inside the object. The default depends on the field that holds the selector.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Key string `json:"key,omitempty"`
}

// TypedObjectReference points at an object of any kind.
type TypedObjectReference struct {
	// apiGroup of the referenced kind; empty for the core group.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	APIGroup string `json:"apiGroup,omitempty"`
	// kind of the referenced object.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Kind string `json:"kind"`
	// name of the referenced object.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
	// namespace of the referenced object; empty means the referrer's namespace.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	Namespace string `json:"namespace,omitempty"`
}

// MachineAddressType is the kind of a machine address, as in Cluster API.
// +kubebuilder:validation:Enum=Hostname;ExternalIP;InternalIP;ExternalDNS;InternalDNS
type MachineAddressType string

// Machine address types.
const (
	MachineHostName    MachineAddressType = "Hostname"
	MachineExternalIP  MachineAddressType = "ExternalIP"
	MachineInternalIP  MachineAddressType = "InternalIP"
	MachineExternalDNS MachineAddressType = "ExternalDNS"
	MachineInternalDNS MachineAddressType = "InternalDNS"
)

// MaxMachineAddresses is the most addresses a machine's status lists, as Cluster API's Machine
// does; a guest with more (a Kubernetes node with IPVS holds every Service's address) is reported
// by the first ones its agent lists.
const MaxMachineAddresses = 32

// MachineAddress is one address of a machine.
type MachineAddress struct {
	// type of the address.
	Type MachineAddressType `json:"type"`
	// address itself: an IP literal or a DNS name.
	// +kubebuilder:validation:MaxLength=253
	Address string `json:"address"`
}

// InitializationStatus follows the Cluster API v1beta2 infrastructure contract.
type InitializationStatus struct {
	// provisioned is true once the machine's infrastructure is as its spec asks (for libvirt: the
	// domain is defined with its disks, and runs, or is off when desiredPowerState asks it off).
	// +optional
	Provisioned *bool `json:"provisioned,omitempty"`
}

// PowerState is the power state of a machine.
// +kubebuilder:validation:Enum=PoweredOn;PoweredOff;Suspended
type PowerState string

// Power states.
const (
	PoweredOn  PowerState = "PoweredOn"
	PoweredOff PowerState = "PoweredOff"
	Suspended  PowerState = "Suspended"
)

// PowerOffMode is how a machine is powered off, and restarted, when its spec asks for it.
// +kubebuilder:validation:Enum=Hard;Soft;TrySoft
type PowerOffMode string

// Power-off modes (docs/adr/0118).
const (
	// PowerOffHard destroys the domain: a power cut, the guest loses what it had not flushed.
	PowerOffHard PowerOffMode = "Hard"
	// PowerOffSoft asks the guest once (its agent, else the ACPI power button) and waits for it.
	PowerOffSoft PowerOffMode = "Soft"
	// PowerOffTrySoft asks the same way, then destroys the domain once the timeout has passed.
	PowerOffTrySoft PowerOffMode = "TrySoft"
)

// ConsoleLog is where a machine's serial console is recorded besides its live stream.
// +kubebuilder:validation:Enum=Host;None
type ConsoleLog string

// Console logs (docs/adr/0140).
const (
	// ConsoleLogHost has libvirt's virtlogd append the console to a file in the host's QEMU log
	// directory, so a guest that never networks can be read after the fact.
	ConsoleLogHost ConsoleLog = "Host"
	// ConsoleLogNone records nothing on the host: the console is only what `banlieue console`
	// streams while attached.
	ConsoleLogNone ConsoleLog = "None"
)

// Firmware selects the guest firmware.
// +kubebuilder:validation:Enum=bios;efi;efi-secure
type Firmware string

// Firmware values.
const (
	FirmwareBIOS      Firmware = "bios"
	FirmwareEFI       Firmware = "efi"
	FirmwareEFISecure Firmware = "efi-secure"
)

// DiskProvisioning says how a disk's space is reserved.
// +kubebuilder:validation:Enum=thin;thick;eagerZeroed
type DiskProvisioning string

// Disk provisioning values.
const (
	DiskThin        DiskProvisioning = "thin"
	DiskThick       DiskProvisioning = "thick"
	DiskEagerZeroed DiskProvisioning = "eagerZeroed"
)

// StaticIpamConfig is a fixed address for one interface.
type StaticIpamConfig struct {
	// address is the interface's IP address, without a prefix length.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=45
	// +kubebuilder:validation:XValidation:rule="isIP(self)",message="address must be an IP address without a prefix length"
	Address string `json:"address"`
	// prefix is the prefix length of the interface's subnet.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=128
	Prefix int32 `json:"prefix"`
	// gateway is the default route's next hop.
	// +optional
	// +kubebuilder:validation:MaxLength=45
	// +kubebuilder:validation:XValidation:rule="isIP(self)",message="gateway must be an IP address"
	Gateway string `json:"gateway,omitempty"`
	// nameservers are DNS resolvers' addresses.
	// +optional
	// +kubebuilder:validation:MaxItems=8
	// +kubebuilder:validation:items:MaxLength=45
	// +listType=atomic
	Nameservers []string `json:"nameservers,omitempty"`
	// domain is the DNS search domain.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Domain string `json:"domain,omitempty"`
}

// StaticIpamShape is the part of a static configuration a VMClass may fix for every VM.
type StaticIpamShape struct {
	// prefix is the prefix length of the interface's subnet.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=128
	Prefix *int32 `json:"prefix,omitempty"`
	// gateway is the default route's next hop.
	// +optional
	// +kubebuilder:validation:MaxLength=45
	Gateway string `json:"gateway,omitempty"`
	// nameservers are DNS resolvers' addresses.
	// +optional
	// +kubebuilder:validation:MaxItems=8
	// +kubebuilder:validation:items:MaxLength=45
	// +listType=atomic
	Nameservers []string `json:"nameservers,omitempty"`
	// domain is the DNS search domain.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Domain string `json:"domain,omitempty"`
}

// IpamPoolSource names an address pool (Cluster API IPAM, later).
type IpamPoolSource struct {
	// poolRef is the address pool.
	PoolRef TypedObjectReference `json:"poolRef"`
}

// IpamShape is how a VMClass interface gets its address. The empty object means DHCP.
// +kubebuilder:validation:XValidation:rule="!(has(self.static) && has(self.pool))",message="ipam: set at most one of static and pool"
type IpamShape struct {
	// static fixes the parts of a static configuration shared by every VM of the class; the
	// address itself comes from the VM's networkOverrides.
	// +optional
	Static *StaticIpamShape `json:"static,omitempty"`
	// pool draws the address from an address pool.
	// +optional
	Pool *IpamPoolSource `json:"pool,omitempty"`
}

// IpamSpec is the resolved addressing of one interface of an infrastructure machine.
// +kubebuilder:validation:XValidation:rule="!(has(self.static) && has(self.pool))",message="ipam: set at most one of static and pool"
type IpamSpec struct {
	// static is a fixed address. Neither static nor pool means DHCP.
	// +optional
	Static *StaticIpamConfig `json:"static,omitempty"`
	// pool draws the address from an address pool.
	// +optional
	Pool *IpamPoolSource `json:"pool,omitempty"`
}

// CABundleSource holds the CA certificates that verify a backend's server certificate.
// Exactly one source is set.
// +kubebuilder:validation:XValidation:rule="[has(self.inline), has(self.configMapRef), has(self.secretRef)].filter(x, x).size() == 1",message="caBundle: set exactly one of inline, configMapRef and secretRef"
type CABundleSource struct {
	// inline is a PEM bundle.
	// +optional
	// +kubebuilder:validation:MaxLength=262144
	Inline string `json:"inline,omitempty"`
	// configMapRef selects a ConfigMap key (default ca.crt) in the Provider's namespace.
	// +optional
	ConfigMapRef *KeySelector `json:"configMapRef,omitempty"`
	// secretRef selects a Secret key (default ca.crt) in the Provider's namespace.
	// +optional
	SecretRef *KeySelector `json:"secretRef,omitempty"`
}

// DefaultCAKey is the key read from a CA ConfigMap or Secret when the selector names none.
const DefaultCAKey = "ca.crt"

// DefaultUserDataKey is the key read from a userData Secret or ConfigMap when none is named.
const DefaultUserDataKey = "user-data"
