package v1alpha1

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestAdmitsNamespace(t *testing.T) {
	provider := func(a *AllowedNamespaces) *Provider {
		return &Provider{ObjectMeta: metav1.ObjectMeta{Namespace: "banlieue-system", Name: "lab"}, Spec: ProviderSpec{AllowedNamespaces: a}}
	}
	sel := func(ls metav1.LabelSelector) *AllowedNamespaces {
		return &AllowedNamespaces{From: NamespacesFromSelector, Selector: &ls}
	}
	team := map[string]string{"banlieue.io/lab": "allowed"}
	for _, tc := range []struct {
		name   string
		a      *AllowedNamespaces
		ns     string
		labels map[string]string
		ok     bool
		rule   string
	}{
		{"unset admits its own namespace", nil, "banlieue-system", nil, true, ""},
		{"unset is Same", nil, "team-a", team, false, "allowedNamespaces.from is Same: only namespace banlieue-system may use it"},
		{"empty from is Same", &AllowedNamespaces{}, "team-a", team, false, "allowedNamespaces.from is Same"},
		{"Same", &AllowedNamespaces{From: NamespacesFromSame}, "team-a", team, false, "allowedNamespaces.from is Same"},
		{"All", &AllowedNamespaces{From: NamespacesFromAll}, "team-b", nil, true, ""},
		{"Selector matches", sel(metav1.LabelSelector{MatchLabels: team}), "team-a", team, true, ""},
		{"Selector does not match", sel(metav1.LabelSelector{MatchLabels: team}), "team-b", map[string]string{"banlieue.io/lab": "x"}, false,
			`allowedNamespaces.selector "banlieue.io/lab=allowed" does not match the labels of namespace team-b`},
		{"Selector with expressions", sel(metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
			{Key: "tier", Operator: metav1.LabelSelectorOpIn, Values: []string{"dev", "test"}}}}), "team-a", map[string]string{"tier": "dev"}, true, ""},
		{"empty Selector matches every namespace", sel(metav1.LabelSelector{}), "team-b", nil, true, ""},
		{"Selector never admits its own namespace less", sel(metav1.LabelSelector{MatchLabels: team}), "banlieue-system", nil, true, ""},
		{"Selector without selector refuses", &AllowedNamespaces{From: NamespacesFromSelector}, "team-a", team, false, "selector is missing"},
		{"invalid selector refuses", sel(metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
			{Key: "tier", Operator: "Near"}}}), "team-a", team, false, "allowedNamespaces.selector is invalid"},
		{"unknown from refuses", &AllowedNamespaces{From: "Some"}, "team-a", team, false, `allowedNamespaces.from "Some"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ok, rule := provider(tc.a).AdmitsNamespace(tc.ns, tc.labels)
			if ok != tc.ok || !strings.Contains(rule, tc.rule) || (tc.ok && rule != "") {
				t.Errorf("AdmitsNamespace(%s) = %v, %q; want %v, %q", tc.ns, ok, rule, tc.ok, tc.rule)
			}
		})
	}
}
