package controller

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
)

func TestImageReady(t *testing.T) {
	row := func(ns, name string, ready bool, reason string) banlieuev1.ProviderImageStatus {
		return banlieuev1.ProviderImageStatus{ProviderNamespace: ns, ProviderName: name, Ready: ready, Reason: reason}
	}
	tests := []struct {
		name    string
		rows    []banlieuev1.ProviderImageStatus
		status  metav1.ConditionStatus
		reason  string
		message string
	}{
		{"no rows", nil, metav1.ConditionUnknown, banlieuev1.ReasonNoProviders, ""},
		{"all ready", []banlieuev1.ProviderImageStatus{row("a", "p", true, "Reconciled"), row("b", "p", true, "Reconciled")},
			metav1.ConditionTrue, banlieuev1.ReasonReconciled, "image available on 2 provider(s)"},
		{"first unready by namespace then name", []banlieuev1.ProviderImageStatus{
			row("b", "a", false, "ImportFailed"), row("a", "z", false, "Importing"), row("a", "c", true, "Reconciled")},
			metav1.ConditionFalse, "Importing", "2 of 3 provider(s) do not have this image"},
		{"same namespace ordered by name", []banlieuev1.ProviderImageStatus{row("a", "z", false, "Importing"), row("a", "b", false, "BuildPending")},
			metav1.ConditionFalse, "BuildPending", "2 of 2 provider(s) do not have this image"},
		{"unready row without reason", []banlieuev1.ProviderImageStatus{row("a", "p", false, "")},
			metav1.ConditionFalse, banlieuev1.ReasonNotReady, "1 of 1 provider(s) do not have this image"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := imageReady(tt.rows)
			if c.Type != banlieuev1.ConditionReady || c.Status != tt.status || c.Reason != tt.reason || c.Message != tt.message {
				t.Errorf("got %+v, want %s %s %q", c, tt.status, tt.reason, tt.message)
			}
		})
	}
}

func TestReadyProviders(t *testing.T) {
	for _, tt := range []struct {
		rows []banlieuev1.ProviderImageStatus
		want string
	}{
		{nil, "0/0"},
		{[]banlieuev1.ProviderImageStatus{{Ready: true}, {Ready: false}, {Ready: true}}, "2/3"},
		{[]banlieuev1.ProviderImageStatus{{Ready: false}}, "0/1"},
	} {
		if got := readyProviders(tt.rows); got != tt.want {
			t.Errorf("readyProviders(%+v) = %q, want %q", tt.rows, got, tt.want)
		}
	}
}
