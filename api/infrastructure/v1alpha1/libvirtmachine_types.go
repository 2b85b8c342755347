package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
)

// BootSourceKind is the shape of a machine's OS disk.
// +kubebuilder:validation:Enum=backingVolume;installMedia
type BootSourceKind string

// Boot source kinds.
const (
	// BootBackingVolume creates a qcow2 overlay over the imported image.
	BootBackingVolume BootSourceKind = "backingVolume"
	// BootInstallMedia creates an empty disk and attaches the image as a boot CD-ROM.
	BootInstallMedia BootSourceKind = "installMedia"
)

// ProviderReference names the Provider a machine runs on.
type ProviderReference struct {
	// name of the Provider.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
	// namespace of the Provider; unset means the machine's namespace (an empty string is
	// refused: the admission policies and the provider must read one Provider from it). The
	// provider serves a machine of another namespace only while its Provider's
	// allowedNamespaces admits that namespace.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +optional
	Namespace string `json:"namespace,omitempty"`
}

// ProviderKey is the namespace and name of the machine's Provider, the namespace defaulted to
// the machine's own.
// Unplaced (no providerRef yet), its name is empty and no Provider has it.
func (m *LibvirtMachine) ProviderKey() types.NamespacedName {
	if m.Spec.ProviderRef == nil {
		return types.NamespacedName{Namespace: m.Namespace}
	}
	ns := m.Spec.ProviderRef.Namespace
	if ns == "" {
		ns = m.Namespace
	}
	return types.NamespacedName{Namespace: ns, Name: m.Spec.ProviderRef.Name}
}

// LibvirtMachineSpec is one libvirt domain and its volumes.
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.providerRef) || has(self.providerRef)",message="spec.providerRef cannot be removed once set"
// +kubebuilder:validation:XValidation:rule="!has(self.domainName) || self.disks.all(d, size(self.domainName) + size(d.name) + 7 <= 200)",message="domainName and disks[].name make a volume name <domainName>-<disk>.qcow2 longer than 200 characters"
type LibvirtMachineSpec struct {
	// providerID is libvirt://<provider-name>/<domain-uuid>; the provider chooses the UUID and
	// sets it with its finalizer, before the domain is first defined.
	// +optional
	// +kubebuilder:validation:MaxLength=512
	ProviderID string `json:"providerID,omitempty"`
	// failureDomain the scheduler chose (the Provider's name).
	// +optional
	// +kubebuilder:validation:MaxLength=256
	FailureDomain string `json:"failureDomain,omitempty"`
	// providerRef names the Provider: in the machine's namespace, or in providerRef.namespace
	// when that Provider's allowedNamespaces admits the machine's namespace. Immutable: what a
	// machine's status records (its domain, volumes and accepted boot volume) was made on that
	// Provider's host, and another Provider must never inherit it as its own. Its one admitted
	// change is a live migration's handover (docs/adr/0154-live-migration-peer-to-peer-over-tls.md):
	// the update that removes spec.migration after the provider reported it Succeeded sets
	// providerRef to that request's targetProvider, exactly as written there. Unset only on a
	// machine Cluster API made from a LibvirtMachineTemplate without one: banlieue-controller
	// sets it once, to the owner Machine's failure domain (docs/adr/0144-failure-domain-placement.md).
	// +optional
	ProviderRef *ProviderReference `json:"providerRef,omitempty"`
	// pool is the storage pool holding every volume of the machine.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=200
	Pool string `json:"pool"`
	// domainName of the libvirt domain: <vm-namespace>-<vm-name>, as banlieue-controller sets
	// it. Unset (a machine Cluster API made from a LibvirtMachineTemplate), the provider sets it
	// once to <namespace>-<name> (docs/adr/0136-cluster-api-machines.md).
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=190
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9][A-Za-z0-9._-]*$`
	DomainName string `json:"domainName,omitempty"`
	// bootSource is what the OS disk is made from.
	BootSource BootSource `json:"bootSource"`
	// vcpus of the domain.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=256
	VCPUs int32 `json:"vcpus"`
	// memoryMiB of the domain.
	// +kubebuilder:validation:Minimum=128
	// +kubebuilder:validation:Maximum=4194304
	MemoryMiB int32 `json:"memoryMiB"`
	// firmware of the domain; efi lets libvirt choose the loader and a per-domain varstore.
	Firmware banlieuev1.Firmware `json:"firmware"`
	// machineType, e.g. q35; unset lets libvirt choose.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9._-]+$`
	MachineType string `json:"machineType,omitempty"`
	// tpmEnabled attaches an emulated TPM 2.0 (tpm-crb, swtpm).
	// +optional
	TPMEnabled bool `json:"tpmEnabled,omitempty"`
	// consoleLog is where the serial console is recorded besides its live stream: Host (unset
	// means Host) appends it to <domainName>-serial.log in the host's QEMU log directory, None
	// writes nothing on the host.
	// +optional
	ConsoleLog banlieuev1.ConsoleLog `json:"consoleLog,omitempty"`
	// disks of the domain; the first is the OS disk.
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=32
	Disks []LibvirtDisk `json:"disks"`
	// network interfaces of the domain.
	// +optional
	// +kubebuilder:validation:MaxItems=16
	// +listType=map
	// +listMapKey=name
	Network []LibvirtNetworkInterface `json:"network,omitempty"`
	// userDataSecretRef names the Secret, in this machine's namespace, that holds the rendered
	// cloud-init user-data. banlieue-controller writes it, controlled by this machine (an owner
	// reference), so user-data never sits in clear in a custom resource; the provider reads it
	// only when that owner reference is there. Unset: the guest gets an empty user-data.
	// +optional
	UserDataSecretRef *banlieuev1.LocalObjectReference `json:"userDataSecretRef,omitempty"`
	// userDataHash is the salted SHA-256 of the user-data in userDataSecretRef, in hex. A change
	// of the user-data changes it, and so the machine's generation, without revealing the
	// content; the provider seeds a guest only from a Secret that matches it.
	// +optional
	// +kubebuilder:validation:Pattern=`^[0-9a-f]{64}$`
	// +kubebuilder:validation:MaxLength=64
	UserDataHash string `json:"userDataHash,omitempty"`
	// desiredPowerState of the domain.
	// +optional
	// +kubebuilder:default=PoweredOn
	DesiredPowerState banlieuev1.PowerState `json:"desiredPowerState,omitempty"`
	// powerOffMode is how PoweredOff and a restart reach the guest: TrySoft (the default) asks
	// the guest agent, else presses the ACPI power button, then destroys after powerOffTimeout;
	// Soft asks only; Hard destroys at once (a power cut). Teardown always destroys.
	// +optional
	// +kubebuilder:default=TrySoft
	PowerOffMode banlieuev1.PowerOffMode `json:"powerOffMode,omitempty"`
	// powerOffTimeout is how long TrySoft waits after the first press before destroying the
	// domain. Default 2m; between 1s and 30m.
	// +optional
	// +kubebuilder:default="2m"
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('1s') && duration(self) <= duration('30m')",message="powerOffTimeout must be between 1s and 30m"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	PowerOffTimeout *metav1.Duration `json:"powerOffTimeout,omitempty"`
	// nextRestartTime asks for one restart when it is later than status.lastRestartTime.
	// +optional
	NextRestartTime *metav1.Time `json:"nextRestartTime,omitempty"`
	// migration asks the provider to move the running domain live to another Provider's host;
	// banlieue-controller writes it for a VirtualMachineMigration, and sets abort (timeout,
	// cancel, the VM deleted) or removes it once the migration is final, the handover (which
	// also moves providerRef) after a Succeeded report. The target Provider's provider prepares
	// its host, the source's runs the move (docs/guides/libvirt-provider.md, "Live migration").
	// +optional
	Migration *LibvirtMachineMigration `json:"migration,omitempty"`
	// snapshots are the VirtualMachineSnapshots whose layers the machine keeps, oldest first;
	// banlieue-controller writes them. A name added asks the provider to take it, a name
	// removed to merge its layer away (docs/guides/libvirt-provider.md, "Snapshots and restores").
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=8
	Snapshots []LibvirtMachineSnapshot `json:"snapshots,omitempty"`
	// restore asks the provider to bring the disks back to one of spec.snapshots: the domain
	// stopped, the later layers dropped, a new top made over the snapshot's, the domain
	// redefined and started as desiredPowerState says. banlieue-controller writes it for a
	// VirtualMachineRestore and removes it once the restore is final.
	// +optional
	Restore *LibvirtMachineRestore `json:"restore,omitempty"`
}

// LibvirtMachineMigration is the controller's request for one live move of the machine.
type LibvirtMachineMigration struct {
	// migrationName is the VirtualMachineMigration, in the machine's namespace, the move is for;
	// the provider reports its progress under the same name.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	MigrationName string `json:"migrationName"`
	// targetProvider is the Provider whose host receives the domain.
	TargetProvider ProviderReference `json:"targetProvider"`
	// targetFailureDomain is the failure domain the scheduler chose on the target Provider.
	// +optional
	// +kubebuilder:validation:MaxLength=256
	TargetFailureDomain string `json:"targetFailureDomain,omitempty"`
	// targetPool is the storage pool on the target Provider's host the machine's volumes move
	// into (the target's mapping of the VM's storage class); unset means spec.pool.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	TargetPool string `json:"targetPool,omitempty"`
	// abort asks the provider to abort the move (DOMAIN_ABORT_JOB on the source) and leave the
	// domain running on its source.
	// +optional
	Abort bool `json:"abort,omitempty"`
}

// LibvirtMachineMigrationTargetPhase is the target Provider's progress preparing its host.
// +kubebuilder:validation:Enum=Preparing;Prepared;Received;Failed
// +kubebuilder:validation:MaxLength=32
type LibvirtMachineMigrationTargetPhase string

// Target-side migration phases.
const (
	// MachineMigrationTargetPreparing: the target's provider records and creates the volumes.
	MachineMigrationTargetPreparing LibvirtMachineMigrationTargetPhase = "Preparing"
	// MachineMigrationTargetPrepared: every recorded volume exists on the target host: the
	// source's provider may run the move.
	MachineMigrationTargetPrepared LibvirtMachineMigrationTargetPhase = "Prepared"
	// MachineMigrationTargetReceived: while the source reports the move Migrating, the target
	// host runs the machine's domain (its name and status.domainUUID) with no incoming job: the
	// copy is over, as a source provider restarted mid-move cannot see from its host alone.
	MachineMigrationTargetReceived LibvirtMachineMigrationTargetPhase = "Received"
	// MachineMigrationTargetFailed: the target cannot receive the machine; message says why.
	MachineMigrationTargetFailed LibvirtMachineMigrationTargetPhase = "Failed"
)

// LibvirtMachineMigrationTargetStatus is the target Provider's record of what it prepared on
// its host for the move spec.migration asks for, written by that Provider's provider alone
// (field manager banlieue.io/provider-libvirt-migration-target, and the admission policy
// banlieue-provider-writes), since the rest of the machine is the source Provider's until the
// handover.
type LibvirtMachineMigrationTargetStatus struct {
	// migrationName is the spec.migration.migrationName this record is for.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	MigrationName string `json:"migrationName"`
	// provider is the target Provider that prepared its host.
	Provider ProviderReference `json:"provider"`
	// pool on the target host the volumes are in.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Pool string `json:"pool"`
	// phase of the target's preparation.
	Phase LibvirtMachineMigrationTargetPhase `json:"phase"`
	// poolPath is pool's directory on the target host, set with Prepared: the source maps
	// each disk of the domain's definition to the same volume name there.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	PoolPath string `json:"poolPath,omitempty"`
	// uri is the target's libvirtd as the source's libvirtd dials it for a peer-to-peer move
	// (the target Provider's spec.connection.endpoint), set with Prepared.
	// +optional
	// +kubebuilder:validation:MaxLength=512
	URI string `json:"uri,omitempty"`
	// address is where the target's QEMU listens for the migration and NBD streams (the
	// endpoint's host), set with Prepared.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Address string `json:"address,omitempty"`
	// volumes are the names of the volumes the target's provider created in pool for the move,
	// each recorded before it was created: the target deletes exactly these should the move
	// not happen, and adopts them after the handover.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=200
	Volumes []string `json:"volumes,omitempty"`
	// reason is, for Failed, the documented reason (BaseImageMissing, TargetVolumeExists,
	// TargetPreparationFailed).
	// +optional
	// +kubebuilder:validation:MaxLength=64
	Reason string `json:"reason,omitempty"`
	// message says, for Failed, what the target could not prepare and the host's error.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Message string `json:"message,omitempty"`
}

// LibvirtMachineMigrationPhase is the provider's progress of a move.
// +kubebuilder:validation:Enum=PreparingTarget;Migrating;Succeeded;Failed;Aborted
// +kubebuilder:validation:MaxLength=32
type LibvirtMachineMigrationPhase string

// Provider-side migration phases.
const (
	MachineMigrationPreparingTarget LibvirtMachineMigrationPhase = "PreparingTarget"
	MachineMigrationMigrating       LibvirtMachineMigrationPhase = "Migrating"
	MachineMigrationSucceeded       LibvirtMachineMigrationPhase = "Succeeded"
	MachineMigrationFailed          LibvirtMachineMigrationPhase = "Failed"
	MachineMigrationAborted         LibvirtMachineMigrationPhase = "Aborted"
)

// LibvirtMachineMigrationStatus is the provider's report of the move spec.migration asks for.
type LibvirtMachineMigrationStatus struct {
	// migrationName is the spec.migration.migrationName this report is for.
	// +kubebuilder:validation:MaxLength=253
	MigrationName string `json:"migrationName"`
	// phase of the move on the hosts.
	Phase LibvirtMachineMigrationPhase `json:"phase"`
	// message says, for Failed, which step failed and the host's error.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Message string `json:"message,omitempty"`
	// downtimeMilliseconds the guest was paused, read from the destination's completed job.
	// +optional
	// +kubebuilder:validation:Minimum=0
	DowntimeMilliseconds *int64 `json:"downtimeMilliseconds,omitempty"`
	// totalMilliseconds the move took, read from the destination's completed job.
	// +optional
	// +kubebuilder:validation:Minimum=0
	TotalMilliseconds *int64 `json:"totalMilliseconds,omitempty"`
}

// BootSource is the volume the OS disk comes from.
type BootSource struct {
	// kind of boot source.
	// +kubebuilder:default=backingVolume
	Kind BootSourceKind `json:"kind"`
	// volume name in the pool: the backing image or the installer medium.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=200
	Volume string `json:"volume"`
}

// DiskBus is a disk's bus.
// +kubebuilder:validation:Enum=virtio;scsi;sata
type DiskBus string

// Disk buses.
const (
	BusVirtio DiskBus = "virtio"
	BusSCSI   DiskBus = "scsi"
	BusSATA   DiskBus = "sata"
)

// LibvirtDisk is one disk of the domain.
type LibvirtDisk struct {
	// name of the disk; the volume is <domainName>-<name>.qcow2.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9._-]+$`
	Name string `json:"name"`
	// sizeGiB of the disk; it may grow, never shrink. A larger size grows the volume, live while
	// the domain runs.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65536
	// +kubebuilder:validation:XValidation:rule="self >= oldSelf",message="disks[].sizeGiB must not shrink: shrinking a disk is refused, as it would lose the data past the new size"
	SizeGiB int32 `json:"sizeGiB"`
	// bus of the disk.
	// +optional
	// +kubebuilder:default=virtio
	Bus DiskBus `json:"bus,omitempty"`
}

// NetworkSourceKind is what an interface attaches to.
// +kubebuilder:validation:Enum=network;bridge
type NetworkSourceKind string

// Network source kinds.
const (
	SourceNetwork NetworkSourceKind = "network"
	SourceBridge  NetworkSourceKind = "bridge"
)

// NetworkSource is a libvirt managed network or a host bridge.
type NetworkSource struct {
	// kind of source.
	// +optional
	// +kubebuilder:default=network
	Kind NetworkSourceKind `json:"kind,omitempty"`
	// name of the network or bridge.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=200
	Name string `json:"name"`
}

// LibvirtNetworkInterface is one interface of the domain.
type LibvirtNetworkInterface struct {
	// name of the interface (the class interface's name).
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=15
	Name string `json:"name"`
	// source the interface attaches to.
	Source NetworkSource `json:"source"`
	// model of the virtual NIC.
	// +optional
	// +kubebuilder:default=virtio
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9_-]+$`
	// +kubebuilder:validation:MaxLength=32
	Model string `json:"model,omitempty"`
	// macAddress of the NIC; unset lets libvirt generate one.
	// +optional
	// +kubebuilder:validation:Pattern=`^([0-9A-Fa-f]{2}:){5}[0-9A-Fa-f]{2}$`
	// +kubebuilder:validation:MaxLength=17
	MACAddress string `json:"macAddress,omitempty"`
	// ipam of the interface.
	// +optional
	IPAM banlieuev1.IpamSpec `json:"ipam,omitempty"`
}

// AddressSource is where a machine's addresses came from.
// +kubebuilder:validation:Enum=guestAgent;dhcpLease;arpTable
type AddressSource string

// Address sources.
const (
	AddressFromGuestAgent AddressSource = "guestAgent"
	AddressFromDHCPLease  AddressSource = "dhcpLease"
	AddressFromARPTable   AddressSource = "arpTable"
)

// LibvirtMachineStatus is what the provider observed of the domain.
type LibvirtMachineStatus struct {
	// initialization.provisioned is true while the domain runs.
	// +optional
	Initialization *banlieuev1.InitializationStatus `json:"initialization,omitempty"`
	// failureDomain copied from the spec.
	// +optional
	// +kubebuilder:validation:MaxLength=256
	FailureDomain string `json:"failureDomain,omitempty"`
	// addresses of the guest (InternalIP; loopback and link-local filtered out).
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=32
	Addresses []banlieuev1.MachineAddress `json:"addresses,omitempty"`
	// guestInstalled is sticky once true.
	// +optional
	GuestInstalled *bool `json:"guestInstalled,omitempty"`
	// installMediaDetached is sticky once true; absent for backingVolume machines.
	// +optional
	InstallMediaDetached *bool `json:"installMediaDetached,omitempty"`
	// domainUuid in canonical 36-character form.
	// +optional
	// +kubebuilder:validation:MaxLength=36
	DomainUUID string `json:"domainUuid,omitempty"`
	// observedPowerState of the domain.
	// +optional
	ObservedPowerState banlieuev1.PowerState `json:"observedPowerState,omitempty"`
	// powerOffRequestedAt is when the provider asked the guest to shut down (its agent, else the
	// ACPI power button) for the power-off under way (Soft, TrySoft); TrySoft's timeout counts
	// from it, across provider restarts. Cleared once the domain is off or PoweredOff is no
	// longer asked for.
	// +optional
	PowerOffRequestedAt *metav1.Time `json:"powerOffRequestedAt,omitempty"`
	// lastRestartTime is the spec.nextRestartTime the domain last restarted (or started) for.
	// +optional
	LastRestartTime *metav1.Time `json:"lastRestartTime,omitempty"`
	// addressSource the addresses came from.
	// +optional
	AddressSource AddressSource `json:"addressSource,omitempty"`
	// volumes are the names of the volumes this machine created in spec.pool, each recorded
	// before it was created. They are the only volumes the provider reuses or deletes for the
	// machine: teardown deletes all of them, including disks no longer in the spec, and a volume
	// of a needed name that is not listed here belongs to someone else (VolumeNameConflict).
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=200
	Volumes []string `json:"volumes,omitempty"`
	// diskSizes are the sizes each disk of the machine is known to have, by disk name: the size
	// it was created at or last grown to. A spec.disks[].sizeGiB above its entry makes the
	// provider grow the disk: the volume while the domain is off, the guest's block device live
	// while it runs (docs/guides/libvirt-provider.md, "Growing a disk").
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=32
	DiskSizes []DiskSize `json:"diskSizes,omitempty"`
	// bootVolume is the spec.bootSource.volume the provider last accepted for this machine:
	// one a VMImage row of its Provider resolved to when the provider checked it, before it
	// made or changed anything on the host. It stays granted while the row is not ready (a host
	// outage) or has moved to a rebuilt artifact whose old base still backs the machine
	// (docs/security.md, "LibvirtMachine authority").
	// +optional
	// +kubebuilder:validation:MaxLength=200
	BootVolume string `json:"bootVolume,omitempty"`
	// tpmAttached is true when the domain has a vTPM.
	// +optional
	TPMAttached *bool `json:"tpmAttached,omitempty"`
	// conditions: Ready and GuestReady, and DisksGrown while a disk could not be grown.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=32
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// observedGeneration is the generation the status was computed for.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// migration is the source provider's report of the live move spec.migration asks for
	// (docs/guides/libvirt-provider.md, "Live migration").
	// +optional
	Migration *LibvirtMachineMigrationStatus `json:"migration,omitempty"`
	// migrationTarget is the target Provider's record of what it prepared on its host for the
	// move spec.migration asks for; the one field of the machine that Provider's provider
	// writes before the handover.
	// +optional
	MigrationTarget *LibvirtMachineMigrationTargetStatus `json:"migrationTarget,omitempty"`
	// snapshots are the provider's record of each snapshot's layers, written before the layers
	// are created, so a provider restarted mid-way finds what it made; teardown deletes every
	// layer recorded here (docs/guides/libvirt-provider.md, "Snapshots and restores").
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=16
	Snapshots []LibvirtMachineSnapshotStatus `json:"snapshots,omitempty"`
	// restore is the provider's report of the restore spec.restore asks for.
	// +optional
	Restore *LibvirtMachineRestoreStatus `json:"restore,omitempty"`
}

// DiskSize is the size one disk of the machine is known to have.
type DiskSize struct {
	// name of the disk in spec.disks.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=32
	Name string `json:"name"`
	// sizeGiB the disk has.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65536
	SizeGiB int32 `json:"sizeGiB"`
}

// LibvirtMachine is one libvirt domain, realised by the libvirt provider. The API server selects
// machines by spec.providerRef.name (kubectl get libvirtmachines -A --field-selector
// spec.providerRef.name=<provider>), as the provider of one Provider watches them, and by
// spec.migration.targetProvider.name, as it watches the machines moving to it.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.spec.providerRef) || !has(self.spec.providerRef) || (self.spec.providerRef.name == oldSelf.spec.providerRef.name && (has(self.spec.providerRef.__namespace__) == has(oldSelf.spec.providerRef.__namespace__) && (!has(self.spec.providerRef.__namespace__) || self.spec.providerRef.__namespace__ == oldSelf.spec.providerRef.__namespace__))) || (has(oldSelf.spec.migration) && !has(self.spec.migration) && self.spec.providerRef.name == oldSelf.spec.migration.targetProvider.name && (has(self.spec.providerRef.__namespace__) == has(oldSelf.spec.migration.targetProvider.__namespace__) && (!has(self.spec.providerRef.__namespace__) || self.spec.providerRef.__namespace__ == oldSelf.spec.migration.targetProvider.__namespace__)) && has(self.status) && has(self.status.migration) && self.status.migration.migrationName == oldSelf.spec.migration.migrationName && self.status.migration.phase == 'Succeeded')",message="providerRef is immutable: delete the machine and create it on the other Provider; only a live migration's handover moves it, in the update that removes a spec.migration the provider reported Succeeded, to exactly that request's targetProvider",fieldPath=".spec.providerRef"
// +kubebuilder:selectablefield:JSONPath=".spec.providerRef.name"
// +kubebuilder:selectablefield:JSONPath=".spec.migration.targetProvider.name"
// +kubebuilder:metadata:labels="cluster.x-k8s.io/v1beta2=v1alpha1"
// +kubebuilder:resource:scope=Namespaced,shortName=blvm,categories=banlieue
// +kubebuilder:printcolumn:name="Provider",type=string,JSONPath=`.spec.providerRef.name`
// +kubebuilder:printcolumn:name="Provisioned",type=boolean,JSONPath=`.status.initialization.provisioned`
// +kubebuilder:printcolumn:name="Power",type=string,JSONPath=`.status.observedPowerState`
// +kubebuilder:printcolumn:name="Domain",type=string,JSONPath=`.spec.domainName`,priority=1
// +kubebuilder:printcolumn:name="ProviderID",type=string,JSONPath=`.spec.providerID`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type LibvirtMachine struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   LibvirtMachineSpec   `json:"spec"`
	Status LibvirtMachineStatus `json:"status,omitempty"`
}

// LibvirtMachineList is a list of LibvirtMachines.
//
// +kubebuilder:object:root=true
type LibvirtMachineList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []LibvirtMachine `json:"items"`
}

func init() {
	SchemeBuilder.Register(&LibvirtMachine{}, &LibvirtMachineList{})
}
