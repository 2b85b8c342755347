package install

import (
	"reflect"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// TestChartPodKnobs: podAnnotations, podLabels, priorityClassName, serviceAccount.annotations and
// imagebuilder.buildImage land on every role's pod template and ServiceAccount, and the selector
// labels stay the chart's own.
func TestChartPodKnobs(t *testing.T) {
	helm := helmBinary(t)
	objs := parseObjects(t, renderChart(t, helm,
		"--set", "podAnnotations.example\\.com/owner=infra", "--set", "podLabels.team=vm",
		"--set", "priorityClassName=system-cluster-critical",
		"--set", "serviceAccount.annotations.iam\\.example\\.com/role=banlieue",
		"--set", "imagebuilder.buildImage=my.registry/banlieue-build:v9"))
	deployments, accounts := 0, 0
	for _, o := range objs {
		switch o.GetKind() {
		case "Deployment":
			deployments++
			role := strings.TrimPrefix(o.GetName(), "banlieue-")
			tmpl := []string{"spec", "template"}
			annotations, _, _ := unstructured.NestedStringMap(o.Object, append(tmpl, "metadata", "annotations")...)
			labels, _, _ := unstructured.NestedStringMap(o.Object, append(tmpl, "metadata", "labels")...)
			priority, _, _ := unstructured.NestedString(o.Object, append(tmpl, "spec", "priorityClassName")...)
			wantLabels := map[string]string{"team": "vm", "app.kubernetes.io/name": "banlieue", "app.kubernetes.io/component": role}
			if !reflect.DeepEqual(annotations, map[string]string{"example.com/owner": "infra"}) ||
				!reflect.DeepEqual(labels, wantLabels) || priority != "system-cluster-critical" {
				t.Errorf("%s: pod annotations %v, labels %v (want %v), priorityClassName %q", role, annotations, labels, wantLabels, priority)
			}
			ctrs, _, _ := unstructured.NestedSlice(o.Object, append(tmpl, "spec", "containers")...)
			if build := envValue(ctrs[0].(map[string]any), "BANLIEUE_BUILD_IMAGE"); role == "imagebuilder" && build != "my.registry/banlieue-build:v9" {
				t.Errorf("imagebuilder: BANLIEUE_BUILD_IMAGE %q, want imagebuilder.buildImage", build)
			}
		case "ServiceAccount":
			accounts++
			if want := map[string]string{"iam.example.com/role": "banlieue"}; !reflect.DeepEqual(o.GetAnnotations(), want) {
				t.Errorf("ServiceAccount %s: annotations %v, want %v", o.GetName(), o.GetAnnotations(), want)
			}
		}
	}
	if deployments != 3 || accounts != 3 {
		t.Errorf("%d Deployments and %d ServiceAccounts, want 3 and 3", deployments, accounts)
	}
}

// TestChartKubeVersion: the chart refuses a cluster older than 1.32, the first to serve both
// ValidatingAdmissionPolicy v1 (templates/admission.yaml, 1.30) and CRD selectable fields (the
// provider's cache selects LibvirtMachines on one, ADR-0146), and renders for 1.32 on.
func TestChartKubeVersion(t *testing.T) {
	helm := helmBinary(t)
	if _, errOut, err := helmTemplate(helm, "--kube-version", "1.31.9"); err == nil ||
		!strings.Contains(errOut, "requires kubeVersion: >=1.32.0-0") {
		t.Errorf("Kubernetes 1.31.9: err %v, output %q; want the chart's kubeVersion refusal", err, errOut)
	}
	for _, v := range []string{"1.32.0", "1.37.2"} {
		if _, errOut, err := helmTemplate(helm, "--kube-version", v); err != nil {
			t.Errorf("Kubernetes %s refused: %v\n%s", v, err, errOut)
		}
	}
}

// TestChartSecurityAndSpread: podSecurityContext and securityContext replace the restricted
// defaults on every role (the defaults themselves are config/default's: TestChartMatchesKustomize),
// a topology spread constraint without labelSelector selects each role's own pods and one with a
// labelSelector keeps it.
func TestChartSecurityAndSpread(t *testing.T) {
	helm := helmBinary(t)
	objs := parseObjects(t, renderChart(t, helm,
		"--set", "podSecurityContext.runAsUser=1000", "--set", "securityContext.capabilities.add[0]=NET_BIND_SERVICE",
		"--set", "topologySpreadConstraints[0].maxSkew=1", "--set", "topologySpreadConstraints[0].topologyKey=topology.kubernetes.io/zone",
		"--set", "topologySpreadConstraints[0].whenUnsatisfiable=ScheduleAnyway",
		"--set", "topologySpreadConstraints[1].maxSkew=2", "--set", "topologySpreadConstraints[1].topologyKey=kubernetes.io/hostname",
		"--set", "topologySpreadConstraints[1].whenUnsatisfiable=DoNotSchedule",
		"--set", "topologySpreadConstraints[1].labelSelector.matchLabels.app\\.kubernetes\\.io/part-of=banlieue"))
	deployments := 0
	for _, o := range objs {
		if o.GetKind() != "Deployment" {
			continue
		}
		deployments++
		role := strings.TrimPrefix(o.GetName(), "banlieue-")
		pod := []string{"spec", "template", "spec"}
		podSC, _, _ := unstructured.NestedMap(o.Object, append(pod, "securityContext")...)
		wantPodSC := map[string]any{"runAsNonRoot": true, "runAsUser": float64(1000), "runAsGroup": float64(65532),
			"fsGroup": float64(65532), "seccompProfile": map[string]any{"type": "RuntimeDefault"}}
		if !reflect.DeepEqual(podSC, wantPodSC) {
			t.Errorf("%s: pod securityContext %v, want %v", role, podSC, wantPodSC)
		}
		ctrs, _, _ := unstructured.NestedSlice(o.Object, append(pod, "containers")...)
		sc, _, _ := unstructured.NestedMap(ctrs[0].(map[string]any), "securityContext")
		wantSC := map[string]any{"allowPrivilegeEscalation": false, "readOnlyRootFilesystem": true,
			"capabilities": map[string]any{"drop": []any{"ALL"}, "add": []any{"NET_BIND_SERVICE"}}}
		if !reflect.DeepEqual(sc, wantSC) {
			t.Errorf("%s: container securityContext %v, want %v", role, sc, wantSC)
		}
		spread, _, _ := unstructured.NestedSlice(o.Object, append(pod, "topologySpreadConstraints")...)
		want := []any{
			map[string]any{"maxSkew": float64(1), "topologyKey": "topology.kubernetes.io/zone", "whenUnsatisfiable": "ScheduleAnyway",
				"labelSelector": map[string]any{"matchLabels": map[string]any{"app.kubernetes.io/name": "banlieue", "app.kubernetes.io/component": role}}},
			map[string]any{"maxSkew": float64(2), "topologyKey": "kubernetes.io/hostname", "whenUnsatisfiable": "DoNotSchedule",
				"labelSelector": map[string]any{"matchLabels": map[string]any{"app.kubernetes.io/part-of": "banlieue"}}},
		}
		if !reflect.DeepEqual(spread, want) {
			t.Errorf("%s: topologySpreadConstraints %v, want %v", role, spread, want)
		}
	}
	if deployments != 3 {
		t.Errorf("%d Deployments, want 3", deployments)
	}
}

// TestChartPodDisruptionBudgets: one budget per role Deployment with more than one replica,
// selecting that role's pods; none with one replica or pdb.enabled=false; a count that would
// block every eviction is refused.
func TestChartPodDisruptionBudgets(t *testing.T) {
	helm := helmBinary(t)
	budgets := func(args ...string) map[string]map[string]any {
		out := map[string]map[string]any{}
		for _, o := range parseObjects(t, renderChart(t, helm, args...)) {
			if o.GetKind() == "PodDisruptionBudget" {
				spec, _, _ := unstructured.NestedMap(o.Object, "spec")
				out[o.GetNamespace()+"/"+o.GetName()] = spec
			}
		}
		return out
	}
	if got := budgets(); len(got) != 0 {
		t.Errorf("defaults (one replica each): budgets %v, want none", got)
	}
	selector := func(role string) map[string]any {
		return map[string]any{"matchLabels": map[string]any{"app.kubernetes.io/name": "banlieue", "app.kubernetes.io/component": role}}
	}
	got := budgets("--namespace", "ops", "--set", "controller.replicas=2", "--set", "imagebuilder.replicas=3")
	want := map[string]map[string]any{
		"ops/banlieue-controller":   {"minAvailable": float64(1), "selector": selector("controller")},
		"ops/banlieue-imagebuilder": {"minAvailable": float64(1), "selector": selector("imagebuilder")},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("controller.replicas=2, imagebuilder.replicas=3: budgets %v, want %v", got, want)
	}
	got = budgets("--set", "operator.replicas=2", "--set-string", "pdb.minAvailable=50%")
	if len(got) != 1 || got[systemNS+"/banlieue-operator"]["minAvailable"] != "50%" {
		t.Errorf("pdb.minAvailable=50%%: budgets %v, want banlieue-operator's at 50%%", got)
	}
	if got := budgets("--set", "controller.replicas=2", "--set", "pdb.enabled=false"); len(got) != 0 {
		t.Errorf("pdb.enabled=false: budgets %v, want none", got)
	}
	if _, errOut, err := helmTemplate(helm, "--set", "controller.replicas=2", "--set", "pdb.minAvailable=2"); err == nil ||
		!strings.Contains(errOut, "pdb.minAvailable (2) must be below controller.replicas (2)") {
		t.Errorf("pdb.minAvailable=2 with 2 replicas: err %v, output %q; want the chart's refusal", err, errOut)
	}
}
