package providerkit

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
)

func TestStatusUnchanged(t *testing.T) {
	at := metav1.Unix(1_700_000_000, 0)
	ready := banlieuev1.ProviderStatus{
		ObservedGeneration: 2,
		FailureDomains:     []banlieuev1.FailureDomain{{Name: "host-a"}},
		Conditions: []metav1.Condition{{Type: banlieuev1.ConditionReady, Status: metav1.ConditionTrue,
			Reason: banlieuev1.ReasonReconciled, LastTransitionTime: at, ObservedGeneration: 2}},
	}
	failed := *ready.DeepCopy()
	failed.FailureDomains = nil
	failed.Conditions[0].Status, failed.Conditions[0].Reason = metav1.ConditionFalse, banlieuev1.ReasonConnectFailed
	withWorkload := *ready.DeepCopy()
	withWorkload.Workload = &banlieuev1.ProviderWorkload{}
	newerGeneration := *ready.DeepCopy()
	newerGeneration.ObservedGeneration = 3

	for _, tc := range []struct {
		name               string
		cached, last, next *banlieuev1.ProviderStatus
		want               bool
	}{
		{"the host as before", &ready, &ready, &ready, true},
		{"the operator's workload is not this role's", &withWorkload, &ready, &ready, true},
		{"nothing written yet by this process", &ready, nil, &ready, false},
		{"the host stopped answering", &ready, &ready, &failed, false},
		{"the cache lags behind this process's own write", &ready, &failed, &ready, false},
		{"another writer changed the status", &failed, &ready, &ready, false},
		{"a new generation observed", &ready, &ready, &newerGeneration, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Unchanged(tc.cached, tc.last, tc.next); got != tc.want {
				t.Errorf("Unchanged = %v, want %v", got, tc.want)
			}
		})
	}
}
