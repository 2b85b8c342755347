// Package imagebuilder is banlieue-imagebuilder: it runs one build Job per VMImage Url source
// and mirrors the Job into VMImage status.buildArtifact.
package imagebuilder

// The rules below generate config/rbac/imagebuilder/role.yaml (ClusterRole banlieue-imagebuilder).
//
// +kubebuilder:rbac:groups=banlieue.io,resources=vmimages,verbs=get;list;watch
// +kubebuilder:rbac:groups=banlieue.io,resources=vmimages/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=batch,resources=jobs,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=persistentvolumeclaims,verbs=get
// +kubebuilder:rbac:groups="";events.k8s.io,resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,verbs=get;create;update;patch
