package operator

import (
	"cmp"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/intstr"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"

	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
	"banlieue.io/banlieue/internal/console"
	"banlieue.io/banlieue/internal/jobimage"
)

// Fixed shape of the provider pod (docs/guides/libvirt-provider.md, "5. What the operator creates for it").
const (
	containerName      = "provider"
	metricsPort        = 8080
	healthPort         = 8081
	nonRootID          = 65532
	terminationSeconds = 30
)

// controllerServiceAccount is the controller's account, which the chart and config/rbac name.
const controllerServiceAccount = "banlieue-controller"

// defaultResources apply when the class sets none.
var defaultResources = banlieuev1.ProviderResources{
	Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("50m"), corev1.ResourceMemory: resource.MustParse("128Mi")},
	Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1000m"), corev1.ResourceMemory: resource.MustParse("512Mi")},
}

// deployment is the provider Deployment of p under class, in workloadNs.
func deployment(p *banlieuev1.Provider, class *banlieuev1.ProviderClass, workloadNs string, opts Options) *appsv1ac.DeploymentApplyConfiguration {
	name := workloadName(class.Name, p.Namespace, p.Name)
	lbls := workloadLabels(p, class)
	pod := corev1ac.PodSpec().
		WithServiceAccountName(name).
		WithNodeSelector(class.Spec.NodeSelector).
		WithTolerations(tolerations(class.Spec.Tolerations)...).
		WithTerminationGracePeriodSeconds(terminationSeconds).
		WithSecurityContext(corev1ac.PodSecurityContext().
			WithRunAsNonRoot(true).
			WithRunAsUser(nonRootID).
			WithRunAsGroup(nonRootID).
			WithFSGroup(nonRootID).
			WithSeccompProfile(corev1ac.SeccompProfile().WithType(corev1.SeccompProfileTypeRuntimeDefault))).
		WithContainers(container(p, class, workloadNs, opts))
	for _, s := range class.Spec.Image.PullSecrets {
		pod.WithImagePullSecrets(corev1ac.LocalObjectReference().WithName(s.Name))
	}
	return withOwner(appsv1ac.Deployment(name, workloadNs).WithLabels(lbls).WithAnnotations(workloadAnnotations(p)), p, workloadNs).
		WithSpec(appsv1ac.DeploymentSpec().
			WithReplicas(replicas(class.Spec.Replicas)).
			WithSelector(metav1ac.LabelSelector().WithMatchLabels(selectorLabels(p, class))).
			WithTemplate(corev1ac.PodTemplateSpec().WithLabels(lbls).WithSpec(pod)))
}

func container(p *banlieuev1.Provider, class *banlieuev1.ProviderClass, workloadNs string, opts Options) *corev1ac.ContainerApplyConfiguration {
	c := corev1ac.Container().
		WithName(containerName).
		WithImage(imageRef(class.Spec.Image)).
		WithArgs(providerArgs(p, class, workloadNs, opts)...).
		WithEnv(
			fieldEnv("POD_NAME", "metadata.name"),
			fieldEnv("POD_NAMESPACE", "metadata.namespace"),
			fieldEnv("POD_SERVICE_ACCOUNT", "spec.serviceAccountName"),
		).
		WithPorts(
			corev1ac.ContainerPort().WithName("metrics").WithContainerPort(metricsPort).WithProtocol(corev1.ProtocolTCP),
			corev1ac.ContainerPort().WithName("health").WithContainerPort(healthPort).WithProtocol(corev1.ProtocolTCP),
			corev1ac.ContainerPort().WithName("console").WithContainerPort(console.ProviderPort).WithProtocol(corev1.ProtocolTCP),
		).
		WithLivenessProbe(probe("/livez", 10, 30, 3)).
		WithReadinessProbe(probe("/readyz", 2, 5, 2)).
		WithResources(resources(class.Spec.Resources)).
		WithSecurityContext(corev1ac.SecurityContext().
			WithAllowPrivilegeEscalation(false).
			WithReadOnlyRootFilesystem(true).
			WithCapabilities(corev1ac.Capabilities().WithDrop("ALL")).
			WithSeccompProfile(corev1ac.SeccompProfile().WithType(corev1.SeccompProfileTypeRuntimeDefault)))
	if class.Spec.Image.PullPolicy != "" {
		c.WithImagePullPolicy(class.Spec.Image.PullPolicy)
	}
	return c
}

// providerArgs run `banlieue provider <backend>` for this one Provider. The lease lives next to
// the Deployment and is named after it so each instance elects its own leader. The import
// Jobs run as the Provider's own import account, which the operator creates with the workload.
func providerArgs(p *banlieuev1.Provider, class *banlieuev1.ProviderClass, workloadNs string, opts Options) []string {
	name := workloadName(class.Name, p.Namespace, p.Name)
	args := []string{
		"provider", class.Spec.Backend,
		"--provider-name", p.Name,
		"--namespace", p.Namespace,
		"--leader-election-id", name,
		"--leader-election-namespace", workloadNs,
		"--import-image", imageRef(class.Spec.Image),
		"--import-service-account", importName(name),
		// The console relay is the controller, in the operator's namespace (ADR-0140).
		"--console-port", strconv.Itoa(console.ProviderPort),
		"--console-relay", "system:serviceaccount:" + cmp.Or(opts.Namespace, DefaultNamespace) + ":" + controllerServiceAccount,
	}
	for _, t := range opts.BuildTolerations {
		args = append(args, "--build-toleration", FormatToleration(t))
	}
	args = append(args, opts.ImportBounds.Args("import")...)
	// Import Jobs pull the class's image as the provider pod does; the secrets are looked up in
	// the build namespace, where the Jobs run (ADR-0126).
	pull := jobimage.Pull{Policy: class.Spec.Image.PullPolicy}
	for _, s := range class.Spec.Image.PullSecrets {
		pull.Secrets = append(pull.Secrets, s.Name)
	}
	args = append(args, pull.Args("import")...)
	args = append(args, concurrencyArgs(class.Spec.Concurrency)...)
	if l := class.Spec.Logging; l != nil {
		if l.Level != "" {
			args = append(args, "--log-level", l.Level)
		}
		if l.Format != "" {
			args = append(args, "--log-format", l.Format)
		}
	}
	return args
}

// concurrencyArgs are the flags of the class's concurrency fields that are set; an unset one
// leaves the provider binary's default in force, so a newer binary's default reaches classes
// that never chose.
func concurrencyArgs(c *banlieuev1.ProviderConcurrency) []string {
	if c == nil {
		return nil
	}
	var args []string
	for _, f := range []struct {
		flag string
		n    int32
	}{{"--workers", c.Workers}, {"--host-domain-operations", c.HostDomainOperations}, {"--host-volume-uploads", c.HostVolumeUploads},
		{"--vcenter-clones", c.VCenterClones}, {"--vcenter-power-operations", c.VCenterPowerOperations}} {
		if f.n != 0 {
			args = append(args, f.flag, strconv.Itoa(int(f.n)))
		}
	}
	return args
}

// replicas clamps the class's value: a provider with no replica would leave its hosts unwatched.
func replicas(n int32) int32 {
	return max(n, 1)
}

func fieldEnv(name, path string) *corev1ac.EnvVarApplyConfiguration {
	return corev1ac.EnvVar().WithName(name).WithValueFrom(corev1ac.EnvVarSource().
		WithFieldRef(corev1ac.ObjectFieldSelector().WithFieldPath(path)))
}

func probe(path string, initialDelay, period, timeout int32) *corev1ac.ProbeApplyConfiguration {
	return corev1ac.Probe().
		WithHTTPGet(corev1ac.HTTPGetAction().WithPath(path).WithPort(intstr.FromString("health"))).
		WithInitialDelaySeconds(initialDelay).
		WithPeriodSeconds(period).
		WithTimeoutSeconds(timeout).
		WithFailureThreshold(3)
}

// resources is the container's resources: the class's, or defaultResources. The apply
// configuration gets maps of its own: WithRequests and WithLimits keep the map they are given,
// and client.Apply decodes the API server's answer into the configuration, so a shared map (the
// defaults) was written by every reconcile of a Provider without a class's resources at once,
// and two workers crashed the operator with "concurrent map writes".
func resources(r *banlieuev1.ProviderResources) *corev1ac.ResourceRequirementsApplyConfiguration {
	if r == nil {
		r = &defaultResources
	}
	r = r.DeepCopy()
	ac := corev1ac.ResourceRequirements()
	if r.Requests != nil {
		ac.WithRequests(r.Requests)
	}
	if r.Limits != nil {
		ac.WithLimits(r.Limits)
	}
	return ac
}

func tolerations(ts []banlieuev1.Toleration) []*corev1ac.TolerationApplyConfiguration {
	out := make([]*corev1ac.TolerationApplyConfiguration, 0, len(ts))
	for _, t := range ts {
		ac := corev1ac.Toleration()
		if t.Key != "" {
			ac.WithKey(t.Key)
		}
		if t.Operator != "" {
			ac.WithOperator(t.Operator)
		}
		if t.Value != "" {
			ac.WithValue(t.Value)
		}
		if t.Effect != "" {
			ac.WithEffect(t.Effect)
		}
		if t.TolerationSeconds != nil {
			ac.WithTolerationSeconds(*t.TolerationSeconds)
		}
		out = append(out, ac)
	}
	return out
}
