package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
)

// LibvirtMachineSnapshot is the controller's request for one snapshot of the machine's disks.
type LibvirtMachineSnapshot struct {
	// name of the VirtualMachineSnapshot, in the machine's namespace; the provider reports the
	// snapshot under the same name.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
	// uid of the VirtualMachineSnapshot: it names the layers (<disk volume>-<uid>), so a
	// snapshot deleted and created again under the same name never reuses a layer.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=36
	UID string `json:"uid"`
}

// LibvirtMachineRestore is the controller's request to bring the disks back to a snapshot.
type LibvirtMachineRestore struct {
	// restoreName is the VirtualMachineRestore the request is for; the provider reports under it.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	RestoreName string `json:"restoreName"`
	// snapshotName is the entry of spec.snapshots to go back to.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	SnapshotName string `json:"snapshotName"`
}

// LibvirtSnapshotPhase is the provider's progress of one snapshot.
// +kubebuilder:validation:Enum=Recorded;Taken;Failed;Deleting
type LibvirtSnapshotPhase string

// Provider-side snapshot phases.
const (
	// SnapshotRecorded: the layers are named in status, and may or may not exist yet.
	SnapshotRecorded LibvirtSnapshotPhase = "Recorded"
	// SnapshotTaken: the layers exist and the snapshot's are frozen beneath the disks' tops.
	SnapshotTaken LibvirtSnapshotPhase = "Taken"
	// SnapshotFailed: the snapshot could not be taken; message says which step.
	SnapshotFailed LibvirtSnapshotPhase = "Failed"
	// SnapshotDeleting: the snapshot's layer is being merged away.
	SnapshotDeleting LibvirtSnapshotPhase = "Deleting"
)

// SnapshotLayer is one disk's layer of a snapshot.
type SnapshotLayer struct {
	// disk is the name in spec.disks.
	// +kubebuilder:validation:MaxLength=32
	Disk string `json:"disk"`
	// volume is the layer's volume in spec.pool: the disk as it was at the snapshot, frozen
	// once the snapshot is taken (writes land in the layer above).
	// +kubebuilder:validation:MaxLength=253
	Volume string `json:"volume"`
	// top is the new layer the snapshot put over volume, the disk's top until a later snapshot.
	// +kubebuilder:validation:MaxLength=253
	Top string `json:"top"`
}

// LibvirtMachineSnapshotStatus is the provider's record of one snapshot.
type LibvirtMachineSnapshotStatus struct {
	// name of the VirtualMachineSnapshot.
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
	// phase of the snapshot on the host.
	Phase LibvirtSnapshotPhase `json:"phase"`
	// consistency the snapshot was taken with.
	// +optional
	Consistency banlieuev1.SnapshotConsistency `json:"consistency,omitempty"`
	// layers of the snapshot, one per disk taken, in spec.disks order.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=32
	Layers []SnapshotLayer `json:"layers,omitempty"`
	// takenAt is when the snapshot was taken.
	// +optional
	TakenAt *metav1.Time `json:"takenAt,omitempty"`
	// message says, for Failed or CrashConsistent, the step or the agent's refusal.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Message string `json:"message,omitempty"`
}

// LibvirtRestorePhase is the provider's progress of a restore.
// +kubebuilder:validation:Enum=InProgress;Succeeded;Failed
type LibvirtRestorePhase string

// Provider-side restore phases.
const (
	MachineRestoreInProgress LibvirtRestorePhase = "InProgress"
	MachineRestoreSucceeded  LibvirtRestorePhase = "Succeeded"
	MachineRestoreFailed     LibvirtRestorePhase = "Failed"
)

// LibvirtMachineRestoreStatus is the provider's report of the restore spec.restore asks for.
type LibvirtMachineRestoreStatus struct {
	// restoreName is the spec.restore.restoreName this report is for.
	// +kubebuilder:validation:MaxLength=253
	RestoreName string `json:"restoreName"`
	// phase of the restore on the host.
	Phase LibvirtRestorePhase `json:"phase"`
	// message says, for Failed, which step failed and the host's error, or why it was refused
	// (SnapshotDoesNotMatch).
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Message string `json:"message,omitempty"`
	// reason of a refusal or a failure, one of the VirtualMachineRestore's Ready reasons.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	Reason string `json:"reason,omitempty"`
}
