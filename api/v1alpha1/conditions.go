package v1alpha1

// The condition types of banlieue's kinds and the reasons each can carry: the vocabulary the
// roles share (docs/design/roles.md). A reason that several conditions use is declared once,
// under the first. Every reason is explained, with what to do about it, in the troubleshooting
// tables of docs/guides (test/docs holds the two together).

// Condition types.
const (
	// ConditionReady is the aggregate of every kind: true when the object is usable as declared.
	ConditionReady = "Ready"
	// ConditionScheduled says whether a VirtualMachine has a Provider and failure domain.
	ConditionScheduled = "Scheduled"
	// ConditionPlacementValid says whether a scheduled VM still fits where it was placed.
	ConditionPlacementValid = "PlacementValid"
	// ConditionInfrastructureReady mirrors the backend machine's Ready onto its VM.
	ConditionInfrastructureReady = "InfrastructureReady"
	// ConditionGuestReady says whether the guest announced itself (cloud-init phoned home).
	ConditionGuestReady = "GuestReady"
	// ConditionDisksGrown is on a VirtualMachine and its machine only while a disk could not
	// be grown to its size; its reasons are the backend's.
	ConditionDisksGrown = "DisksGrown"
	// ConditionProviderReachable says whether the provider could connect to its host.
	ConditionProviderReachable = "ProviderReachable"
	// ConditionBound says whether a VirtualMachineClaim holds a pool member.
	ConditionBound = "Bound"
	// ConditionWarm says whether a VirtualMachinePool has its warm members ready.
	ConditionWarm = "Warm"
	// ConditionCapacity says whether a VirtualMachinePool can grow to what it is asked.
	ConditionCapacity = "Capacity"
)

// Reasons shared by several conditions and kinds.
const (
	// ReasonReconciled: the condition holds; the object is as declared.
	ReasonReconciled = "Reconciled"
	// ReasonPending: work has not started yet (an image build queued, a machine not reported).
	ReasonPending = "Pending"
	// ReasonBuildFailed: the image build failed; its message carries the build's error.
	ReasonBuildFailed = "BuildFailed"
	// ReasonSourceRefused: the image source broke one of the build's limits or its transport
	// policy; the message names the limit or rule and the value seen. Retrying cannot help.
	ReasonSourceRefused = "SourceRefused"
)

// VirtualMachine Ready and InfrastructureReady reasons.
const (
	// ReasonScheduling: the VM waits for a placement.
	ReasonScheduling = "Scheduling"
	// ReasonPlacementInvalid: the VM no longer fits its placement (see PlacementValid).
	ReasonPlacementInvalid = "PlacementInvalid"
	// ReasonInfrastructureNotReady: the backend machine exists but is not Ready.
	ReasonInfrastructureNotReady = "InfrastructureNotReady"
	// ReasonInfraBuildFailed: the VM's backend machine cannot be built from its class and image.
	ReasonInfraBuildFailed = "InfraBuildFailed"
	// ReasonDeleting: the VM's deletion waits for its machines to go.
	ReasonDeleting = "Deleting"
	// ReasonImageClassMismatch: the VM's class and image cannot go together.
	ReasonImageClassMismatch = "ImageClassMismatch"
	// ReasonUserDataNotOptedIn: the VM's spec.userData.secretRef names a Secret that does not
	// carry the label banlieue.io/user-data: "true", so it is not copied into the guest.
	ReasonUserDataNotOptedIn = "UserDataNotOptedIn"
	// ReasonUserDataConflict: the name of the VM's per-machine user-data Secret is taken by a
	// Secret banlieue does not own; it is left alone.
	ReasonUserDataConflict = "UserDataConflict"
	// ReasonImageSourceUnsupported: the VM's image has no source its Provider's class can use
	// (for vsphere: a Template source whose ref is an inventory path, with installMode
	// immediate); the message names the field to change. No machine is built.
	ReasonImageSourceUnsupported = "ImageSourceUnsupported"
)

// VirtualMachine Scheduled reasons.
const (
	// ReasonScheduled: a Provider and failure domain were chosen.
	ReasonScheduled = "Scheduled"
	// ReasonNoProviderMatched: no Provider of the VM's namespace, nor any shared with it, matches
	// its selector.
	ReasonNoProviderMatched = "NoProviderMatched"
	// ReasonNamespaceNotAllowed: the only Providers matching the VM's providerSelector are in
	// other namespaces and their allowedNamespaces do not admit the VM's namespace (the
	// message names each Provider and its rule). The libvirt provider sets it on the Ready
	// condition of a LibvirtMachine whose namespace its Provider does not admit, and makes no
	// host call for it.
	ReasonNamespaceNotAllowed = "NamespaceNotAllowed"
	// ReasonNoFailureDomainMatched: no failure domain of a matching Provider fits.
	ReasonNoFailureDomainMatched = "NoFailureDomainMatched"
	// ReasonImageNotReady: the VM's image is not ready on any matching Provider.
	ReasonImageNotReady = "ImageNotReady"
	// ReasonFirmwareUnsupported: no matching Provider offers the class's firmware.
	ReasonFirmwareUnsupported = "FirmwareUnsupported"
	// ReasonTpmUnsupported: the class asks for a vTPM no matching Provider declares.
	ReasonTpmUnsupported = "TpmUnsupported"
	// ReasonAntiAffinityUnsatisfied: every candidate already holds a VM the VM must avoid.
	ReasonAntiAffinityUnsatisfied = "AntiAffinityUnsatisfied"
	// ReasonInsufficientCapacity: no failure domain left by the other filters has the free
	// CPUs or memory (after its Provider's overcommit, counting the VMs placed there) to hold
	// the VM; the message names the resource, the need and the best host's free amount.
	ReasonInsufficientCapacity = "InsufficientCapacity"
	// ReasonProviderUnschedulable: every Provider left by the other filters is cordoned
	// (spec.unschedulable).
	ReasonProviderUnschedulable = "ProviderUnschedulable"
)

// VirtualMachine PlacementValid reasons: what changed under a placed VM.
const (
	// ReasonProviderChanged: the VM's Provider no longer matches it.
	ReasonProviderChanged = "ProviderChanged"
	// ReasonProviderDraining: the VM's Provider is being drained and the drain is moving the
	// VM to another one.
	ReasonProviderDraining = "ProviderDraining"
	// ReasonNoHostFits: the VM's Provider is being drained and no other Provider can hold the
	// VM; the message says why, and the VM stays where it is.
	ReasonNoHostFits = "NoHostFits"
	// ReasonFailureDomainChanged: the VM's failure domain no longer matches it.
	ReasonFailureDomainChanged = "FailureDomainChanged"
	// ReasonStorageMappingChanged: the Provider maps the VM's storage class elsewhere now.
	ReasonStorageMappingChanged = "StorageMappingChanged"
	// ReasonNetworkMappingChanged: the Provider maps the VM's network class elsewhere now.
	ReasonNetworkMappingChanged = "NetworkMappingChanged"
)

// VMImage Ready reasons (the aggregate over the per-Provider rows).
const (
	// ReasonNoProviders: no Provider has reported a row for the image yet.
	ReasonNoProviders = "NoProviders"
	// ReasonNotReady: some Provider's row is not ready; the message names it.
	ReasonNotReady = "NotReady"
	// ReasonBuilding: the imagebuilder is building the image's artifact.
	ReasonBuilding = "Building"
)

// Reasons of a VMImage's per-Provider row and its failure domains.
const (
	// ReasonBuildPending: the row waits for the image's build to finish.
	ReasonBuildPending = "BuildPending"
	// ReasonNoFailureDomains: the Provider declares no failure domain to import into.
	ReasonNoFailureDomains = "NoFailureDomains"
	// ReasonImporting: an import Job is copying the artifact onto the host.
	ReasonImporting = "Importing"
	// ReasonImportFailed: the import Job failed; its message carries the Job's error.
	ReasonImportFailed = "ImportFailed"
	// ReasonJobsNotGranted: the provider may not read its import Jobs in the build namespace:
	// its ProviderClass lacks the batch/jobs additionalRules. The message names the grant.
	ReasonJobsNotGranted = "JobsNotGranted"
	// ReasonUnsupportedSourceKind: the image's source kind is not one this backend imports.
	ReasonUnsupportedSourceKind = "UnsupportedSourceKind"
	// ReasonVolumeNotFound: the volume the source names does not exist on the host.
	ReasonVolumeNotFound = "VolumeNotFound"
	// ReasonTemplateNotFound: the inventory path a Template source names is not a virtual
	// machine template in the Provider's vCenter.
	ReasonTemplateNotFound = "TemplateNotFound"
)

// Provider Ready and ProviderReachable reasons.
const (
	// ReasonCapabilitiesIncomplete: the host lacks something the Provider declares.
	ReasonCapabilitiesIncomplete = "CapabilitiesIncomplete"
	// ReasonConnectFailed: the provider could not reach or authenticate to the host.
	ReasonConnectFailed = "ConnectFailed"
	// ReasonCredentialsUnavailable: the credentials Secret or CA ConfigMap cannot be read.
	ReasonCredentialsUnavailable = "CredentialsUnavailable"
)

// ProviderClass Ready reasons.
const (
	// ReasonReady: the class's image and ClusterRole are in place.
	ReasonReady = "Ready"
	// ReasonMissingClusterRole: the ClusterRole the class names does not exist.
	ReasonMissingClusterRole = "MissingClusterRole"
	// ReasonInvalidImage: the class's provider image is not a valid reference.
	ReasonInvalidImage = "InvalidImage"
)

// Event reasons of the operator on a Provider.
const (
	// ReasonWorkloadApplied: the provider's Deployment and RBAC were applied.
	ReasonWorkloadApplied = "WorkloadApplied"
	// ReasonWorkloadPruned: an object the workload no longer needs was deleted.
	ReasonWorkloadPruned = "WorkloadPruned"
	// ReasonWorkloadDeleted: the Provider is gone, and so is its workload.
	ReasonWorkloadDeleted = "WorkloadDeleted"
	// ReasonReconcileSkipped: the Provider or its class is paused.
	ReasonReconcileSkipped = "ReconcileSkipped"
	// ReasonProviderClassNotFound: the Provider names a ProviderClass that does not exist.
	ReasonProviderClassNotFound = "ProviderClassNotFound"
	// ReasonUserDataGrantConflict: the name of the Role or RoleBinding that grants the
	// provider its machines' user-data Secrets in a tenant namespace is taken by an object
	// banlieue does not own; it is left alone and that namespace gets no grant.
	ReasonUserDataGrantConflict = "UserDataGrantConflict"
)

// VirtualMachineClaim Bound reasons.
const (
	// ReasonBound: the claim holds a pool member.
	ReasonBound = "Bound"
	// ReasonNoMemberAvailable: the pool has no ready, unclaimed member now.
	ReasonNoMemberAvailable = "NoMemberAvailable"
	// ReasonPoolNotFound: the claim names a pool that does not exist.
	ReasonPoolNotFound = "PoolNotFound"
	// ReasonMemberLost: the member the claim held is gone.
	ReasonMemberLost = "MemberLost"
	// ReasonReleased: the claim let its member go.
	ReasonReleased = "Released"
	// ReasonExpired: the claim's lifetime ran out.
	ReasonExpired = "Expired"
)

// VirtualMachinePool Warm and Capacity reasons.
const (
	// ReasonWarm: the pool has its warm members ready.
	ReasonWarm = "Warm"
	// ReasonFilling: warm members are still being made ready.
	ReasonFilling = "Filling"
	// ReasonReadinessSignalAbsent: members never report the readiness the pool waits for.
	ReasonReadinessSignalAbsent = "ReadinessSignalAbsent"
	// ReasonAddressRangeExhausted: the pool's address range has no address left.
	ReasonAddressRangeExhausted = "AddressRangeExhausted"
	// ReasonMaxReplicasReached: the pool is at its maxReplicas.
	ReasonMaxReplicasReached = "MaxReplicasReached"
)

// Event reasons of transitions that no condition reason names (docs/guides/libvirt-provider.md,
// "Troubleshooting with events"). A condition that moves is announced under its own reason (for
// example Scheduled or NoProviderMatched on a VM, ConnectFailed on a Provider, ImportFailed on a
// VMImage); these name the rest.
const (
	// ReasonMachineCreated: the controller created the VM's backend machine.
	ReasonMachineCreated = "MachineCreated"
	// ReasonDomainDefined: the provider defined the machine's domain on the host.
	ReasonDomainDefined = "DomainDefined"
	// ReasonDomainStarted: the provider started the machine's domain.
	ReasonDomainStarted = "DomainStarted"
	// ReasonDomainStopped: the provider stopped the machine's domain.
	ReasonDomainStopped = "DomainStopped"
	// ReasonDomainResumed: the provider resumed the machine's suspended domain.
	ReasonDomainResumed = "DomainResumed"
	// ReasonDomainRestarted: the provider restarted the machine's domain for spec.nextRestartTime.
	ReasonDomainRestarted = "DomainRestarted"
	// ReasonDomainDestroyed: the provider tore the machine's domain and volumes down.
	ReasonDomainDestroyed = "DomainDestroyed"
	// ReasonHostReachable: the provider reached and authenticated to its host again.
	ReasonHostReachable = "HostReachable"
	// ReasonImportStarted: the provider started an import Job for the image on its host.
	ReasonImportStarted = "ImportStarted"
	// ReasonImportSucceeded: the image is imported on the provider's host.
	ReasonImportSucceeded = "ImportSucceeded"
	// ReasonBuildStarted: the imagebuilder started the image's build Job.
	ReasonBuildStarted = "BuildStarted"
	// ReasonBuildPublished: the image's artifact is built and published.
	ReasonBuildPublished = "BuildPublished"
)
