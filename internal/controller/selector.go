package controller

import (
	"slices"

	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
)

// matches reports whether labels satisfy sel. banlieue has its own selector type (docs/reference/api.md), so
// this mirrors metav1.LabelSelector semantics without its validation: a nil selector matches
// everything, an empty one too, and an unknown operator matches nothing so a typo never widens
// a placement.
func matches(sel *banlieuev1.LabelSelector, labels map[string]string) bool {
	if sel == nil {
		return true
	}
	for k, v := range sel.MatchLabels {
		if got, ok := labels[k]; !ok || got != v {
			return false
		}
	}
	for _, req := range sel.MatchExpressions {
		got, ok := labels[req.Key]
		switch req.Operator {
		case "In":
			if !ok || !slices.Contains(req.Values, got) {
				return false
			}
		case "NotIn":
			if ok && slices.Contains(req.Values, got) {
				return false
			}
		case "Exists":
			if !ok {
				return false
			}
		case "DoesNotExist":
			if ok {
				return false
			}
		default:
			return false
		}
	}
	return true
}
