// Package imagebuilder is banlieue-imagebuilder: it runs one build Job per VMImage Url source
// and mirrors the Job into VMImage status.buildArtifact.
package imagebuilder

// The rules below generate config/rbac/imagebuilder/role.yaml: ClusterRole banlieue-imagebuilder
// for what is cluster-scoped or lives where it cannot be named in advance (VMImages, and events,
// which are recorded for cluster-scoped VMImages), and Role banlieue-imagebuilder for everything
// in the build namespace: the build Jobs, their pods (read uncached for a termination message)
// and the build Secrets. A cluster-wide grant on Jobs would let a compromised imagebuilder run a
// pod as any ServiceAccount of any namespace; one on Secrets would reach every credential of the
// cluster. Create and patch (server-side apply) are all it needs on Secrets: it never reads one
// back, and the garbage collector deletes a build Secret with its VMImage.
//
// +kubebuilder:rbac:groups=banlieue.io,resources=vmimages,verbs=get;list;watch
// +kubebuilder:rbac:groups=banlieue.io,resources=vmimages/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=batch,namespace=banlieue-imagebuild,resources=jobs,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups="",namespace=banlieue-imagebuild,resources=pods,verbs=get;list;watch
// +kubebuilder:rbac:groups="";events.k8s.io,resources=events,verbs=create;patch
// +kubebuilder:rbac:groups="",namespace=banlieue-imagebuild,resources=secrets,verbs=create;patch
// +kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,verbs=get;create;update;patch
//
// /metrics checks each caller's token and its right to get /metrics (internal/app/metrics_server.go).
// +kubebuilder:rbac:groups=authentication.k8s.io,resources=tokenreviews,verbs=create
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create
