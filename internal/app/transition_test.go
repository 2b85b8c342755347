package app

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestTransition(t *testing.T) {
	cond := func(status metav1.ConditionStatus, reason, msg string) []metav1.Condition {
		return []metav1.Condition{{Type: "Scheduled", Status: status, Reason: reason, Message: msg}}
	}
	for _, tc := range []struct {
		name          string
		before, after []metav1.Condition
		want          bool
		wantReason    string
	}{
		{"absent after: nothing to say", nil, nil, false, ""},
		{"first appearance", nil, cond(metav1.ConditionFalse, "ImageNotReady", "m"), true, "ImageNotReady"},
		{"status flips", cond(metav1.ConditionFalse, "ImageNotReady", "m"), cond(metav1.ConditionTrue, "Scheduled", "m"), true, "Scheduled"},
		{"reason changes, status kept", cond(metav1.ConditionFalse, "ImageNotReady", "m"), cond(metav1.ConditionFalse, "NoProviderMatched", "m"), true, "NoProviderMatched"},
		{"repeat pass", cond(metav1.ConditionTrue, "Scheduled", "m"), cond(metav1.ConditionTrue, "Scheduled", "m"), false, "Scheduled"},
		{"message only", cond(metav1.ConditionFalse, "ImageNotReady", "1 of 2"), cond(metav1.ConditionFalse, "ImageNotReady", "0 of 2"), false, "ImageNotReady"},
		{"other type moved", []metav1.Condition{{Type: "Ready", Status: metav1.ConditionFalse, Reason: "X"}},
			append(cond(metav1.ConditionTrue, "Scheduled", "m"), metav1.Condition{Type: "Ready", Status: metav1.ConditionTrue, Reason: "Y"})[1:], false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, got := Transition(tc.before, tc.after, "Scheduled")
			if got != tc.want || c.Reason != tc.wantReason {
				t.Errorf("Transition = (%q, %v), want (%q, %v)", c.Reason, got, tc.wantReason, tc.want)
			}
		})
	}
}
