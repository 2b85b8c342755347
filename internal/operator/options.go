package operator

import (
	"fmt"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
	"banlieue.io/banlieue/internal/jobbounds"
)

// Defaults of Options (docs/operations.md, "Role-specific flags").
const (
	DefaultNamespace      = "banlieue-system"
	DefaultBuildNamespace = "banlieue-imagebuild"
)

// DefaultWorkers is the operator's --workers (docs/operations.md, "Common flags"): it sees one
// Provider per host and each pass is a few applies.
const DefaultWorkers = 2

// Options configure the operator's controllers.
type Options struct {
	// Namespace is the operator's own namespace (default banlieue-system).
	Namespace string
	// WatchNamespace limits the Provider watch to one namespace; empty watches all of them. The
	// limit is enforced by the manager's cache, see CacheOptions.
	WatchNamespace string
	// BuildNamespace holds the import Jobs, each Provider's import ServiceAccount, which is
	// granted read access to that Provider alone, and the provider accounts' admission params ConfigMap
	// (default banlieue-imagebuild).
	BuildNamespace string
	// BuildNodeSelector is accepted for symmetry with the imagebuilder but not forwarded: the
	// libvirt provider has no node-selector flag for import Jobs, on purpose (docs/operations.md, "Role-specific flags").
	BuildNodeSelector map[string]string
	// BuildTolerations are forwarded to every provider as --build-toleration.
	BuildTolerations []corev1.Toleration
	// ImportBounds are forwarded to every provider as --import-deadline and the other bound
	// flags, which set them on import Jobs; without a deadline, jobbounds.DefaultImport.
	ImportBounds jobbounds.Bounds
	// Workers is how many objects each controller reconciles at once (--workers); zero means one.
	Workers int
}

func (o Options) withDefaults() Options {
	if o.Namespace == "" {
		o.Namespace = DefaultNamespace
	}
	if o.BuildNamespace == "" {
		o.BuildNamespace = DefaultBuildNamespace
	}
	if o.ImportBounds.Deadline == 0 {
		o.ImportBounds = jobbounds.DefaultImport()
	}
	return o
}

// CacheOptions is the manager cache the operator needs: Providers only from WatchNamespace when
// set, and only the Deployments the operator manages. The operator must not be given a cache
// pinned to its own namespace (as the other roles' --namespace does): Providers and their
// workloads live in every namespace.
func CacheOptions(opts Options) cache.Options {
	provider := cache.ByObject{}
	if opts.WatchNamespace != "" {
		provider.Namespaces = map[string]cache.Config{opts.WatchNamespace: {}}
	}
	return cache.Options{ByObject: map[client.Object]cache.ByObject{
		&banlieuev1.Provider{}: provider,
		&appsv1.Deployment{}: {Label: labels.SelectorFromSet(labels.Set{
			banlieuev1.LabelManagedBy: ManagedBy,
		})},
	}}
}

// ParseToleration parses the --build-toleration format `key[=value]:Effect`. Without a value the
// toleration uses operator Exists, with one operator Equal.
func ParseToleration(s string) (corev1.Toleration, error) {
	i := strings.LastIndex(s, ":")
	if i < 0 {
		return corev1.Toleration{}, fmt.Errorf("invalid --build-toleration: %q: want key[=value]:Effect", s)
	}
	kv, effect := s[:i], corev1.TaintEffect(s[i+1:])
	switch effect {
	case corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute:
	default:
		return corev1.Toleration{}, fmt.Errorf("invalid --build-toleration: %q: effect must be NoSchedule, PreferNoSchedule or NoExecute", s)
	}
	key, value, hasValue := strings.Cut(kv, "=")
	if errs := validation.IsQualifiedName(key); len(errs) > 0 {
		return corev1.Toleration{}, fmt.Errorf("invalid --build-toleration: %q: key: %s", s, strings.Join(errs, "; "))
	}
	if !hasValue {
		return corev1.Toleration{Key: key, Operator: corev1.TolerationOpExists, Effect: effect}, nil
	}
	if errs := validation.IsValidLabelValue(value); len(errs) > 0 {
		return corev1.Toleration{}, fmt.Errorf("invalid --build-toleration: %q: value: %s", s, strings.Join(errs, "; "))
	}
	return corev1.Toleration{Key: key, Operator: corev1.TolerationOpEqual, Value: value, Effect: effect}, nil
}

// FormatToleration is the inverse of ParseToleration, used to forward tolerations to providers.
func FormatToleration(t corev1.Toleration) string {
	if t.Operator == corev1.TolerationOpExists || t.Value == "" {
		return t.Key + ":" + string(t.Effect)
	}
	return t.Key + "=" + t.Value + ":" + string(t.Effect)
}
