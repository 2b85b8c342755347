package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// VSphereMachineTemplateSpec is what Cluster API's MachineDeployments, MachineSets and control
// planes copy into each VSphereMachine they create (the v1beta2 InfraMachineTemplate contract).
type VSphereMachineTemplateSpec struct {
	// template is the VSphereMachine each Machine gets.
	Template VSphereMachineTemplateResource `json:"template"`
}

// VSphereMachineTemplateResource is the metadata and spec of the VSphereMachines made from a
// template.
type VSphereMachineTemplateResource struct {
	// metadata: the labels and annotations each VSphereMachine gets.
	// +optional
	ObjectMeta TemplateObjectMeta `json:"metadata,omitempty"`
	// spec of each VSphereMachine. What names one machine is left out: the virtual machine is
	// named after each VSphereMachine, the provider sets providerID, and the bootstrap data
	// comes from each Machine's bootstrap Secret, never from a user-data Secret of
	// banlieue-controller's. providerRef is required; failureDomain, when unset, is each
	// Machine's spec.failureDomain.
	// +kubebuilder:validation:XValidation:rule="!has(self.vmName)",message="spec.template.spec.vmName must be unset: each VSphereMachine's virtual machine is named after the machine"
	// +kubebuilder:validation:XValidation:rule="!has(self.providerID)",message="spec.template.spec.providerID must be unset: the provider sets it on each VSphereMachine"
	// +kubebuilder:validation:XValidation:rule="has(self.providerRef)",message="spec.template.spec.providerRef is required: a VSphereMachine is served by the provider of the Provider it names, and nothing places a vSphere machine without one"
	// +kubebuilder:validation:XValidation:rule="!has(self.userDataSecretRef) && !has(self.userDataHash)",message="spec.template.spec.userDataSecretRef and userDataHash must be unset: a Machine's bootstrap data comes from its spec.bootstrap.dataSecretName"
	Spec VSphereMachineSpec `json:"spec"`
}

// VSphereMachineTemplate is the VSphereMachine Cluster API creates for each Machine of a
// MachineDeployment, MachineSet or control plane. Immutable, as Cluster API expects of
// templates: a change is a new template that the MachineDeployment rolls out to.
//
// +kubebuilder:object:root=true
// +kubebuilder:metadata:labels="cluster.x-k8s.io/v1beta2=v1alpha1"
// +kubebuilder:resource:scope=Namespaced,shortName=bvsmt,categories=banlieue;cluster-api
// +kubebuilder:printcolumn:name="Provider",type=string,JSONPath=`.spec.template.spec.providerRef.name`
// +kubebuilder:printcolumn:name="Template",type=string,JSONPath=`.spec.template.spec.template`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type VSphereMachineTemplate struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec of the template.
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="a VSphereMachineTemplate's spec is immutable: create a new template and point the MachineDeployment at it"
	Spec VSphereMachineTemplateSpec `json:"spec"`
}

// VSphereMachineTemplateList is a list of VSphereMachineTemplates.
//
// +kubebuilder:object:root=true
type VSphereMachineTemplateList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []VSphereMachineTemplate `json:"items"`
}

func init() {
	SchemeBuilder.Register(&VSphereMachineTemplate{}, &VSphereMachineTemplateList{})
}
