package v1alpha1

import banlieuev1 "banlieue.io/banlieue/api/v1alpha1"

// A LibvirtMachine carries the condition types of api/v1alpha1 (Ready, GuestReady and
// DisksGrown), which the controller mirrors onto the VM (docs/design/roles.md); these are the
// reasons it adds.

// LibvirtMachine Ready reasons.
const (
	// ReasonDomainRunning: the domain is defined and in the desired power state.
	ReasonDomainRunning = "DomainRunning"
	// ReasonDomainNotRunning: the domain is defined but not in the desired power state yet.
	ReasonDomainNotRunning = "DomainNotRunning"
	// ReasonReconcileFailed: a step against the host failed; the message names the step.
	ReasonReconcileFailed = "ReconcileFailed"
	// ReasonInstallMediaAttached: the install medium is still attached to a deferred install.
	ReasonInstallMediaAttached = "InstallMediaAttached"
	// ReasonDomainNameConflict: a domain of the machine's name exists that this machine did not
	// create (not banlieue's, or another LibvirtMachine's); it is left untouched.
	ReasonDomainNameConflict = "DomainNameConflict"
	// ReasonVolumeNameConflict: a volume the machine would create exists and is not recorded as
	// the machine's own; it is left untouched.
	ReasonVolumeNameConflict = "VolumeNameConflict"
	// ReasonNotPermitted: the machine names a domain, pool, network, bridge or boot volume that
	// its Provider and that Provider's VMImage rows do not grant it; nothing on the host was
	// called.
	ReasonNotPermitted = "NotPermitted"
	// ReasonWaitingForImage: the machine's boot volume is not granted yet, and a VMImage row of
	// its Provider that names it is not ready (an import or a host lookup in progress, or a host
	// outage); nothing on the host was called, and the provider checks again.
	ReasonWaitingForImage = "WaitingForImage"
	// ReasonDomainStartLost: the domain is paused "starting up" and libvirtd refuses to stop it:
	// libvirtd was killed during the start and keeps the start's job for good (docs/reliability.md, B10). Only the host's administrator can clear it; the
	// message says how. The provider does not ask libvirtd to stop the domain again, deletion
	// included, until its state changes.
	ReasonDomainStartLost = "DomainStartLost"
)

// LibvirtMachine Ready reason of host protection (docs/adr/0133).
const (
	// ReasonHostUnavailable: the last connection attempts to the Provider's host failed, and
	// its circuit breaker holds further ones off for a cool-down; nothing was sent to the host,
	// and the machine is looked at again when the cool-down ends. The message names the
	// Provider, the attempts and the last error.
	ReasonHostUnavailable = "HostUnavailable"
)

// LibvirtMachine Ready reasons of a graceful power-off and of suspension (docs/adr/0118); each
// is also the reason of the event announcing it.
const (
	// ReasonShuttingDown: the provider asked the guest to shut down, through its agent or else
	// the ACPI power button (powerOffMode Soft or TrySoft), and waits for it.
	ReasonShuttingDown = "ShuttingDown"
	// ReasonShutdownTimedOut: the guest did not shut down within spec.powerOffTimeout of the
	// button (TrySoft); the domain was destroyed, a power cut.
	ReasonShutdownTimedOut = "ShutdownTimedOut"
	// ReasonDomainSuspended: the domain is suspended (paused), as spec.desiredPowerState asks.
	ReasonDomainSuspended = "DomainSuspended"
)

// LibvirtMachine GuestReady reasons.
const (
	// ReasonGuestAnnounced: the guest phoned home.
	ReasonGuestAnnounced = "GuestAnnounced"
	// ReasonGuestNotAnnounced: the guest has not phoned home yet.
	ReasonGuestNotAnnounced = "GuestNotAnnounced"
)

// VSphereMachine Ready reasons beyond the LibvirtMachine ones it shares (NotPermitted,
// FailureDomainUnknown) and the VM's TpmUnsupported.
const (
	// ReasonUnsupportedSpec: the machine asks for what the vsphere provider does not do yet (disks
	// on several datastores, no vmName); the message names the field. Nothing in vCenter was
	// called.
	ReasonUnsupportedSpec = "UnsupportedSpec"
	// ReasonVMRunning: the virtual machine exists and is in the desired power state.
	ReasonVMRunning = "VMRunning"
	// ReasonVMNotRunning: the virtual machine exists but is not in the desired power state yet.
	ReasonVMNotRunning = "VMNotRunning"
	// ReasonVMNameConflict: a virtual machine of spec.vmName exists in the folder without this
	// machine's proof of owner (banlieue did not create it for this machine); it is left
	// untouched, never adopted, changed or destroyed.
	ReasonVMNameConflict = "VMNameConflict"
	// ReasonToolsNotRunning: powerOffMode Soft needs VMware Tools to ask the guest to shut down,
	// and they are not running; nothing was done.
	ReasonToolsNotRunning = "ToolsNotRunning"
)

// VSphereMachine GuestReady reasons.
const (
	// ReasonToolsReporting: VMware Tools run in the guest and report it.
	ReasonToolsReporting = "ToolsReporting"
	// ReasonToolsNotReporting: VMware Tools do not run in the guest (yet).
	ReasonToolsNotReporting = "ToolsNotReporting"
)

// FinalizerVSphereMachine holds a VSphereMachine until its virtual machine is gone from vCenter.
const FinalizerVSphereMachine = "banlieue.io/vspheremachine"

// ConditionDisksGrown is on a LibvirtMachine only while a disk could not be grown to its
// spec.disks[].sizeGiB; the domain keeps running with the disk at its old size. The controller
// mirrors it onto the VM.
const ConditionDisksGrown = banlieuev1.ConditionDisksGrown

// DisksGrown reasons.
const (
	// ReasonDiskGrowUnsupported: the host cannot grow the disk (its pool type cannot resize a
	// volume, or QEMU cannot resize the disk live); the message names the disk, the sizes and
	// libvirtd's answer. The provider asks again only when the spec changes.
	ReasonDiskGrowUnsupported = "DiskGrowUnsupported"
)

// FinalizerLibvirtMachine holds a LibvirtMachine until its domain and volumes are gone from the
// host.
const FinalizerLibvirtMachine = "banlieue.io/libvirtmachine"

// ConditionPaused is set on a LibvirtMachine owned by a Cluster API Machine, and on a
// LibvirtCluster: True while the object carries the cluster.x-k8s.io/paused annotation or its
// Cluster has spec.paused, when nothing of it is reconciled (docs/adr/0136-cluster-api-machines.md).
const ConditionPaused = "Paused"

// Paused reasons.
const (
	// ReasonPaused: the object or its Cluster is paused; the provider makes no call to the host.
	ReasonPaused = "Paused"
	// ReasonNotPaused: neither is paused.
	ReasonNotPaused = "NotPaused"
)

// LibvirtMachine Ready reasons of a machine owned by a Cluster API Machine.
const (
	// ReasonWaitingForBootstrapData: the owner Machine's spec.bootstrap.dataSecretName is unset,
	// or its Secret is not there (or not granted to the provider) yet; nothing on the host was
	// called, and the provider checks again.
	ReasonWaitingForBootstrapData = "WaitingForBootstrapData"
	// ReasonBootstrapDataRefused: the Secret the owner Machine names is not a bootstrap data
	// Secret of its cluster (type cluster.x-k8s.io/secret, label cluster.x-k8s.io/cluster-name),
	// or holds a format other than cloud-config; it is not used.
	ReasonBootstrapDataRefused = "BootstrapDataRefused"
	// ReasonOwnerMachineMismatch: the machine's controller reference names a Machine that is not
	// there, has another UID, or whose spec.infrastructureRef names another object.
	ReasonOwnerMachineMismatch = "OwnerMachineMismatch"
	// ReasonFailureDomainMismatch: the owner Machine's spec.failureDomain is not the machine's
	// Provider (spec.providerRef.name); the machine is not placed elsewhere.
	ReasonFailureDomainMismatch = "FailureDomainMismatch"
)

// LibvirtMachine Scheduled reasons (the condition type of api/v1alpha1): banlieue-controller
// places a Cluster API machine made from a LibvirtMachineTemplate without providerRef in its
// Machine's failure domain (docs/adr/0144-failure-domain-placement.md). Until it is placed, Ready
// carries the same reason, so the Machine's InfrastructureReady shows it.
const (
	// ReasonFailureDomainUnknown: the owner Machine's spec.failureDomain is none of the failure
	// domains of its Cluster's LibvirtCluster (status.failureDomains); the machine is not placed.
	ReasonFailureDomainUnknown = "FailureDomainUnknown"
	// ReasonNoFailureDomain: the owner Machine names no failure domain and its LibvirtCluster has
	// none to choose from (for a control plane machine: none with controlPlane true), or the
	// Cluster's infrastructure is not a LibvirtCluster; the machine is not placed.
	ReasonNoFailureDomain = "NoFailureDomain"
	// ReasonProviderRefUnset: spec.providerRef is unset on a machine that no Cluster API
	// Machine owns, nor a MachineSet or control plane: nothing places it; set spec.providerRef.
	ReasonProviderRefUnset = "ProviderRefUnset"
)

// LibvirtCluster Ready reasons.
const (
	// ReasonClusterProvisioned: spec.controlPlaneEndpoint is set and every Provider of
	// spec.providers exists.
	ReasonClusterProvisioned = "Provisioned"
	// ReasonWaitingForControlPlaneEndpoint: spec.controlPlaneEndpoint is unset.
	ReasonWaitingForControlPlaneEndpoint = "WaitingForControlPlaneEndpoint"
	// ReasonProviderNotFound: a Provider of spec.providers does not exist (or does not admit the
	// cluster's namespace); it is no failure domain.
	ReasonProviderNotFound = "ProviderNotFound"
)
