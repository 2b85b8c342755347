package v1alpha1

import (
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ImageSourceKind says how a provider class obtains an image.
// +kubebuilder:validation:Enum=Template;BackingFile;Url
type ImageSourceKind string

// Image source kinds.
const (
	// SourceTemplate is a backend template (vSphere); never used by libvirt.
	SourceTemplate ImageSourceKind = "Template"
	// SourceBackingFile is a volume already present on the host; ref's basename names it.
	SourceBackingFile ImageSourceKind = "BackingFile"
	// SourceURL is built by the imagebuilder from importFrom and imported by the provider.
	SourceURL ImageSourceKind = "Url"
)

// InstallMode says whether a VM boots the image as is or installs itself from it. Each mode is
// accepted in lower case and capitalised (`immediate` or `Immediate`), the user guide's spelling;
// it is stored as written and read through Canonical (docs/decisions.md, "installMode casing").
// +kubebuilder:validation:Enum=immediate;deferred;manual;Immediate;Deferred;Manual
type InstallMode string

// Install modes, in their canonical (lower-case) spelling.
const (
	InstallImmediate InstallMode = "immediate"
	InstallDeferred  InstallMode = "deferred"
	InstallManual    InstallMode = "manual"
)

// Canonical is the mode in lower case, the spelling the constants use: Immediate is immediate.
func (m InstallMode) Canonical() InstallMode {
	return InstallMode(strings.ToLower(string(m)))
}

// VMImageSpec describes a guest image and where each provider class finds it.
type VMImageSpec struct {
	// osFamily of the guest.
	// +kubebuilder:validation:Enum=linux;windows;bsd;other
	OSFamily string `json:"osFamily"`
	// osDistribution, e.g. ubuntu.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	OSDistribution string `json:"osDistribution"`
	// osVersion, e.g. "24.04".
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	OSVersion string `json:"osVersion"`
	// architecture of the guest; for an OCI source it selects the platform of a multi-arch index.
	// +kubebuilder:validation:Enum=amd64;arm64
	Architecture string `json:"architecture"`
	// guestAgent is the guest's first-boot agent.
	// +optional
	// +kubebuilder:validation:Enum=cloud-init;ignition;sysprep;none
	GuestAgent string `json:"guestAgent,omitempty"`
	// sources, at most one per provider class.
	// +listType=map
	// +listMapKey=providerClass
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=16
	Sources []ImageSource `json:"sources"`
	// template says how VMs use the image.
	// +optional
	Template *VMImageTemplate `json:"template,omitempty"`
}

// ImageSource is where one provider class finds the image.
// +kubebuilder:validation:XValidation:rule="self.kind != 'Url' || has(self.importFrom)",message="sources[].importFrom is required when kind is Url"
// +kubebuilder:validation:XValidation:rule="!has(self.importFrom) || !self.importFrom.startsWith('http://') || has(self.checksum)",message="sources[].checksum is required when importFrom is a plain http:// URL"
type ImageSource struct {
	// providerClass this source is for, e.g. libvirt.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=32
	ProviderClass string `json:"providerClass"`
	// kind of source.
	Kind ImageSourceKind `json:"kind"`
	// ref names the image on the backend. For a libvirt BackingFile it is a path whose basename
	// is the volume name. Ignored for Url.
	// +kubebuilder:validation:MaxLength=1024
	Ref string `json:"ref"`
	// importFrom is an https:// URL of a disk image or ISO (optionally .gz/.xz/.zst), or an OCI
	// reference of a disk-image container.
	// +optional
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:XValidation:rule="!self.contains('://') || self.startsWith('https://') || self.startsWith('http://')",message="sources[].importFrom must be an https:// URL or an OCI reference"
	ImportFrom string `json:"importFrom,omitempty"`
	// checksum of the source bytes: sha256:<hex> or sha512:<hex>.
	// +optional
	// +kubebuilder:validation:Pattern=`^(sha256:[0-9a-fA-F]{64}|sha512:[0-9a-fA-F]{128})$`
	// +kubebuilder:validation:MaxLength=135
	Checksum string `json:"checksum,omitempty"`
	// allowUnverifiedTag lets an OCI importFrom name a tag (`:40`) with neither a digest
	// (`@sha256:...`) nor a checksum. It risks the disk: a tag is whatever the registry serves
	// when the build runs, so a retagged, replaced or tampered image becomes the VM's disk
	// unnoticed, and two builds of the same VMImage may differ. Without it such a source is
	// refused before any build.
	// +optional
	AllowUnverifiedTag bool `json:"allowUnverifiedTag,omitempty"`
}

// VMImageTemplate holds how VMs consume the image.
type VMImageTemplate struct {
	// installMode: immediate boots a copy-on-write overlay of the image; deferred and manual boot
	// an empty disk with the image as install media. Immediate, Deferred and Manual are the same
	// modes.
	// +optional
	// +kubebuilder:default=immediate
	InstallMode InstallMode `json:"installMode,omitempty"`
}

// ArtifactKind is the kind of a built artifact.
// +kubebuilder:validation:Enum=cloudImage;iso
type ArtifactKind string

// Artifact kinds.
const (
	ArtifactCloudImage ArtifactKind = "cloudImage"
	ArtifactISO        ArtifactKind = "iso"
)

// BuildPhase is the phase of an image build.
// +kubebuilder:validation:Enum=Pending;Building;Ready;Failed
type BuildPhase string

// Build phases.
const (
	BuildPending  BuildPhase = "Pending"
	BuildBuilding BuildPhase = "Building"
	BuildReady    BuildPhase = "Ready"
	BuildFailed   BuildPhase = "Failed"
)

// JobReference names a Job.
type JobReference struct {
	// name of the Job.
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
	// namespace of the Job.
	// +kubebuilder:validation:MaxLength=63
	Namespace string `json:"namespace"`
}

// BuildArtifact is the imagebuilder's output for a Url source.
type BuildArtifact struct {
	// kind of artifact.
	Kind ArtifactKind `json:"kind"`
	// phase of the build.
	Phase BuildPhase `json:"phase"`
	// jobRef is the build Job.
	// +optional
	JobRef *JobReference `json:"jobRef,omitempty"`
	// pvcRef is the artifacts PVC.
	// +optional
	PVCRef *LocalObjectReference `json:"pvcRef,omitempty"`
	// file is the artifact's path inside the PVC.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	File string `json:"file,omitempty"`
	// reason: Pending, Building, Reconciled or BuildFailed.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Reason string `json:"reason,omitempty"`
	// message explains the phase.
	// +optional
	// +kubebuilder:validation:MaxLength=32768
	Message string `json:"message,omitempty"`
	// checksum of the artifact file as written: sha256:<hex>.
	// +optional
	// +kubebuilder:validation:MaxLength=135
	Checksum string `json:"checksum,omitempty"`
	// extentDigest of the artifact file: extents-sha256:<hex>, a sha256 over its size and its
	// blocks that are not all zeros (ADR-0134). The import verifies with it instead of checksum,
	// at the cost of the data only. Unset for an artifact built before it was published.
	// +optional
	// +kubebuilder:validation:Pattern=`^extents-sha256:[0-9a-f]{64}$`
	// +kubebuilder:validation:MaxLength=79
	ExtentDigest string `json:"extentDigest,omitempty"`
	// sizeBytes of the artifact file.
	// +optional
	SizeBytes int64 `json:"sizeBytes,omitempty"`
	// sourceDigest is the OCI manifest digest or the URL's checksum.
	// +optional
	// +kubebuilder:validation:MaxLength=135
	SourceDigest string `json:"sourceDigest,omitempty"`
}

// ProviderImageStatus is the image's state on one Provider.
type ProviderImageStatus struct {
	// providerName of the Provider.
	// +kubebuilder:validation:MaxLength=253
	ProviderName string `json:"providerName"`
	// providerNamespace of the Provider.
	// +kubebuilder:validation:MaxLength=63
	ProviderNamespace string `json:"providerNamespace"`
	// ready is true when the image is usable on the Provider.
	Ready bool `json:"ready"`
	// reason is a CamelCase word explaining ready.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Reason string `json:"reason,omitempty"`
	// message explains ready.
	// +optional
	// +kubebuilder:validation:MaxLength=32768
	Message string `json:"message,omitempty"`
	// resolvedRef is the backend name of the image (libvirt: the volume name).
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	ResolvedRef string `json:"resolvedRef,omitempty"`
	// zones are per storage target (libvirt: one per pool, named after it).
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=64
	Zones []ImageZoneStatus `json:"zones,omitempty"`
}

// ImageZoneStatus is the image's state in one zone of a Provider.
type ImageZoneStatus struct {
	// name of the zone (libvirt: the pool).
	// +kubebuilder:validation:MaxLength=200
	Name string `json:"name"`
	// ready is true when the image is usable in this zone.
	Ready bool `json:"ready"`
	// reason is a CamelCase word explaining ready.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Reason string `json:"reason,omitempty"`
	// message explains ready.
	// +optional
	// +kubebuilder:validation:MaxLength=32768
	Message string `json:"message,omitempty"`
	// resolvedRef is the backend name of the image in this zone.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	ResolvedRef string `json:"resolvedRef,omitempty"`
}

// VMImageStatus is the image's build and per-Provider state.
type VMImageStatus struct {
	// buildArtifact is written by the imagebuilder only.
	// +optional
	BuildArtifact *BuildArtifact `json:"buildArtifact,omitempty"`
	// perProvider rows, one per Provider of a class that has a source.
	// +optional
	// +listType=map
	// +listMapKey=providerName
	// +listMapKey=providerNamespace
	// +kubebuilder:validation:MaxItems=10000
	PerProvider []ProviderImageStatus `json:"perProvider,omitempty"`
	// conditions: Ready, written by the controller only.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=32
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// readyProviders is "N/M": the image is usable on N of the M Providers with a row, written
	// by the controller with Ready (which needs every row).
	// +optional
	// +kubebuilder:validation:MaxLength=32
	ReadyProviders string `json:"readyProviders,omitempty"`
	// observedGeneration is the generation the status was computed for.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
}

// VMImage is a guest image, built and imported onto each Provider that can use it.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=bimg,categories=banlieue
// +kubebuilder:printcolumn:name="OS",type=string,JSONPath=`.spec.osDistribution`
// +kubebuilder:printcolumn:name="Version",type=string,JSONPath=`.spec.osVersion`
// +kubebuilder:printcolumn:name="Arch",type=string,JSONPath=`.spec.architecture`
// +kubebuilder:printcolumn:name="Providers",type=string,JSONPath=`.status.readyProviders`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=='Ready')].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type VMImage struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   VMImageSpec   `json:"spec"`
	Status VMImageStatus `json:"status,omitempty"`
}

// VMImageList is a list of VMImages.
//
// +kubebuilder:object:root=true
type VMImageList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []VMImage `json:"items"`
}

func init() {
	SchemeBuilder.Register(&VMImage{}, &VMImageList{})
}
