package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// PoolReadiness is the member condition that makes a member available.
// +kubebuilder:validation:Enum=GuestReady;InfrastructureReady
type PoolReadiness string

// Pool readiness signals.
const (
	ReadinessGuestReady          PoolReadiness = "GuestReady"
	ReadinessInfrastructureReady PoolReadiness = "InfrastructureReady"
)

// VirtualMachinePoolSpec keeps a number of VMs provisioned ahead of demand.
// +kubebuilder:validation:XValidation:rule="self.warmReplicas <= self.maxReplicas",message="warmReplicas must not exceed maxReplicas"
type VirtualMachinePoolSpec struct {
	// warmReplicas is how many unclaimed, ready members the pool keeps.
	// +kubebuilder:validation:Minimum=0
	WarmReplicas int32 `json:"warmReplicas"`
	// maxReplicas caps all live members, claimed ones included.
	// +kubebuilder:validation:Minimum=0
	MaxReplicas int32 `json:"maxReplicas"`
	// maxSurge caps members provisioning at once.
	// +optional
	// +kubebuilder:default=2
	// +kubebuilder:validation:Minimum=0
	MaxSurge *int32 `json:"maxSurge,omitempty"`
	// readiness is the member condition that makes a member available. There is no default on
	// purpose: the right signal depends on the image.
	Readiness PoolReadiness `json:"readiness"`
	// provisioningTimeoutSeconds deletes members that have not become ready in time.
	// +optional
	// +kubebuilder:default=1800
	// +kubebuilder:validation:Minimum=1
	ProvisioningTimeoutSeconds *int64 `json:"provisioningTimeoutSeconds,omitempty"`
	// maxIdleSeconds recycles members ready for longer than this; unset means never.
	// +optional
	// +kubebuilder:validation:Minimum=1
	MaxIdleSeconds *int64 `json:"maxIdleSeconds,omitempty"`
	// recycleOnImageChange replaces unclaimed members when the image's revision changes.
	// +optional
	// +kubebuilder:default=true
	RecycleOnImageChange *bool `json:"recycleOnImageChange,omitempty"`
	// template of each member.
	Template VirtualMachineTemplate `json:"template"`
	// addressing hands each member a static address for one interface.
	// +optional
	Addressing *PoolAddressing `json:"addressing,omitempty"`
}

// VirtualMachineTemplate is the metadata and spec of pool members.
type VirtualMachineTemplate struct {
	// labels added to each member.
	// +optional
	// +kubebuilder:validation:MaxProperties=64
	Labels map[string]string `json:"labels,omitempty"`
	// annotations added to each member.
	// +optional
	// +kubebuilder:validation:MaxProperties=64
	Annotations map[string]string `json:"annotations,omitempty"`
	// spec of each member.
	Spec VirtualMachineSpec `json:"spec"`
}

// PoolAddressing draws members' static addresses from a list of addresses, ranges and CIDRs.
type PoolAddressing struct {
	// interface that receives the address.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=15
	Interface string `json:"interface"`
	// pool entries: a single IPv4 address, an inclusive a-b range, or a CIDR block. Drawn in
	// list order, low to high within each entry.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=64
	// +listType=atomic
	Pool []string `json:"pool"`
	// prefix length of the addresses' subnet.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=32
	Prefix int32 `json:"prefix"`
	// gateway of the subnet.
	// +optional
	// +kubebuilder:validation:MaxLength=45
	Gateway string `json:"gateway,omitempty"`
	// nameservers for the members.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=8
	// +kubebuilder:validation:items:MaxLength=45
	Nameservers []string `json:"nameservers,omitempty"`
	// domain for the members.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Domain string `json:"domain,omitempty"`
}

// VirtualMachinePoolStatus counts the pool's members.
type VirtualMachinePoolStatus struct {
	// replicas = available + provisioning + claimed; members being deleted are excluded.
	// +optional
	Replicas int32 `json:"replicas,omitempty"`
	// available members: ready and unclaimed.
	// +optional
	Available int32 `json:"available,omitempty"`
	// provisioning members: not ready yet.
	// +optional
	Provisioning int32 `json:"provisioning,omitempty"`
	// claimed members.
	// +optional
	Claimed int32 `json:"claimed,omitempty"`
	// imageRevision new members are labelled with.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	ImageRevision string `json:"imageRevision,omitempty"`
	// selector is the label selector of the pool's members, for the scale subresource
	// (kubectl scale and autoscalers read it).
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Selector string `json:"selector,omitempty"`
	// conditions: Warm and Capacity.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=32
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// observedGeneration is the generation the status was computed for.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
}

// VirtualMachinePool keeps VMs provisioned so a consumer does not wait out provisioning.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:subresource:scale:specpath=.spec.warmReplicas,statuspath=.status.available,selectorpath=.status.selector
// +kubebuilder:resource:scope=Namespaced,shortName=bpool,categories=banlieue
// +kubebuilder:printcolumn:name="Warm",type=integer,JSONPath=`.spec.warmReplicas`
// +kubebuilder:printcolumn:name="Available",type=integer,JSONPath=`.status.available`
// +kubebuilder:printcolumn:name="Provisioning",type=integer,JSONPath=`.status.provisioning`
// +kubebuilder:printcolumn:name="Claimed",type=integer,JSONPath=`.status.claimed`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type VirtualMachinePool struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   VirtualMachinePoolSpec   `json:"spec"`
	Status VirtualMachinePoolStatus `json:"status,omitempty"`
}

// VirtualMachinePoolList is a list of VirtualMachinePools.
//
// +kubebuilder:object:root=true
type VirtualMachinePoolList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []VirtualMachinePool `json:"items"`
}

func init() {
	SchemeBuilder.Register(&VirtualMachinePool{}, &VirtualMachinePoolList{})
}
