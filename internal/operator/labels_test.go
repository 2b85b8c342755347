package operator

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// TestLabelsOfLongNames: a 70-character Provider and a 100-character class give valid label
// values (an invalid one fails every apply), and the pod selector stays within them.
func TestLabelsOfLongNames(t *testing.T) {
	p, class := guideProvider(), libvirtClass()
	p.Name, class.Name = strings.Repeat("p", 70), strings.Repeat("c", 100)
	for what, set := range map[string]map[string]string{"labels": workloadLabels(p, class), "selector": selectorLabels(p, class)} {
		for k, v := range set {
			if errs := validation.IsValidLabelValue(v); len(errs) > 0 {
				t.Errorf("%s %s=%q: %v", what, k, v, errs)
			}
		}
	}
	if got := workloadAnnotations(p)["banlieue.io/provider"]; got != "banlieue-system/"+p.Name {
		t.Errorf("identity annotation %q", got)
	}
	if !ownedSelector(p.Namespace, p.Name).Matches(labels.Set(workloadLabels(p, class))) {
		t.Error("ownedSelector does not match the labels the workload is given")
	}
}

func TestWorkloadOwner(t *testing.T) {
	long := strings.Repeat("p", 70)
	managed := map[string]string{"app.kubernetes.io/managed-by": "banlieue-operator",
		"banlieue.io/provider": "edge", "banlieue.io/provider-namespace": "team-a"}
	tests := []struct {
		name        string
		labels      map[string]string
		annotations map[string]string
		want        client.ObjectKey
		ok          bool
	}{
		{"annotation is exact", managed, map[string]string{"banlieue.io/provider": "team-a/edge"}, client.ObjectKey{Namespace: "team-a", Name: "edge"}, true},
		{"annotation wins over labels a capped name shares", managed, map[string]string{"banlieue.io/provider": "team-a/" + long},
			client.ObjectKey{Namespace: "team-a", Name: long}, true},
		{"object from before the annotation: its labels", managed, nil, client.ObjectKey{Namespace: "team-a", Name: "edge"}, true},
		{"not the operator's", map[string]string{"banlieue.io/provider": "edge", "banlieue.io/provider-namespace": "team-a"}, nil, client.ObjectKey{}, false},
		{"malformed annotation", managed, map[string]string{"banlieue.io/provider": "edge"}, client.ObjectKey{}, false},
		{"empty namespace in the annotation", managed, map[string]string{"banlieue.io/provider": "/edge"}, client.ObjectKey{}, false},
		{"labels without a namespace", map[string]string{"app.kubernetes.io/managed-by": "banlieue-operator", "banlieue.io/provider": "edge"}, nil, client.ObjectKey{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := workloadOwner(&metav1.ObjectMeta{Labels: tt.labels, Annotations: tt.annotations})
			if ok != tt.ok || ok && got != tt.want {
				t.Errorf("got %v %v, want %v %v", got, ok, tt.want, tt.ok)
			}
		})
	}
}
