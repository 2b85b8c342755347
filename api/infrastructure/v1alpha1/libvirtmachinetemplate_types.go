package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// LibvirtMachineTemplateSpec is what Cluster API's MachineDeployments, MachineSets and control
// planes copy into each LibvirtMachine they create (the v1beta2 InfraMachineTemplate contract).
type LibvirtMachineTemplateSpec struct {
	// template is the LibvirtMachine each Machine gets.
	Template LibvirtMachineTemplateResource `json:"template"`
}

// LibvirtMachineTemplateResource is the metadata and spec of the LibvirtMachines made from a
// template.
type LibvirtMachineTemplateResource struct {
	// metadata: the labels and annotations each LibvirtMachine gets.
	// +optional
	ObjectMeta TemplateObjectMeta `json:"metadata,omitempty"`
	// spec of each LibvirtMachine. What names one machine is left out: the domain is named after
	// each LibvirtMachine (its namespace and name), the provider sets providerID, and the
	// bootstrap data comes from each Machine's bootstrap Secret, never from a user-data Secret
	// of banlieue-controller's.
	// +kubebuilder:validation:XValidation:rule="!has(self.domainName)",message="spec.template.spec.domainName must be unset: each LibvirtMachine's domain is named after the machine"
	// +kubebuilder:validation:XValidation:rule="!has(self.providerID)",message="spec.template.spec.providerID must be unset: the provider sets it on each LibvirtMachine"
	// +kubebuilder:validation:XValidation:rule="!has(self.userDataSecretRef) && !has(self.userDataHash)",message="spec.template.spec.userDataSecretRef and userDataHash must be unset: a Machine's bootstrap data comes from its spec.bootstrap.dataSecretName"
	// +kubebuilder:validation:XValidation:rule="!has(self.migration)",message="spec.template.spec.migration must be unset: banlieue-controller writes it on one LibvirtMachine for a VirtualMachineMigration"
	// +kubebuilder:validation:XValidation:rule="!has(self.snapshots) && !has(self.restore)",message="spec.template.spec.snapshots and restore must be unset: banlieue-controller writes them on one LibvirtMachine for its VM's snapshots"
	Spec LibvirtMachineSpec `json:"spec"`
}

// TemplateObjectMeta is the part of an object's metadata a template may set.
type TemplateObjectMeta struct {
	// labels of each object made from the template.
	// +optional
	// +kubebuilder:validation:MaxProperties=64
	Labels map[string]string `json:"labels,omitempty"`
	// annotations of each object made from the template.
	// +optional
	// +kubebuilder:validation:MaxProperties=64
	Annotations map[string]string `json:"annotations,omitempty"`
}

// LibvirtMachineTemplate is the LibvirtMachine Cluster API creates for each Machine of a
// MachineDeployment, MachineSet or control plane. Immutable, as Cluster API expects of
// templates: a change is a new template that the MachineDeployment rolls out to.
//
// +kubebuilder:object:root=true
// +kubebuilder:metadata:labels="cluster.x-k8s.io/v1beta2=v1alpha1"
// +kubebuilder:resource:scope=Namespaced,shortName=blvmt,categories=banlieue;cluster-api
// +kubebuilder:printcolumn:name="Provider",type=string,JSONPath=`.spec.template.spec.providerRef.name`
// +kubebuilder:printcolumn:name="Image",type=string,JSONPath=`.spec.template.spec.bootSource.volume`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type LibvirtMachineTemplate struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec of the template.
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="a LibvirtMachineTemplate's spec is immutable: create a new template and point the MachineDeployment at it"
	Spec LibvirtMachineTemplateSpec `json:"spec"`
}

// LibvirtMachineTemplateList is a list of LibvirtMachineTemplates.
//
// +kubebuilder:object:root=true
type LibvirtMachineTemplateList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []LibvirtMachineTemplate `json:"items"`
}

func init() {
	SchemeBuilder.Register(&LibvirtMachineTemplate{}, &LibvirtMachineTemplateList{})
}
