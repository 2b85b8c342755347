package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// VirtualMachineExportSpec asks for one copy of a stopped VM's disk, flattened, into a claim or
// a registry (docs/guides/libvirt-provider.md, "Exporting a disk off its host"). The whole spec
// is immutable: an export is one copy; another copy is another export.
//
// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec is immutable: create another VirtualMachineExport"
type VirtualMachineExportSpec struct {
	// virtualMachineName is the VirtualMachine whose disk is copied, in the export's namespace.
	// Its domain must be shut off while the host copies the disk.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	VirtualMachineName string `json:"virtualMachineName"`
	// target is where the copy goes: exactly one of persistentVolumeClaim or registry.
	Target ExportTarget `json:"target"`
}

// ExportTarget is where an export publishes the disk: exactly one of its fields.
//
// +kubebuilder:validation:XValidation:rule="has(self.persistentVolumeClaim) != has(self.registry)",message="exactly one of persistentVolumeClaim or registry must be set"
type ExportTarget struct {
	// persistentVolumeClaim receives the disk as disk.qcow2, with disk.qcow2.sha256 beside it.
	// +optional
	PersistentVolumeClaim *ExportPVCTarget `json:"persistentVolumeClaim,omitempty"`
	// registry receives the disk as a containerDisk image (disk/disk.qcow2 in one layer), which a
	// VMImage source of kind Url imports by status.imageRef.
	// +optional
	Registry *ExportRegistryTarget `json:"registry,omitempty"`
}

// ExportPVCTarget names a PersistentVolumeClaim in the export's namespace.
type ExportPVCTarget struct {
	// claimName of the PersistentVolumeClaim, in the export's namespace. It must be able to hold
	// the disk's data; an existing disk.qcow2 in it is replaced only once the new copy is whole.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	ClaimName string `json:"claimName"`
}

// ExportRegistryTarget names an OCI repository and the credentials to push to it.
type ExportRegistryTarget struct {
	// repository to push to, without a tag or digest (registry.example:5000/team/web-01): the
	// export pushes by digest and reports it in status.imageRef.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	// +kubebuilder:validation:XValidation:rule="!self.contains('@') && !self.matches(':[^/]*$')",message="repository takes no tag or digest: the export pushes by digest"
	Repository string `json:"repository"`
	// credentialsSecretRef names a kubernetes.io/dockerconfigjson Secret in the export's
	// namespace whose credentials may push to the repository. Unset, the push is anonymous. The
	// Secret reaches the Job as a mounted file, never in its arguments or the export's status.
	// +optional
	CredentialsSecretRef *ExportSecretReference `json:"credentialsSecretRef,omitempty"`
}

// ExportSecretReference names a Secret in the export's namespace.
type ExportSecretReference struct {
	// name of the Secret.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
}

// ExportPhase is where a VirtualMachineExport is.
// +kubebuilder:validation:Enum=Pending;Exporting;Ready;Failed
type ExportPhase string

// Export phases. Ready and Failed are final.
const (
	// ExportPending: not started: resolving the VM, waiting for it to stop or for the Job.
	ExportPending ExportPhase = "Pending"
	// ExportExporting: the Job copies the disk; the VM is not started until the host's copy
	// returns.
	ExportExporting ExportPhase = "Exporting"
	// ExportReady: the disk is published and verified: status.digest, and imageRef for a
	// registry.
	ExportReady ExportPhase = "Ready"
	// ExportFailed: a step failed; Ready's reason names it. Nothing half-published remains.
	ExportFailed ExportPhase = "Failed"
)

// Final reports whether p is a phase an export never leaves.
func (p ExportPhase) Final() bool {
	return p == ExportReady || p == ExportFailed
}

// VirtualMachineExportStatus is the progress and the result of an export.
type VirtualMachineExportStatus struct {
	// phase of the export: Pending, Exporting, then Ready or Failed.
	// +optional
	Phase ExportPhase `json:"phase,omitempty"`
	// digest is the sha256 of the exported disk file (sha256:<hex>), taken as it arrived and
	// checked again before publishing.
	// +optional
	// +kubebuilder:validation:MaxLength=71
	Digest string `json:"digest,omitempty"`
	// imageRef is the pushed image by digest (repository@sha256:…), for a registry target:
	// a VMImage source's importFrom.
	// +optional
	// +kubebuilder:validation:MaxLength=600
	ImageRef string `json:"imageRef,omitempty"`
	// sizeBytes is the size of the exported disk file.
	// +optional
	// +kubebuilder:validation:Minimum=0
	SizeBytes *int64 `json:"sizeBytes,omitempty"`
	// jobName is the Job that copies the disk, in the VM's Provider's namespace.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	JobName string `json:"jobName,omitempty"`
	// startedAt is when the Job was created.
	// +optional
	StartedAt *metav1.Time `json:"startedAt,omitempty"`
	// completedAt is when the export reached Ready or Failed.
	// +optional
	CompletedAt *metav1.Time `json:"completedAt,omitempty"`
	// conditions: Ready, True once the disk is published; while False its reason is why the
	// export waits or which step failed (docs/guides/libvirt-provider.md, "Exporting a disk off its
	// host").
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=8
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// observedGeneration is the generation the status was computed for.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
}

// VirtualMachineExport copies a stopped VirtualMachine's disk, flattened into one standalone
// qcow2, into a PersistentVolumeClaim or an OCI registry, verified by digest
// (docs/guides/libvirt-provider.md, "Exporting a disk off its host"). Owned by its VM;
// deleting it never deletes what it published.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Namespaced,shortName=bvmexport,categories=banlieue
// +kubebuilder:printcolumn:name="VM",type=string,JSONPath=`.spec.virtualMachineName`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=='Ready')].reason`
// +kubebuilder:printcolumn:name="Image",type=string,JSONPath=`.status.imageRef`,priority=1
// +kubebuilder:printcolumn:name="Digest",type=string,JSONPath=`.status.digest`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type VirtualMachineExport struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   VirtualMachineExportSpec   `json:"spec"`
	Status VirtualMachineExportStatus `json:"status,omitempty"`
}

// VirtualMachineExportList is a list of VirtualMachineExports.
//
// +kubebuilder:object:root=true
type VirtualMachineExportList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []VirtualMachineExport `json:"items"`
}

func init() {
	SchemeBuilder.Register(&VirtualMachineExport{}, &VirtualMachineExportList{})
}

// VirtualMachineExport Ready reasons (docs/guides/libvirt-provider.md, "Exporting a disk off its
// host"). A refusal names the field; a failure names the step of internal/vmexport that failed.
const (
	// ReasonExportPending: the export is accepted and its Job not yet running.
	ReasonExportPending = "ExportPending"
	// ReasonExporting: the Job copies the disk.
	ReasonExporting = "Exporting"
	// ReasonExportSucceeded: the disk is published and verified.
	ReasonExportSucceeded = "ExportSucceeded"
	// ReasonExportVMRunning: the VM's domain is not shut off; the export waits and starts when
	// the VM stops.
	ReasonExportVMRunning = "ExportVMRunning"
	// ReasonExportTargetInvalid: a field of the export cannot be used (the VM, the claim or the
	// credentials Secret is missing or unfit); the message names the field.
	ReasonExportTargetInvalid = "ExportTargetInvalid"
	// ReasonExportFlattenFailed: the host could not copy the disk into a standalone volume.
	ReasonExportFlattenFailed = "ExportFlattenFailed"
	// ReasonExportDownloadFailed: the copy could not be downloaded from the host whole, within
	// its size bound and the Job's deadline.
	ReasonExportDownloadFailed = "ExportDownloadFailed"
	// ReasonExportVerifyFailed: the downloaded file does not match the digest taken as it
	// arrived, or is not a standalone qcow2.
	ReasonExportVerifyFailed = "ExportVerifyFailed"
	// ReasonExportPublishFailed: the file could not be written to the claim or pushed to the
	// registry and read back by digest.
	ReasonExportPublishFailed = "ExportPublishFailed"
	// ReasonExportJobFailed: the export Job ended without a result the controller can read (its
	// pod never created, evicted or killed) or with one that is not a pushed disk; the message
	// names the Job.
	ReasonExportJobFailed = "ExportJobFailed"
	// ReasonExportCleanupFailed: the disk was published but the host's copy could not be
	// deleted; the message names the volume to delete.
	ReasonExportCleanupFailed = "ExportCleanupFailed"
)
