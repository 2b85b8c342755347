package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ProviderClassSpec says how the operator runs the provider workload of a backend.
// +kubebuilder:validation:XValidation:rule="self.backend == 'vsphere' || !has(self.concurrency) || (!has(self.concurrency.vcenterClones) && !has(self.concurrency.vcenterPowerOperations))",message="vcenterClones and vcenterPowerOperations are for backend vsphere only",fieldPath=".concurrency"
type ProviderClassSpec struct {
	// backend is the `banlieue provider <backend>` subcommand to run.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^[a-z][a-z0-9-]*$`
	Backend string `json:"backend"`
	// image the provider pods run.
	Image ProviderImage `json:"image"`
	// workloadNamespace holds the workloads; unset means each Provider's own namespace.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	WorkloadNamespace string `json:"workloadNamespace,omitempty"`
	// replicas of each provider Deployment; values below 1 count as 1.
	// +optional
	// +kubebuilder:default=1
	Replicas int32 `json:"replicas,omitempty"`
	// resources of the provider container. Default requests cpu 50m, memory 128Mi; limits
	// cpu 1000m, memory 512Mi.
	// +optional
	Resources *ProviderResources `json:"resources,omitempty"`
	// nodeSelector applied to provider pods.
	// +optional
	// +kubebuilder:validation:MaxProperties=64
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`
	// tolerations applied to provider pods.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=64
	Tolerations []Toleration `json:"tolerations,omitempty"`
	// logging passed to the provider as --log-level and --log-format.
	// +optional
	Logging *ProviderLogging `json:"logging,omitempty"`
	// concurrency of each provider process: its workers and its per-host limits (ADR-0132).
	// Unset fields keep the provider binary's defaults.
	// +optional
	Concurrency *ProviderConcurrency `json:"concurrency,omitempty"`
	// additionalRules are appended to each per-Provider Role. The operator's own ClusterRole must
	// already hold them, or the binding is rejected.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=64
	AdditionalRules []PolicyRule `json:"additionalRules,omitempty"`
	// paused suspends every Provider of the class; existing workloads are left alone.
	// +optional
	Paused bool `json:"paused,omitempty"`
}

// ProviderImage is the container image of the provider workload.
type ProviderImage struct {
	// repository, e.g. registry.example/banlieue.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	Repository string `json:"repository"`
	// tag of the image.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	Tag string `json:"tag"`
	// digest pins the image: repo:tag@digest.
	// +optional
	// +kubebuilder:validation:Pattern=`^sha256:[a-f0-9]{64}$`
	// +kubebuilder:validation:MaxLength=71
	Digest string `json:"digest,omitempty"`
	// pullPolicy of the provider container.
	// +optional
	// +kubebuilder:validation:Enum=Always;IfNotPresent;Never
	PullPolicy corev1.PullPolicy `json:"pullPolicy,omitempty"`
	// pullSecrets for the provider pods.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=16
	PullSecrets []LocalObjectReference `json:"pullSecrets,omitempty"`
}

// ProviderResources are the provider container's compute resources, as a container's
// resources spell them.
type ProviderResources struct {
	// limits: the most of each resource the container may use, e.g. cpu: 1000m, memory: 512Mi.
	// +optional
	// +kubebuilder:validation:MaxProperties=16
	Limits corev1.ResourceList `json:"limits,omitempty"`
	// requests: what the scheduler reserves for the container, e.g. cpu: 50m, memory: 128Mi.
	// +optional
	// +kubebuilder:validation:MaxProperties=16
	Requests corev1.ResourceList `json:"requests,omitempty"`
}

// Toleration lets provider pods run on nodes with a matching taint, as a pod's tolerations spell
// it.
type Toleration struct {
	// key of the taint; empty with operator Exists matches every taint.
	// +optional
	// +kubebuilder:validation:MaxLength=317
	Key string `json:"key,omitempty"`
	// operator relating key and value: Equal (unset means Equal) or Exists.
	// +optional
	// +kubebuilder:validation:Enum=Equal;Exists
	Operator corev1.TolerationOperator `json:"operator,omitempty"`
	// value the taint's value must equal, with operator Equal.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	Value string `json:"value,omitempty"`
	// effect of the taints matched: NoSchedule, PreferNoSchedule or NoExecute; unset matches
	// every effect.
	// +optional
	// +kubebuilder:validation:Enum=NoSchedule;PreferNoSchedule;NoExecute
	Effect corev1.TaintEffect `json:"effect,omitempty"`
	// tolerationSeconds is how long a pod stays bound to a node tainted NoExecute; unset, for ever.
	// +optional
	TolerationSeconds *int64 `json:"tolerationSeconds,omitempty"`
}

// PolicyRule is one rule of a Role, as RBAC spells it.
type PolicyRule struct {
	// verbs allowed, e.g. get, list, watch; * is every verb.
	// +listType=atomic
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:MaxLength=63
	Verbs []string `json:"verbs"`
	// apiGroups of the resources; "" is the core group.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=253
	APIGroups []string `json:"apiGroups,omitempty"`
	// resources the rule applies to, with their subresources as resource/subresource.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=253
	Resources []string `json:"resources,omitempty"`
	// resourceNames narrows the rule to these objects' names.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=256
	// +kubebuilder:validation:items:MaxLength=253
	ResourceNames []string `json:"resourceNames,omitempty"`
	// nonResourceURLs are URL paths (not objects) the rule applies to; a Role cannot hold them.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=2048
	NonResourceURLs []string `json:"nonResourceURLs,omitempty"`
}

// ProviderLogging configures the provider's logs.
type ProviderLogging struct {
	// level passed as --log-level.
	// +optional
	// +kubebuilder:validation:MaxLength=32
	Level string `json:"level,omitempty"`
	// format passed as --log-format.
	// +optional
	// +kubebuilder:validation:Enum=text;json
	Format string `json:"format,omitempty"`
}

// ProviderConcurrency is how much one provider process does at once. The fields are on the
// class, which only a cluster administrator writes, not on the Provider: a tenant must not be
// able to lift the limits that protect a host (ADR-0132). The bounds are the binary's own.
type ProviderConcurrency struct {
	// workers: objects each of the provider's controllers reconciles at once, passed as
	// --workers. Unset: the binary's default, 16.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=64
	Workers int32 `json:"workers,omitempty"`
	// hostDomainOperations: machine passes (a converge or a teardown) talking to one host at
	// once, passed as --host-domain-operations. Unset: the binary's default, 8.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=256
	HostDomainOperations int32 `json:"hostDomainOperations,omitempty"`
	// hostVolumeUploads: volume uploads (seed ISOs, import markers) streaming to one host at
	// once, passed as --host-volume-uploads. Unset: the binary's default, 4.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=256
	HostVolumeUploads int32 `json:"hostVolumeUploads,omitempty"`
	// vcenterClones: clones one vsphere provider's vCenter session runs at once, passed as
	// --vcenter-clones. Only for backend vsphere. Unset: the binary's default, 4.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=256
	VCenterClones int32 `json:"vcenterClones,omitempty"`
	// vcenterPowerOperations: power operations one vsphere provider's vCenter session runs at
	// once, passed as --vcenter-power-operations. Only for backend vsphere. Unset: the binary's
	// default, 16.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=256
	VCenterPowerOperations int32 `json:"vcenterPowerOperations,omitempty"`
}

// ProviderClassStatus reports whether the class is usable.
type ProviderClassStatus struct {
	// conditions: Ready.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=32
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// providers counts the Providers referencing the class, in every namespace.
	// +optional
	Providers int32 `json:"providers,omitempty"`
	// image is the full reference the class's provider pods run: repository:tag, and
	// @digest when spec.image.digest pins it.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Image string `json:"image,omitempty"`
	// observedGeneration is the generation the status was computed for.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
}

// ProviderClass describes one provider backend and how its workloads run.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=bpc,categories=banlieue
// +kubebuilder:printcolumn:name="Backend",type=string,JSONPath=`.spec.backend`
// +kubebuilder:printcolumn:name="Image",type=string,JSONPath=`.status.image`
// +kubebuilder:printcolumn:name="Providers",type=integer,JSONPath=`.status.providers`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=='Ready')].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type ProviderClass struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   ProviderClassSpec   `json:"spec"`
	Status ProviderClassStatus `json:"status,omitempty"`
}

// ProviderClassList is a list of ProviderClasses.
//
// +kubebuilder:object:root=true
type ProviderClassList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ProviderClass `json:"items"`
}

func init() {
	SchemeBuilder.Register(&ProviderClass{}, &ProviderClassList{})
}
