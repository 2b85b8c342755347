package controller

import (
	"testing"

	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
)

func TestMatches(t *testing.T) {
	labels := map[string]string{"site": "edge", "tier": "gold"}
	expr := func(key string, op banlieuev1.LabelSelectorOperator, values ...string) *banlieuev1.LabelSelector {
		return &banlieuev1.LabelSelector{MatchExpressions: []banlieuev1.LabelSelectorRequirement{{Key: key, Operator: op, Values: values}}}
	}
	tests := []struct {
		name   string
		sel    *banlieuev1.LabelSelector
		labels map[string]string
		want   bool
	}{
		{"nil matches everything", nil, labels, true},
		{"nil matches no labels", nil, nil, true},
		{"empty matches everything", &banlieuev1.LabelSelector{}, labels, true},
		{"matchLabels equal", &banlieuev1.LabelSelector{MatchLabels: map[string]string{"site": "edge"}}, labels, true},
		{"matchLabels differ", &banlieuev1.LabelSelector{MatchLabels: map[string]string{"site": "core"}}, labels, false},
		{"matchLabels missing key", &banlieuev1.LabelSelector{MatchLabels: map[string]string{"zone": "a"}}, labels, false},
		{"In hit", expr("tier", "In", "silver", "gold"), labels, true},
		{"In miss", expr("tier", "In", "silver"), labels, false},
		{"In absent key", expr("zone", "In", "a"), labels, false},
		{"NotIn hit", expr("tier", "NotIn", "gold"), labels, false},
		{"NotIn miss", expr("tier", "NotIn", "silver"), labels, true},
		{"NotIn absent key", expr("zone", "NotIn", "a"), labels, true},
		{"Exists", expr("site", "Exists"), labels, true},
		{"Exists absent", expr("zone", "Exists"), labels, false},
		{"DoesNotExist", expr("zone", "DoesNotExist"), labels, true},
		{"DoesNotExist present", expr("site", "DoesNotExist"), labels, false},
		{"unknown operator", expr("site", "Gt", "1"), labels, false},
		{"labels and expressions both hold", &banlieuev1.LabelSelector{
			MatchLabels:      map[string]string{"site": "edge"},
			MatchExpressions: []banlieuev1.LabelSelectorRequirement{{Key: "tier", Operator: "Exists"}},
		}, labels, true},
		{"labels hold, expression fails", &banlieuev1.LabelSelector{
			MatchLabels:      map[string]string{"site": "edge"},
			MatchExpressions: []banlieuev1.LabelSelectorRequirement{{Key: "tier", Operator: "NotIn", Values: []string{"gold"}}},
		}, labels, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := matches(tt.sel, tt.labels); got != tt.want {
				t.Errorf("matches = %v, want %v", got, tt.want)
			}
		})
	}
}
