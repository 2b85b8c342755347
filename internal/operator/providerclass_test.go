package operator

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
)

func TestClassReady(t *testing.T) {
	tests := []struct {
		name       string
		repo, tag  string
		hasRole    bool
		wantStatus metav1.ConditionStatus
		wantReason string
	}{
		{"usable", "registry.example/banlieue", "v0.1.0", true, metav1.ConditionTrue, banlieuev1.ReasonReady},
		{"missing ClusterRole", "registry.example/banlieue", "v0.1.0", false, metav1.ConditionFalse, "MissingClusterRole"},
		{"missing ClusterRole is checked before the image", "", "", false, metav1.ConditionFalse, "MissingClusterRole"},
		{"empty tag", "registry.example/banlieue", "", true, metav1.ConditionFalse, "InvalidImage"},
		{"empty repository", "", "v0.1.0", true, metav1.ConditionFalse, "InvalidImage"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			class := libvirtClass()
			class.Spec.Image.Repository, class.Spec.Image.Tag = tt.repo, tt.tag
			s := classStatus(class, tt.hasRole, 4)
			if len(s.Conditions) != 1 {
				t.Fatalf("conditions %+v", s.Conditions)
			}
			c := s.Conditions[0]
			if c.Type != banlieuev1.ConditionReady || c.Status != tt.wantStatus || c.Reason != tt.wantReason || c.ObservedGeneration != 2 {
				t.Errorf("condition %+v", c)
			}
			if s.Providers != 4 || s.ObservedGeneration != 2 {
				t.Errorf("providers %d observedGeneration %d", s.Providers, s.ObservedGeneration)
			}
			if want := map[bool]string{true: tt.repo + ":" + tt.tag}[tt.repo != "" && tt.tag != ""]; s.Image != want {
				t.Errorf("image %q, want %q", s.Image, want)
			}
		})
	}
}

func TestClassReadyKeepsTransitionTime(t *testing.T) {
	class := libvirtClass()
	then := metav1.NewTime(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	class.Status.Conditions = []metav1.Condition{{Type: banlieuev1.ConditionReady, Status: metav1.ConditionTrue, Reason: banlieuev1.ReasonReady, LastTransitionTime: then}}
	if got := classStatus(class, true, 1).Conditions[0].LastTransitionTime; !got.Equal(&then) {
		t.Errorf("unchanged Ready moved its lastTransitionTime to %v", got)
	}
	if got := classStatus(class, false, 1).Conditions[0].LastTransitionTime; got.Equal(&then) {
		t.Errorf("Ready turning False kept lastTransitionTime %v", got)
	}
}
