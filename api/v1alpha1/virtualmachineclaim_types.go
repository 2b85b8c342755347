package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// VirtualMachineClaimSpec asks for one warm member of a pool. It is immutable.
// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec is immutable"
type VirtualMachineClaimSpec struct {
	// poolRef names a VirtualMachinePool in the same namespace.
	PoolRef LocalObjectReference `json:"poolRef"`
	// subject is who the member is handed to. Opaque; never a credential.
	Subject ClaimSubject `json:"subject"`
	// ttlSeconds is how long the member is held, counted from bind time.
	// +kubebuilder:validation:Minimum=1
	TTLSeconds int64 `json:"ttlSeconds"`
}

// ClaimSubject identifies the consumer of a claimed member.
type ClaimSubject struct {
	// issuer of the identity.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Issuer string `json:"issuer"`
	// id of the subject within the issuer.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	ID string `json:"id"`
}

// ClaimPhase is the lifecycle phase of a claim.
// +kubebuilder:validation:Enum=Pending;Bound;Releasing;Failed
type ClaimPhase string

// Claim phases.
const (
	ClaimPending   ClaimPhase = "Pending"
	ClaimBound     ClaimPhase = "Bound"
	ClaimReleasing ClaimPhase = "Releasing"
	ClaimFailed    ClaimPhase = "Failed"
)

// VirtualMachineClaimStatus is the claim's binding.
type VirtualMachineClaimStatus struct {
	// phase of the claim.
	// +optional
	// +kubebuilder:default=Pending
	Phase ClaimPhase `json:"phase,omitempty"`
	// virtualMachineRef is the bound member; set once.
	// +optional
	VirtualMachineRef *LocalObjectReference `json:"virtualMachineRef,omitempty"`
	// addresses of the bound member.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=32
	Addresses []MachineAddress `json:"addresses,omitempty"`
	// tpmEndorsementCertificates of the bound member (later).
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=8
	// +kubebuilder:validation:items:MaxLength=16384
	TPMEndorsementCertificates []string `json:"tpmEndorsementCertificates,omitempty"`
	// nonce is 128 random bits as 32 hex characters, minted at bind time.
	// +optional
	// +kubebuilder:validation:MaxLength=32
	Nonce string `json:"nonce,omitempty"`
	// boundAt is when the member was bound.
	// +optional
	BoundAt *metav1.Time `json:"boundAt,omitempty"`
	// expiresAt is boundAt + ttlSeconds.
	// +optional
	ExpiresAt *metav1.Time `json:"expiresAt,omitempty"`
	// conditions: Bound.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=32
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// observedGeneration is the generation the status was computed for.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
}

// VirtualMachineClaim hands one warm pool member to a consumer for a while.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Namespaced,shortName=bclaim,categories=banlieue
// +kubebuilder:printcolumn:name="Pool",type=string,JSONPath=`.spec.poolRef.name`
// +kubebuilder:printcolumn:name="VM",type=string,JSONPath=`.status.virtualMachineRef.name`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Expires",type=string,JSONPath=`.status.expiresAt`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type VirtualMachineClaim struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   VirtualMachineClaimSpec   `json:"spec"`
	Status VirtualMachineClaimStatus `json:"status,omitempty"`
}

// VirtualMachineClaimList is a list of VirtualMachineClaims.
//
// +kubebuilder:object:root=true
type VirtualMachineClaimList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []VirtualMachineClaim `json:"items"`
}

func init() {
	SchemeBuilder.Register(&VirtualMachineClaim{}, &VirtualMachineClaimList{})
}
