package app

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
)

// Transition returns the condition of type condType that a pass leaves in after, and whether it
// moved from what the pass found in before: it appeared, or its status or reason changed. A
// message-only change is no transition, so a pass that merely rewords (or re-counts) emits
// nothing, and a repeat pass over an unchanged object emits nothing at all (docs/adr/0106).
func Transition(before, after []metav1.Condition, condType string) (metav1.Condition, bool) {
	next := meta.FindStatusCondition(after, condType)
	if next == nil {
		return metav1.Condition{}, false
	}
	prev := meta.FindStatusCondition(before, condType)
	if prev != nil && prev.Status == next.Status && prev.Reason == next.Reason {
		return *next, false
	}
	return *next, true
}

// EmitTransition records an event on obj when condType moved between before and after: the
// condition's reason is the event's reason and its message the note, Normal when the condition
// holds and Warning otherwise. Conditions never carry secrets or user-data (docs/security.md),
// so neither do these events.
func EmitTransition(rec events.EventRecorder, obj runtime.Object, before, after []metav1.Condition, condType, action string) {
	c, moved := Transition(before, after, condType)
	if !moved {
		return
	}
	eventType := corev1.EventTypeNormal
	if c.Status != metav1.ConditionTrue {
		eventType = corev1.EventTypeWarning
	}
	rec.Eventf(obj, nil, eventType, c.Reason, action, "%s", c.Message)
}
