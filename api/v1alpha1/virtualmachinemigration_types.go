package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// VirtualMachineMigrationSpec asks for one live move of a running VM to another Provider
// (docs/guides/libvirt-provider.md, "Live migration").
//
// +kubebuilder:validation:XValidation:rule="has(self.targetProvider) == has(oldSelf.targetProvider) && (!has(self.targetProvider) || self.targetProvider == oldSelf.targetProvider)",message="targetProvider is immutable: create another VirtualMachineMigration"
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.cancel) || !oldSelf.cancel || (has(self.cancel) && self.cancel)",message="cancel cannot be undone: create another VirtualMachineMigration"
type VirtualMachineMigrationSpec struct {
	// vmName is the VirtualMachine to move, in the migration's namespace. Immutable.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="vmName is immutable: create another VirtualMachineMigration"
	VMName string `json:"vmName"`
	// targetProvider is the Provider to move the VM to. Unset, the scheduler chooses among the
	// VM's candidate Providers other than its current one, as it places a new VM (capacity,
	// cordons, anti-affinity). Immutable.
	// +optional
	TargetProvider *MigrationProviderReference `json:"targetProvider,omitempty"`
	// timeoutSeconds bounds the move, counted from status.startedAt: past it the controller asks
	// the provider to abort and the migration fails with reason Timeout; the VM runs on on its
	// source. Default 600, between 30 and 86400.
	// +optional
	// +kubebuilder:default=600
	// +kubebuilder:validation:Minimum=30
	// +kubebuilder:validation:Maximum=86400
	TimeoutSeconds *int32 `json:"timeoutSeconds,omitempty"`
	// cancel, set to true, stops the move: the provider is asked to abort and the migration ends
	// Cancelled, the VM running on its source. It cannot be set back to false.
	// +optional
	Cancel bool `json:"cancel,omitempty"`
}

// MigrationProviderReference names a Provider; unset namespace means the migration's.
type MigrationProviderReference struct {
	// name of the Provider.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
	// namespace of the Provider: the migration's (unset) or that of a shared Provider whose
	// allowedNamespaces admits it.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Namespace string `json:"namespace,omitempty"`
}

// MigrationPhase is where a VirtualMachineMigration is.
// +kubebuilder:validation:Enum=Pending;PreparingTarget;Migrating;Succeeded;Failed;Cancelled
type MigrationPhase string

// Migration phases. Succeeded, Failed and Cancelled are final.
const (
	// MigrationPending: not started: validating, or waiting for another migration of the VM.
	MigrationPending MigrationPhase = "Pending"
	// MigrationPreparingTarget: the target is chosen and the provider prepares its volumes.
	MigrationPreparingTarget MigrationPhase = "PreparingTarget"
	// MigrationMigrating: memory and the overlays are being copied.
	MigrationMigrating MigrationPhase = "Migrating"
	// MigrationSucceeded: the VM runs on the target only.
	MigrationSucceeded MigrationPhase = "Succeeded"
	// MigrationFailed: refused or failed; the VM runs on its source. Ready's reason says why.
	MigrationFailed MigrationPhase = "Failed"
	// MigrationCancelled: stopped by spec.cancel or the VM's deletion; the VM stays on its source.
	MigrationCancelled MigrationPhase = "Cancelled"
)

// Final reports whether p is a phase a migration never leaves.
func (p MigrationPhase) Final() bool {
	return p == MigrationSucceeded || p == MigrationFailed || p == MigrationCancelled
}

// MigrationEndpoint is one end of a move: a Provider and its failure domain.
type MigrationEndpoint struct {
	// providerName of the Provider.
	// +kubebuilder:validation:MaxLength=253
	ProviderName string `json:"providerName"`
	// providerNamespace of the Provider.
	// +kubebuilder:validation:MaxLength=63
	ProviderNamespace string `json:"providerNamespace"`
	// failureDomain on that Provider.
	// +optional
	// +kubebuilder:validation:MaxLength=256
	FailureDomain string `json:"failureDomain,omitempty"`
	// pool is, for a target, the storage pool the scheduler resolved the VM's storage class to
	// on that Provider: where the machine's volumes move.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Pool string `json:"pool,omitempty"`
}

// VirtualMachineMigrationStatus is the decision and the progress of a move.
type VirtualMachineMigrationStatus struct {
	// phase of the migration: Pending, PreparingTarget, Migrating, then Succeeded, Failed or
	// Cancelled.
	// +optional
	Phase MigrationPhase `json:"phase,omitempty"`
	// source is where the VM ran when the move started.
	// +optional
	Source *MigrationEndpoint `json:"source,omitempty"`
	// target is where the VM moves: spec.targetProvider, or the scheduler's choice.
	// +optional
	Target *MigrationEndpoint `json:"target,omitempty"`
	// startedAt is when the move was handed to the provider; timeoutSeconds counts from it.
	// +optional
	StartedAt *metav1.Time `json:"startedAt,omitempty"`
	// completedAt is when the migration reached a final phase.
	// +optional
	CompletedAt *metav1.Time `json:"completedAt,omitempty"`
	// downtimeMilliseconds is how long the guest was paused, as the provider measured it.
	// +optional
	// +kubebuilder:validation:Minimum=0
	DowntimeMilliseconds *int64 `json:"downtimeMilliseconds,omitempty"`
	// totalMilliseconds is the move's total time, as the provider measured it.
	// +optional
	// +kubebuilder:validation:Minimum=0
	TotalMilliseconds *int64 `json:"totalMilliseconds,omitempty"`
	// conditions: Ready, True once the VM runs on the target; while False its reason is the
	// step the migration is at or the one that failed (docs/guides/libvirt-provider.md, "Live
	// migration").
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=8
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// observedGeneration is the generation the status was computed for.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
}

// VirtualMachineMigration moves a running VirtualMachine live to another Provider: its memory
// and disk overlays travel, the guest keeps running (docs/guides/libvirt-provider.md, "Live
// migration").
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Namespaced,shortName=bvmm,categories=banlieue
// +kubebuilder:printcolumn:name="VM",type=string,JSONPath=`.spec.vmName`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Source",type=string,JSONPath=`.status.source.providerName`
// +kubebuilder:printcolumn:name="Target",type=string,JSONPath=`.status.target.providerName`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=='Ready')].reason`
// +kubebuilder:printcolumn:name="Downtime(ms)",type=integer,JSONPath=`.status.downtimeMilliseconds`,priority=1
// +kubebuilder:printcolumn:name="Total(ms)",type=integer,JSONPath=`.status.totalMilliseconds`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type VirtualMachineMigration struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   VirtualMachineMigrationSpec   `json:"spec"`
	Status VirtualMachineMigrationStatus `json:"status,omitempty"`
}

// VirtualMachineMigrationList is a list of VirtualMachineMigrations.
//
// +kubebuilder:object:root=true
type VirtualMachineMigrationList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []VirtualMachineMigration `json:"items"`
}

func init() {
	SchemeBuilder.Register(&VirtualMachineMigration{}, &VirtualMachineMigrationList{})
}

// VirtualMachineMigration Ready reasons (docs/guides/libvirt-provider.md, "Live migration").
// While the move runs Ready is False with the phase's reason; a refusal or a failure names the
// field or the step.
const (
	// ReasonMigrationWaiting: another migration of the same VM is active; this one starts after it.
	ReasonMigrationWaiting = "AnotherMigrationActive"
	// ReasonMigrationPreparingTarget: the provider prepares the target's volumes.
	ReasonMigrationPreparingTarget = "PreparingTarget"
	// ReasonMigrationMigrating: the provider copies the VM's memory and overlays.
	ReasonMigrationMigrating = "Migrating"
	// ReasonMigrationSucceeded: the VM runs on the target.
	ReasonMigrationSucceeded = "MigrationSucceeded"
	// ReasonVMNotFound: spec.vmName names no VirtualMachine in the migration's namespace.
	ReasonVMNotFound = "VMNotFound"
	// ReasonVMNotPlaced: the VM has no placement (status.scheduled) or no machine yet.
	ReasonVMNotPlaced = "VMNotPlaced"
	// ReasonMigrationPolicyNotLive: the VM's spec.migrationPolicy is not live or liveOrRecreate.
	ReasonMigrationPolicyNotLive = "MigrationPolicyNotLive"
	// ReasonVMNotRunning: the VM is not running (powered off, suspended, paused or deleting);
	// only a running guest moves live.
	ReasonVMNotRunning = "VMNotRunning"
	// ReasonLiveMigrationUnsupported: the VM's Provider is of a class that cannot move a VM live.
	ReasonLiveMigrationUnsupported = "LiveMigrationUnsupported"
	// ReasonVMHasSnapshots: the VM's machine keeps snapshot layers on its host, which a live move
	// would leave behind (docs/adr/0155-snapshots-external-disk-only-layers.md).
	ReasonVMHasSnapshots = "VMHasSnapshots"
	// ReasonTargetIsSource: spec.targetProvider is the Provider the VM runs on.
	ReasonTargetIsSource = "TargetIsSource"
	// ReasonTargetUnfit: spec.targetProvider cannot hold the VM (the scheduler's filters); the
	// message says which.
	ReasonTargetUnfit = "TargetUnfit"
	// ReasonMigrationTimeout: the move outlasted spec.timeoutSeconds and was aborted.
	ReasonMigrationTimeout = "Timeout"
	// ReasonMigrationCancelled: spec.cancel was set, or the migration was deleted, before the
	// move completed.
	ReasonMigrationCancelled = "Cancelled"
	// ReasonVMDeleted: the VM was deleted during the migration, which ends Cancelled.
	ReasonVMDeleted = "VMDeleted"
	// ReasonMigrationFailed: the provider reported the move failed; the message carries the
	// step and the provider's error.
	ReasonMigrationFailed = "MigrationFailed"
)
