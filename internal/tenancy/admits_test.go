package tenancy

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
)

func TestAdmitsNamespace(t *testing.T) {
	provider := func(a *banlieuev1.AllowedNamespaces) *banlieuev1.Provider {
		return &banlieuev1.Provider{ObjectMeta: metav1.ObjectMeta{Namespace: "banlieue-system", Name: "lab"}, Spec: banlieuev1.ProviderSpec{AllowedNamespaces: a}}
	}
	sel := func(ls banlieuev1.LabelSelector) *banlieuev1.AllowedNamespaces {
		return &banlieuev1.AllowedNamespaces{From: banlieuev1.NamespacesFromSelector, Selector: &ls}
	}
	team := map[string]string{"banlieue.io/lab": "allowed"}
	for _, tc := range []struct {
		name   string
		a      *banlieuev1.AllowedNamespaces
		ns     string
		labels map[string]string
		ok     bool
		rule   string
	}{
		{"unset admits its own namespace", nil, "banlieue-system", nil, true, ""},
		{"unset is Same", nil, "team-a", team, false, "allowedNamespaces.from is Same: only namespace banlieue-system may use it"},
		{"empty from is Same", &banlieuev1.AllowedNamespaces{}, "team-a", team, false, "allowedNamespaces.from is Same"},
		{"Same", &banlieuev1.AllowedNamespaces{From: banlieuev1.NamespacesFromSame}, "team-a", team, false, "allowedNamespaces.from is Same"},
		{"All", &banlieuev1.AllowedNamespaces{From: banlieuev1.NamespacesFromAll}, "team-b", nil, true, ""},
		{"Selector matches", sel(banlieuev1.LabelSelector{MatchLabels: team}), "team-a", team, true, ""},
		{"Selector does not match", sel(banlieuev1.LabelSelector{MatchLabels: team}), "team-b", map[string]string{"banlieue.io/lab": "x"}, false,
			`allowedNamespaces.selector "banlieue.io/lab=allowed" does not match the labels of namespace team-b`},
		{"Selector with expressions", sel(banlieuev1.LabelSelector{MatchExpressions: []banlieuev1.LabelSelectorRequirement{
			{Key: "tier", Operator: "In", Values: []string{"dev", "test"}}}}), "team-a", map[string]string{"tier": "dev"}, true, ""},
		{"empty Selector matches every namespace", sel(banlieuev1.LabelSelector{}), "team-b", nil, true, ""},
		{"Selector always admits its own namespace", sel(banlieuev1.LabelSelector{MatchLabels: team}), "banlieue-system", nil, true, ""},
		{"Selector without selector refuses", &banlieuev1.AllowedNamespaces{From: banlieuev1.NamespacesFromSelector}, "team-a", team, false, "selector is missing"},
		{"invalid selector refuses", sel(banlieuev1.LabelSelector{MatchExpressions: []banlieuev1.LabelSelectorRequirement{
			{Key: "tier", Operator: "Near"}}}), "team-a", team, false, "allowedNamespaces.selector is invalid"},
		{"unknown from refuses", &banlieuev1.AllowedNamespaces{From: "Some"}, "team-a", team, false, `allowedNamespaces.from "Some"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ok, rule := AdmitsNamespace(provider(tc.a), tc.ns, tc.labels)
			if ok != tc.ok || !strings.Contains(rule, tc.rule) || (tc.ok && rule != "") {
				t.Errorf("AdmitsNamespace(%s) = %v, %q; want %v, %q", tc.ns, ok, rule, tc.ok, tc.rule)
			}
		})
	}
}
