package operator

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
	"banlieue.io/banlieue/internal/jobbounds"
)

func TestDeploymentPod(t *testing.T) {
	d := decode[appsv1.Deployment](t, deployment(guideProvider(), libvirtClass(), "banlieue-system", Options{BuildNamespace: DefaultBuildNamespace}.withDefaults()))
	const wl = "banlieue-provider-libvirt-libvirt-edge-host-7-6f5aeeba6513f8e3"
	if d.Name != wl || d.Namespace != "banlieue-system" {
		t.Errorf("deployment %s/%s", d.Namespace, d.Name)
	}
	if got := *d.Spec.Replicas; got != 1 {
		t.Errorf("replicas %d", got)
	}
	if want := map[string]string{banlieuev1.LabelName: "banlieue", banlieuev1.LabelInstance: wl}; !reflect.DeepEqual(d.Spec.Selector.MatchLabels, want) {
		t.Errorf("selector %v", d.Spec.Selector.MatchLabels)
	}
	pod := d.Spec.Template.Spec
	wantPodSC := &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true), RunAsUser: ptr.To[int64](65532), RunAsGroup: ptr.To[int64](65532),
		FSGroup: ptr.To[int64](65532), SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}}
	if !reflect.DeepEqual(pod.SecurityContext, wantPodSC) {
		t.Errorf("pod securityContext %+v", pod.SecurityContext)
	}
	if pod.ServiceAccountName != wl || *pod.TerminationGracePeriodSeconds != 30 {
		t.Errorf("serviceAccountName %q, terminationGracePeriodSeconds %d", pod.ServiceAccountName, *pod.TerminationGracePeriodSeconds)
	}
	if len(pod.Containers) != 1 {
		t.Fatalf("containers %d", len(pod.Containers))
	}
	c := pod.Containers[0]
	if c.Name != "provider" || c.Image != "registry.example/banlieue:v0.1.0" || c.ImagePullPolicy != corev1.PullIfNotPresent {
		t.Errorf("container %s image %s pullPolicy %s", c.Name, c.Image, c.ImagePullPolicy)
	}
	wantArgs := []string{"provider", "libvirt", "--provider-name", "libvirt-edge-host-7", "--namespace", "banlieue-system",
		"--leader-election-id", wl, "--leader-election-namespace", "banlieue-system",
		"--import-image", "registry.example/banlieue:v0.1.0", "--import-service-account", wl + "-import",
		"--console-port", "8443", "--console-relay", "system:serviceaccount:banlieue-system:banlieue-controller",
		"--import-deadline", "6h0m0s", "--import-cpu-request", "100m", "--import-cpu-limit", "1", "--import-memory-request", "64Mi", "--import-memory-limit", "256Mi",
		// Import Jobs pull as the provider pod does (ADR-0126).
		"--import-image-pull-policy", "IfNotPresent",
		"--workers", "16", "--host-domain-operations", "8", "--host-volume-uploads", "4",
		"--log-level", "info", "--log-format", "json"}
	if !reflect.DeepEqual(c.Args, wantArgs) {
		t.Errorf("args\n got %q\nwant %q", c.Args, wantArgs)
	}
	wantEnv := []corev1.EnvVar{
		{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
		{Name: "POD_NAMESPACE", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.namespace"}}},
		{Name: "POD_SERVICE_ACCOUNT", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "spec.serviceAccountName"}}},
	}
	if !reflect.DeepEqual(c.Env, wantEnv) {
		t.Errorf("env %+v", c.Env)
	}
	wantPorts := []corev1.ContainerPort{{Name: "metrics", ContainerPort: 8080, Protocol: corev1.ProtocolTCP}, {Name: "health", ContainerPort: 8081, Protocol: corev1.ProtocolTCP},
		{Name: "console", ContainerPort: 8443, Protocol: corev1.ProtocolTCP}}
	if !reflect.DeepEqual(c.Ports, wantPorts) {
		t.Errorf("ports %+v", c.Ports)
	}
	health := corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/livez", Port: intstr.FromString("health")}}
	if want := (&corev1.Probe{ProbeHandler: health, InitialDelaySeconds: 10, PeriodSeconds: 30, TimeoutSeconds: 3, FailureThreshold: 3}); !reflect.DeepEqual(c.LivenessProbe, want) {
		t.Errorf("liveness %+v", c.LivenessProbe)
	}
	health.HTTPGet = &corev1.HTTPGetAction{Path: "/readyz", Port: intstr.FromString("health")}
	if want := (&corev1.Probe{ProbeHandler: health, InitialDelaySeconds: 2, PeriodSeconds: 5, TimeoutSeconds: 2, FailureThreshold: 3}); !reflect.DeepEqual(c.ReadinessProbe, want) {
		t.Errorf("readiness %+v", c.ReadinessProbe)
	}
	wantSC := &corev1.SecurityContext{AllowPrivilegeEscalation: ptr.To(false), ReadOnlyRootFilesystem: ptr.To(true),
		Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}, SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}}
	if !reflect.DeepEqual(c.SecurityContext, wantSC) {
		t.Errorf("container securityContext %+v", c.SecurityContext)
	}
	if !equalResources(c.Resources, defaultResources) {
		t.Errorf("resources %+v", c.Resources)
	}
}

func TestDeploymentClassOptions(t *testing.T) {
	class := libvirtClass()
	class.Spec.Logging = nil
	class.Spec.Image.PullPolicy = ""
	class.Spec.Image.PullSecrets = []banlieuev1.LocalObjectReference{{Name: "regcred"}}
	class.Spec.NodeSelector = map[string]string{"node-role.kubernetes.io/infra": ""}
	class.Spec.Tolerations = []banlieuev1.Toleration{{Key: "infra", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}
	custom := banlieuev1.ProviderResources{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("200m")}}
	class.Spec.Resources = &custom
	// An unset field passes no flag: the binary's default applies.
	class.Spec.Concurrency = &banlieuev1.ProviderConcurrency{Workers: 4, HostVolumeUploads: 1}
	opts := Options{BuildTolerations: []corev1.Toleration{
		{Key: "build", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
		{Key: "gpu", Operator: corev1.TolerationOpEqual, Value: "true", Effect: corev1.TaintEffectNoExecute},
	}, ImportBounds: jobbounds.Bounds{Deadline: 45 * time.Minute, MemoryLimit: resource.MustParse("1Gi")}}
	d := decode[appsv1.Deployment](t, deployment(guideProvider(), class, "providers", opts))
	pod := d.Spec.Template.Spec
	if !reflect.DeepEqual(pod.ImagePullSecrets, []corev1.LocalObjectReference{{Name: "regcred"}}) || !reflect.DeepEqual(pod.NodeSelector, class.Spec.NodeSelector) ||
		!reflect.DeepEqual(pod.Tolerations, []corev1.Toleration{{Key: "infra", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}) {
		t.Errorf("pod scheduling fields not copied from the class: %+v", pod)
	}
	c := pod.Containers[0]
	if c.ImagePullPolicy != "" {
		t.Errorf("pullPolicy %q, want unset", c.ImagePullPolicy)
	}
	if !equalResources(c.Resources, custom) {
		t.Errorf("resources %+v, want the class's", c.Resources)
	}
	wantArgs := []string{"provider", "libvirt", "--provider-name", "libvirt-edge-host-7", "--namespace", "banlieue-system",
		"--leader-election-id", "banlieue-provider-libvirt-libvirt-edge-host-7-6f5aeeba6513f8e3", "--leader-election-namespace", "providers",
		"--import-image", "registry.example/banlieue:v0.1.0",
		"--import-service-account", "banlieue-provider-libvirt-libvirt-edge-host-7-6f5aeeba6513f8e3-import",
		"--console-port", "8443", "--console-relay", "system:serviceaccount:banlieue-system:banlieue-controller", "--build-toleration", "build:NoSchedule", "--build-toleration", "gpu=true:NoExecute",
		"--import-deadline", "45m0s", "--import-cpu-request", "0", "--import-cpu-limit", "0", "--import-memory-request", "0", "--import-memory-limit", "1Gi",
		"--import-image-pull-secret", "regcred", "--workers", "4", "--host-volume-uploads", "1"}
	if !reflect.DeepEqual(c.Args, wantArgs) {
		t.Errorf("args\n got %q\nwant %q", c.Args, wantArgs)
	}
	if len(d.OwnerReferences) != 0 {
		t.Errorf("a Deployment outside the Provider's namespace cannot be owned: %+v", d.OwnerReferences)
	}
}

func TestReplicas(t *testing.T) {
	for in, want := range map[int32]int32{-3: 1, 0: 1, 1: 1, 3: 3} {
		if got := replicas(in); got != want {
			t.Errorf("replicas(%d) = %d, want %d", in, got, want)
		}
	}
}

func TestImageRef(t *testing.T) {
	const digest = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	tests := []struct {
		img   banlieuev1.ProviderImage
		want  string
		valid bool
	}{
		{banlieuev1.ProviderImage{Repository: "registry.example/banlieue", Tag: "v0.1.0"}, "registry.example/banlieue:v0.1.0", true},
		{banlieuev1.ProviderImage{Repository: "registry.example/banlieue", Tag: "v0.1.0", Digest: digest}, "registry.example/banlieue:v0.1.0@" + digest, true},
		{banlieuev1.ProviderImage{Repository: "registry.example/banlieue", Digest: digest}, "registry.example/banlieue@" + digest, false},
		{banlieuev1.ProviderImage{Tag: "v0.1.0"}, ":v0.1.0", false},
	}
	for _, tt := range tests {
		if got := imageRef(tt.img); got != tt.want {
			t.Errorf("imageRef(%+v) = %q, want %q", tt.img, got, tt.want)
		}
		if got := imageValid(tt.img); got != tt.valid {
			t.Errorf("imageValid(%+v) = %v, want %v", tt.img, got, tt.valid)
		}
	}
}

func equalResources(a corev1.ResourceRequirements, b banlieuev1.ProviderResources) bool {
	eq := func(x, y corev1.ResourceList) bool {
		if len(x) != len(y) {
			return false
		}
		for k, v := range x {
			if w, ok := y[k]; !ok || v.Cmp(w) != 0 {
				return false
			}
		}
		return true
	}
	return eq(a.Requests, b.Requests) && eq(a.Limits, b.Limits)
}

// client.Apply decodes the API server's answer into the apply configuration it sent. The
// configuration's resource maps must be its own: decoded into the shared defaults, concurrent
// reconciles crashed the operator ("concurrent map writes", found by test/monitoring in CI), and
// any answer rewrote the defaults of every later Deployment.
func TestResourcesOwnTheirMaps(t *testing.T) {
	class := banlieuev1.ProviderResources{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("200m")},
		Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")},
	}
	answer := []byte(`{"requests":{"cpu":"7","memory":"7Gi","ephemeral-storage":"1Gi"},"limits":{"cpu":"9","memory":"9Gi"}}`)
	for _, tt := range []struct {
		name string
		in   *banlieuev1.ProviderResources
	}{{"the defaults", nil}, {"a class's", &class}} {
		source := &defaultResources // what resources(tt.in) is built from
		if tt.in != nil {
			source = tt.in
		}
		before := source.DeepCopy()
		if err := json.Unmarshal(answer, resources(tt.in)); err != nil {
			t.Fatal(err)
		}
		if !equalResources(corev1.ResourceRequirements{Requests: source.Requests, Limits: source.Limits}, *before) {
			t.Errorf("%s: decoding an answer into the apply configuration changed them to %+v", tt.name, *source)
		}
	}
}
