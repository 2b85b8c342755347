package imagebuilder

import (
	"testing"

	corev1 "k8s.io/api/core/v1"

	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
)

func TestBuildTransition(t *testing.T) {
	a := func(phase banlieuev1.BuildPhase, reason string) *banlieuev1.BuildArtifact {
		return &banlieuev1.BuildArtifact{Phase: phase, Reason: reason}
	}
	for _, tc := range []struct {
		name          string
		before, after *banlieuev1.BuildArtifact
		wantType      string
		wantReason    string
	}{
		{"pending is no news", nil, a(banlieuev1.BuildPending, banlieuev1.ReasonPending), "", ""},
		{"building is no news", a(banlieuev1.BuildPending, banlieuev1.ReasonPending), a(banlieuev1.BuildBuilding, banlieuev1.ReasonBuilding), "", ""},
		{"published", a(banlieuev1.BuildBuilding, banlieuev1.ReasonBuilding), a(banlieuev1.BuildReady, banlieuev1.ReasonReconciled),
			corev1.EventTypeNormal, banlieuev1.ReasonBuildPublished},
		{"ready again on a repeat pass", a(banlieuev1.BuildReady, banlieuev1.ReasonReconciled), a(banlieuev1.BuildReady, banlieuev1.ReasonReconciled), "", ""},
		{"failed", a(banlieuev1.BuildBuilding, banlieuev1.ReasonBuilding), a(banlieuev1.BuildFailed, banlieuev1.ReasonBuildFailed),
			corev1.EventTypeWarning, banlieuev1.ReasonBuildFailed},
		{"refused source on the first pass", nil, a(banlieuev1.BuildFailed, banlieuev1.ReasonSourceRefused),
			corev1.EventTypeWarning, banlieuev1.ReasonSourceRefused},
		{"failed again on a repeat pass", a(banlieuev1.BuildFailed, banlieuev1.ReasonBuildFailed), a(banlieuev1.BuildFailed, banlieuev1.ReasonBuildFailed), "", ""},
		{"no artifact written", a(banlieuev1.BuildReady, banlieuev1.ReasonReconciled), nil, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			typ, reason, ok := buildTransition(tc.before, tc.after)
			if typ != tc.wantType || reason != tc.wantReason || ok != (tc.wantReason != "") {
				t.Errorf("buildTransition = (%q, %q, %v), want (%q, %q)", typ, reason, ok, tc.wantType, tc.wantReason)
			}
		})
	}
}
