// Package imagebuilder is banlieue-imagebuilder: it runs one build Job per VMImage Url source
// and mirrors the Job into VMImage status.buildArtifact.
package imagebuilder

// The rules below generate config/rbac/imagebuilder/role.yaml: ClusterRole banlieue-imagebuilder
// and, for the build Secrets, Role banlieue-imagebuilder in the build namespace only: a
// cluster-wide grant on Secrets would reach every credential of the cluster. Create and patch
// (server-side apply) are all it needs: it never reads a Secret back, and the garbage collector
// deletes a build Secret with its VMImage.
//
// +kubebuilder:rbac:groups=banlieue.io,resources=vmimages,verbs=get;list;watch
// +kubebuilder:rbac:groups=banlieue.io,resources=vmimages/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=batch,resources=jobs,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=persistentvolumeclaims,verbs=get
// +kubebuilder:rbac:groups="";events.k8s.io,resources=events,verbs=create;patch
// +kubebuilder:rbac:groups="",namespace=banlieue-imagebuild,resources=secrets,verbs=create;patch
// +kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,verbs=get;create;update;patch
//
// /metrics checks each caller's token and its right to get /metrics (internal/app/metrics_server.go).
// +kubebuilder:rbac:groups=authentication.k8s.io,resources=tokenreviews,verbs=create
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create
