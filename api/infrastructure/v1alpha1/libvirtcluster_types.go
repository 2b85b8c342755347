package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// APIEndpoint is a reachable Kubernetes API endpoint (the Cluster API v1beta2 shape).
type APIEndpoint struct {
	// host the API server serves on: a DNS name or an IP literal.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	Host string `json:"host"`
	// port the API server serves on.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	Port int32 `json:"port"`
}

// ClusterProvider is one Provider a cluster's machines may run on: one failure domain.
type ClusterProvider struct {
	// name of the Provider; also the failure domain's name, which a Machine's
	// spec.failureDomain names and its LibvirtMachine's spec.providerRef.name must match.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
	// namespace of the Provider; unset means the LibvirtCluster's namespace. A Provider of
	// another namespace serves the cluster's machines only while its allowedNamespaces admits
	// the cluster's namespace.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +optional
	Namespace string `json:"namespace,omitempty"`
	// controlPlane: whether control plane machines may be placed on this Provider.
	// +optional
	// +kubebuilder:default=true
	ControlPlane *bool `json:"controlPlane,omitempty"`
}

// LibvirtClusterSpec is the infrastructure of one Cluster API Cluster.
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.controlPlaneEndpoint) || (has(self.controlPlaneEndpoint) && self.controlPlaneEndpoint == oldSelf.controlPlaneEndpoint)",message="spec.controlPlaneEndpoint is immutable once set"
type LibvirtClusterSpec struct {
	// controlPlaneEndpoint is where the cluster's API server is reached (a load balancer or a
	// virtual IP in front of the control plane machines, which banlieue does not provide). Cluster
	// API copies it to the Cluster once the LibvirtCluster is provisioned, and provisioned waits
	// for it.
	// +optional
	ControlPlaneEndpoint *APIEndpoint `json:"controlPlaneEndpoint,omitempty"`
	// providers the cluster's machines run on; each is one failure domain, named after it.
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=100
	Providers []ClusterProvider `json:"providers"`
}

// FailureDomain is one failure domain (the Cluster API v1beta2 shape).
type FailureDomain struct {
	// name of the failure domain: the Provider's name.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	Name string `json:"name"`
	// controlPlane: whether control plane machines may be placed in it.
	// +optional
	ControlPlane *bool `json:"controlPlane,omitempty"`
	// attributes of the failure domain: provider-namespace, the namespace of its Provider.
	// +optional
	// +kubebuilder:validation:MaxProperties=16
	Attributes map[string]string `json:"attributes,omitempty"`
}

// ClusterInitializationStatus follows the Cluster API v1beta2 InfraCluster contract.
type ClusterInitializationStatus struct {
	// provisioned is true once spec.controlPlaneEndpoint is set and every Provider of
	// spec.providers exists; it never turns false again.
	// +optional
	Provisioned *bool `json:"provisioned,omitempty"`
}

// LibvirtClusterStatus is what banlieue-controller observed of the cluster's Providers.
type LibvirtClusterStatus struct {
	// initialization.provisioned tells Cluster API the cluster's infrastructure is ready.
	// +optional
	Initialization *ClusterInitializationStatus `json:"initialization,omitempty"`
	// failureDomains: one per Provider of spec.providers that exists.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=100
	FailureDomains []FailureDomain `json:"failureDomains,omitempty"`
	// conditions: Ready and Paused.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=32
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// observedGeneration is the generation the status was computed for.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
}

// LibvirtCluster is the infrastructure of a Cluster API Cluster on libvirt hosts (the v1beta2
// InfraCluster contract): the Providers its machines run on, reported as failure domains, and
// the user's control plane endpoint.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:metadata:labels="cluster.x-k8s.io/v1beta2=v1alpha1"
// +kubebuilder:resource:scope=Namespaced,shortName=blcl,categories=banlieue;cluster-api
// +kubebuilder:printcolumn:name="Provisioned",type=boolean,JSONPath=`.status.initialization.provisioned`
// +kubebuilder:printcolumn:name="Endpoint",type=string,JSONPath=`.spec.controlPlaneEndpoint.host`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type LibvirtCluster struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   LibvirtClusterSpec   `json:"spec"`
	Status LibvirtClusterStatus `json:"status,omitempty"`
}

// LibvirtClusterList is a list of LibvirtClusters.
//
// +kubebuilder:object:root=true
type LibvirtClusterList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []LibvirtCluster `json:"items"`
}

func init() {
	SchemeBuilder.Register(&LibvirtCluster{}, &LibvirtClusterList{})
}
