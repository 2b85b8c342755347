package imagebuilder

import (
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"banlieue.io/banlieue/internal/imagebuilder/build"
	"banlieue.io/banlieue/internal/jobbounds"
	"banlieue.io/banlieue/internal/jobimage"
)

// DefaultWorkers is the imagebuilder's --workers (docs/operations.md, "Common flags"): a pass
// creates or reads one build Job; the builds themselves run in their Jobs.
const DefaultWorkers = 2

// Options configure the imagebuilder role (docs/operations.md, "Role-specific flags").
type Options struct {
	// BuildNamespace holds the artifacts PVC and the build Jobs.
	BuildNamespace string
	// BuildImage is the container image of build Jobs (the banlieue image).
	BuildImage string
	// ArtifactsPVC is the PVC the builds write to and the imports read from.
	ArtifactsPVC string
	// NodeSelector and Tolerations place build pods (--build-node-selector, --build-toleration).
	NodeSelector map[string]string
	Tolerations  []corev1.Toleration
	// Limits bound every build's source (--max-download-size and the other limit flags).
	Limits build.Limits
	// Bounds are every build Job's deadline and resources (--build-deadline, --build-memory-limit
	// and the other bound flags); without a deadline, jobbounds.DefaultBuild (Reconciler).
	Bounds jobbounds.Bounds
	// Pull is how build pods pull BuildImage (--build-image-pull-policy, --build-image-pull-secret).
	Pull jobimage.Pull
	// CAConfigMap names a ConfigMap in BuildNamespace whose every key is a PEM CA bundle the
	// build trusts for https sources and registries, beside the image's roots
	// (--build-ca-configmap); empty: the image's roots only.
	CAConfigMap string
	// Workers is how many VMImages are reconciled at once (--workers); zero means one.
	Workers int
}

// Setup registers the build controller with mgr.
func Setup(mgr manager.Manager, opts Options) error {
	return (&Reconciler{
		Client:         mgr.GetClient(),
		APIReader:      mgr.GetAPIReader(),
		BuildNamespace: opts.BuildNamespace,
		BuildImage:     opts.BuildImage,
		ArtifactsPVC:   opts.ArtifactsPVC,
		NodeSelector:   opts.NodeSelector,
		Tolerations:    opts.Tolerations,
		Limits:         opts.Limits,
		Bounds:         opts.Bounds,
		Pull:           opts.Pull,
		CAConfigMap:    opts.CAConfigMap,
		Workers:        opts.Workers,
	}).SetupWithManager(mgr)
}
