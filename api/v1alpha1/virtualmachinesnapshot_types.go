package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// MaxSnapshotsPerVM bounds a VM's snapshots: every one is a layer more in each disk's chain,
// one more lookup on a read that misses the layers above (docs/adr/0155).
const MaxSnapshotsPerVM = 8

// VirtualMachineSnapshotSpec asks for one snapshot of a VM's disks
// (docs/guides/libvirt-provider.md, "Snapshots and restores").
type VirtualMachineSnapshotSpec struct {
	// vmName is the VirtualMachine whose disks are taken, in the snapshot's namespace. Immutable.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="vmName is immutable: create another VirtualMachineSnapshot"
	VMName string `json:"vmName"`
}

// SnapshotPhase is where a VirtualMachineSnapshot is.
// +kubebuilder:validation:Enum=Pending;InProgress;Ready;Failed
type SnapshotPhase string

// Snapshot phases. Failed is final; Ready lasts until the snapshot is deleted.
const (
	// SnapshotPending: not handed to the provider yet (validating, the VM not placed).
	SnapshotPending SnapshotPhase = "Pending"
	// SnapshotInProgress: the provider records and takes the layers.
	SnapshotInProgress SnapshotPhase = "InProgress"
	// SnapshotReady: the layers are taken; the snapshot can be restored.
	SnapshotReady SnapshotPhase = "Ready"
	// SnapshotFailed: refused or failed; Ready's reason names the field or the step.
	SnapshotFailed SnapshotPhase = "Failed"
)

// SnapshotConsistency is how consistent a snapshot's disks are with each other and the guest.
// +kubebuilder:validation:Enum=ApplicationConsistent;CrashConsistent
type SnapshotConsistency string

// Snapshot consistencies.
const (
	// ApplicationConsistent: the guest agent froze the filesystems for the switch.
	ApplicationConsistent SnapshotConsistency = "ApplicationConsistent"
	// CrashConsistent: the disks as a power cut would leave them (no agent could freeze).
	CrashConsistent SnapshotConsistency = "CrashConsistent"
)

// SnapshotDisk is one disk's layer of a snapshot.
type SnapshotDisk struct {
	// name of the disk in the VM's machine.
	// +kubebuilder:validation:MaxLength=32
	Name string `json:"name"`
	// volume is the frozen layer, in the machine's pool, that holds the disk as it was.
	// +kubebuilder:validation:MaxLength=253
	Volume string `json:"volume"`
}

// VirtualMachineSnapshotStatus is the progress and the result of a snapshot.
type VirtualMachineSnapshotStatus struct {
	// phase: Pending, InProgress, then Ready or Failed.
	// +optional
	Phase SnapshotPhase `json:"phase,omitempty"`
	// consistency of the taken disks: ApplicationConsistent when the guest agent froze the
	// filesystems, CrashConsistent otherwise (the agent's refusal in Ready's message).
	// +optional
	Consistency SnapshotConsistency `json:"consistency,omitempty"`
	// disks are the layers the snapshot is made of, in the VM's disk order.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=32
	Disks []SnapshotDisk `json:"disks,omitempty"`
	// creationTime is when the provider took the snapshot.
	// +optional
	CreationTime *metav1.Time `json:"creationTime,omitempty"`
	// conditions: Ready, True once the snapshot is taken; while False its reason is the step
	// the snapshot is at or the one that failed (docs/guides/libvirt-provider.md, "Snapshots and restores").
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=8
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// observedGeneration is the generation the status was computed for.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
}

// VirtualMachineSnapshot is a snapshot of a VirtualMachine's disks, on its host, owned by the
// VM: deleting it merges its layer away, deleting the VM deletes it
// (docs/guides/libvirt-provider.md, "Snapshots and restores").
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Namespaced,shortName=bvms,categories=banlieue
// +kubebuilder:printcolumn:name="VM",type=string,JSONPath=`.spec.vmName`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Consistency",type=string,JSONPath=`.status.consistency`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=='Ready')].reason`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type VirtualMachineSnapshot struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   VirtualMachineSnapshotSpec   `json:"spec"`
	Status VirtualMachineSnapshotStatus `json:"status,omitempty"`
}

// VirtualMachineSnapshotList is a list of VirtualMachineSnapshots.
//
// +kubebuilder:object:root=true
type VirtualMachineSnapshotList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []VirtualMachineSnapshot `json:"items"`
}

// RestoreRunStrategy is what the VM does once its disks are restored.
// +kubebuilder:validation:Enum=AsVM;PoweredOff
type RestoreRunStrategy string

// Restore run strategies.
const (
	// RestoreRunAsVM starts the VM again when its desiredPowerState asks it to run.
	RestoreRunAsVM RestoreRunStrategy = "AsVM"
	// RestorePoweredOff leaves the VM off: the controller sets its desiredPowerState to
	// PoweredOff before the restore.
	RestorePoweredOff RestoreRunStrategy = "PoweredOff"
)

// VirtualMachineRestoreSpec asks for one VM brought back to one of its snapshots.
type VirtualMachineRestoreSpec struct {
	// snapshotName is the VirtualMachineSnapshot, in the restore's namespace, to bring its VM
	// back to. Immutable.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="snapshotName is immutable: create another VirtualMachineRestore"
	SnapshotName string `json:"snapshotName"`
	// runStrategy after the restore: AsVM (the default) starts the VM when its
	// desiredPowerState asks it to run; PoweredOff sets its desiredPowerState to PoweredOff.
	// +optional
	// +kubebuilder:default=AsVM
	RunStrategy RestoreRunStrategy `json:"runStrategy,omitempty"`
}

// RestorePhase is where a VirtualMachineRestore is.
// +kubebuilder:validation:Enum=Pending;InProgress;Succeeded;Failed
type RestorePhase string

// Restore phases. Succeeded and Failed are final.
const (
	RestorePending    RestorePhase = "Pending"
	RestoreInProgress RestorePhase = "InProgress"
	RestoreSucceeded  RestorePhase = "Succeeded"
	RestoreFailed     RestorePhase = "Failed"
)

// Final reports whether p is a phase a restore never leaves.
func (p RestorePhase) Final() bool { return p == RestoreSucceeded || p == RestoreFailed }

// VirtualMachineRestoreStatus is the progress and the result of a restore.
type VirtualMachineRestoreStatus struct {
	// phase: Pending, InProgress, then Succeeded or Failed.
	// +optional
	Phase RestorePhase `json:"phase,omitempty"`
	// vmName is the VM the snapshot was of, the one restored.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	VMName string `json:"vmName,omitempty"`
	// completionTime is when the restore reached a final phase.
	// +optional
	CompletionTime *metav1.Time `json:"completionTime,omitempty"`
	// conditions: Ready, True once the VM's disks are back to the snapshot; while False its
	// reason is the step the restore is at or the one that failed
	// (docs/guides/libvirt-provider.md, "Snapshots and restores").
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=8
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// observedGeneration is the generation the status was computed for.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
}

// VirtualMachineRestore brings a VirtualMachine back to one of its snapshots: the VM stopped,
// the disks reverted, started again as runStrategy says (docs/guides/libvirt-provider.md, "Snapshots and restores").
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Namespaced,shortName=bvmr,categories=banlieue
// +kubebuilder:printcolumn:name="Snapshot",type=string,JSONPath=`.spec.snapshotName`
// +kubebuilder:printcolumn:name="VM",type=string,JSONPath=`.status.vmName`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=='Ready')].reason`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type VirtualMachineRestore struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   VirtualMachineRestoreSpec   `json:"spec"`
	Status VirtualMachineRestoreStatus `json:"status,omitempty"`
}

// VirtualMachineRestoreList is a list of VirtualMachineRestores.
//
// +kubebuilder:object:root=true
type VirtualMachineRestoreList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []VirtualMachineRestore `json:"items"`
}

func init() {
	SchemeBuilder.Register(&VirtualMachineSnapshot{}, &VirtualMachineSnapshotList{},
		&VirtualMachineRestore{}, &VirtualMachineRestoreList{})
}

// VirtualMachineSnapshot and VirtualMachineRestore Ready reasons
// (docs/guides/libvirt-provider.md, "Snapshots and restores"). ReasonVMNotFound and ReasonVMNotPlaced are shared with
// the migration's.
const (
	// ReasonSnapshotInProgress: the provider records and takes the snapshot's layers.
	ReasonSnapshotInProgress = "SnapshotInProgress"
	// ReasonSnapshotTaken: the snapshot is taken and can be restored.
	ReasonSnapshotTaken = "SnapshotTaken"
	// ReasonSnapshotLimitReached: the VM has MaxSnapshotsPerVM snapshots already; this one is
	// refused before it reaches the host.
	ReasonSnapshotLimitReached = "SnapshotLimitReached"
	// ReasonSnapshotsUnsupported: the VM runs on a Provider whose class cannot take snapshots.
	ReasonSnapshotsUnsupported = "SnapshotsUnsupported"
	// ReasonSnapshotFailed: the provider could not take the snapshot; the message names the
	// step and the host's error.
	ReasonSnapshotFailed = "SnapshotFailed"
	// ReasonSnapshotNotFound: spec.snapshotName names no VirtualMachineSnapshot in the
	// restore's namespace.
	ReasonSnapshotNotFound = "SnapshotNotFound"
	// ReasonSnapshotNotReady: the snapshot to restore is not Ready (still being taken, or failed).
	ReasonSnapshotNotReady = "SnapshotNotReady"
	// ReasonSnapshotDoesNotMatch: the VM's disks changed since the snapshot (a disk added,
	// removed or replaced); restoring would lose or mix data, so it is refused.
	ReasonSnapshotDoesNotMatch = "SnapshotDoesNotMatch"
	// ReasonRestoreWaiting: another restore of the same VM is active; this one starts after it.
	ReasonRestoreWaiting = "AnotherRestoreActive"
	// ReasonRestoreInProgress: the provider stops the VM, reverts its disks and starts it again.
	ReasonRestoreInProgress = "RestoreInProgress"
	// ReasonRestored: the VM's disks are back to the snapshot.
	ReasonRestored = "Restored"
	// ReasonRestoreFailed: the provider could not restore; the message names the step and the
	// host's error.
	ReasonRestoreFailed = "RestoreFailed"
)
