package operator

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
	"banlieue.io/banlieue/internal/jobbounds"
	"banlieue.io/banlieue/internal/testenv"
)

// policyFlags reads the quoted flags of the variable named name in
// config/admission/operator-workloads.yaml, the lists banlieue-operator-writes admits.
func policyFlags(t *testing.T, name string) []string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "config", "admission", "operator-workloads.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?s)- name: ` + name + `\n    expression: >-\n(.*?)\n  - name:`).FindSubmatch(data)
	if m == nil {
		t.Fatalf("operator-workloads.yaml has no variable %s", name)
	}
	var flags []string
	for _, q := range regexp.MustCompile(`'(--[a-z-]+)'`).FindAllSubmatch(m[1], -1) {
		flags = append(flags, string(q[1]))
	}
	return flags
}

// TestDeploymentMeetsOperatorAdmission: the provider Deployment, with every class option and
// operator option that adds an argument set, has the shape banlieue-operator-writes admits:
// the fixed flags in the policy's order, each once; every other flag in its optional list; its
// own account; no volume; only field references in its environment. TestOperator runs the
// real operator under the policy on the API server; this holds every argument it can emit.
func TestDeploymentMeetsOperatorAdmission(t *testing.T) {
	fixed, optional := policyFlags(t, "fixedFlags"), policyFlags(t, "optionalFlags")
	if len(fixed) != 8 || len(optional) == 0 {
		t.Fatalf("fixedFlags %q, optionalFlags %q", fixed, optional)
	}
	class := libvirtClass()
	class.Spec.Image.PullPolicy = corev1.PullAlways
	class.Spec.Image.PullSecrets = []banlieuev1.LocalObjectReference{{Name: "regcred"}, {Name: "other"}}
	// Every concurrency field set, the vCenter ones too (the API server admits those on a vsphere
	// class only; the Deployment is rendered alike for every backend).
	class.Spec.Concurrency = &banlieuev1.ProviderConcurrency{Workers: 4, HostDomainOperations: 2, HostVolumeUploads: 1,
		VCenterClones: 3, VCenterPowerOperations: 5}
	class.Spec.Logging = &banlieuev1.ProviderLogging{Level: "debug", Format: "json"}
	opts := Options{BuildNamespace: DefaultBuildNamespace, BuildTolerations: []corev1.Toleration{
		{Key: "build", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}},
		ImportBounds: jobbounds.Bounds{Deadline: 45 * time.Minute, MemoryLimit: resource.MustParse("1Gi")}}
	d := decode[appsv1.Deployment](t, deployment(guideProvider(), class, "providers", opts.withDefaults()))

	if !strings.HasPrefix(d.Name, "banlieue-provider-") || d.Labels[banlieuev1.LabelManagedBy] != "banlieue-operator" {
		t.Errorf("Deployment %s labels %v: want banlieue-provider-* and managed-by banlieue-operator", d.Name, d.Labels)
	}
	pod := d.Spec.Template.Spec
	if pod.ServiceAccountName != d.Name || len(pod.Volumes) != 0 || len(pod.Containers) != 1 || len(pod.InitContainers) != 0 {
		t.Errorf("pod: account %q, %d volumes, %d containers, %d init containers", pod.ServiceAccountName, len(pod.Volumes), len(pod.Containers), len(pod.InitContainers))
	}
	c := pod.Containers[0]
	for _, e := range c.Env {
		if e.ValueFrom == nil || e.ValueFrom.FieldRef == nil {
			t.Errorf("env %s is not a field reference", e.Name)
		}
	}
	args := c.Args
	if len(args) < 18 || len(args)%2 != 0 || args[0] != "provider" {
		t.Fatalf("args %q: want provider, the backend and eight flag pairs first, then pairs", args)
	}
	for i, f := range fixed {
		if args[2+2*i] != f {
			t.Errorf("args[%d] = %q, want %q (the policy's order)", 2+2*i, args[2+2*i], f)
		}
	}
	seen := map[string]int{}
	for _, a := range args {
		if !strings.HasPrefix(a, "-") {
			continue
		}
		seen[a]++
		if !slices.Contains(fixed, a) && !slices.Contains(optional, a) {
			t.Errorf("flag %s is in neither of the policy's lists: banlieue-operator-writes would refuse the Deployment", a)
		}
	}
	for _, f := range fixed {
		if seen[f] != 1 {
			t.Errorf("flag %s appears %d times, want once", f, seen[f])
		}
	}
	// Every optional flag was emitted here, so a flag the policy lists but the code no longer
	// writes shows up too.
	for _, f := range optional {
		if seen[f] == 0 {
			t.Errorf("the policy admits %s, which this fully optioned Deployment does not carry", f)
		}
	}
}
