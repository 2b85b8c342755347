// Package jobimage says how the kubelet gets the container image of the Jobs banlieue starts,
// build Jobs and import Jobs alike: the pull policy and the pull secrets (docs/guides/image-sources.md,
// "Jobs"). The roles are installed with a pull policy and pull secrets for their own pods; a Job
// that got neither would pull from where the roles' pods never do (ADR-0126).
package jobimage

import (
	"fmt"
	"slices"

	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

// Pull is how one kind of Job pulls its image.
type Pull struct {
	// Policy is every container's imagePullPolicy; empty leaves Kubernetes' default
	// (IfNotPresent, Always for a :latest tag).
	Policy corev1.PullPolicy
	// Secrets name Secrets in the Job's namespace (the build namespace) the kubelet pulls with.
	Secrets []string
}

// Flag suffixes: `--<kind>-image-pull-policy`, `--<kind>-image-pull-secret` (kind "build" or
// "import").
const (
	flagPolicy = "image-pull-policy"
	flagSecret = "image-pull-secret"
)

// Flag is the name of the kind's flag with suffix, for error messages.
func Flag(kind, suffix string) string { return "--" + kind + "-" + suffix }

// AddFlags registers the kind's flags on fs.
func (p *Pull) AddFlags(fs *pflag.FlagSet, kind string) {
	fs.Var((*policy)(&p.Policy), kind+"-"+flagPolicy,
		"imagePullPolicy of "+kind+" Job pods: Always, IfNotPresent or Never; empty: Kubernetes' default")
	fs.StringArrayVar(&p.Secrets, kind+"-"+flagSecret, p.Secrets,
		"Secret in the build namespace the kubelet pulls the "+kind+" Jobs' image with (repeatable)")
}

// Args are the flags that give a role p for the kind's Jobs (the operator forwards the
// ProviderClass's pull settings to every provider this way).
func (p Pull) Args(kind string) []string {
	var args []string
	if p.Policy != "" {
		args = append(args, Flag(kind, flagPolicy), string(p.Policy))
	}
	for _, s := range p.Secrets {
		args = append(args, Flag(kind, flagSecret), s)
	}
	return args
}

// Validate refuses a secret name no Secret can have: every Job would stay ErrImagePull.
func (p Pull) Validate(kind string) error {
	for _, s := range p.Secrets {
		if errs := validation.IsDNS1123Subdomain(s); len(errs) > 0 {
			return fmt.Errorf("invalid %s: %q: %s", Flag(kind, flagSecret), s, errs[0])
		}
	}
	return nil
}

// Apply sets p on the pod: every container's pull policy and the pod's pull secrets.
func (p Pull) Apply(spec *corev1.PodSpec) {
	for i := range spec.Containers {
		spec.Containers[i].ImagePullPolicy = p.Policy
	}
	spec.ImagePullSecrets = nil
	for _, s := range p.Secrets {
		spec.ImagePullSecrets = append(spec.ImagePullSecrets, corev1.LocalObjectReference{Name: s})
	}
}

// policy is a pflag.Value that accepts only Kubernetes' three pull policies (or empty).
type policy corev1.PullPolicy

var policies = []corev1.PullPolicy{corev1.PullAlways, corev1.PullIfNotPresent, corev1.PullNever}

func (v *policy) String() string { return string(*v) }

func (v *policy) Set(s string) error {
	if s != "" && !slices.Contains(policies, corev1.PullPolicy(s)) {
		return fmt.Errorf("%q: want Always, IfNotPresent or Never", s)
	}
	*v = policy(s)
	return nil
}

func (v *policy) Type() string { return "policy" }
