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

// TestChartKubeVersion: the chart refuses a cluster older than 1.30, the first to serve
// ValidatingAdmissionPolicy v1 (templates/admission.yaml), and renders for 1.30 on.
func TestChartKubeVersion(t *testing.T) {
	helm := helmBinary(t)
	if _, errOut, err := helmTemplate(helm, "--kube-version", "1.29.9"); err == nil ||
		!strings.Contains(errOut, "requires kubeVersion: >=1.30.0-0") {
		t.Errorf("Kubernetes 1.29.9: err %v, output %q; want the chart's kubeVersion refusal", err, errOut)
	}
	for _, v := range []string{"1.30.0", "1.37.2"} {
		if _, errOut, err := helmTemplate(helm, "--kube-version", v); err != nil {
			t.Errorf("Kubernetes %s refused: %v\n%s", v, err, errOut)
		}
	}
}
