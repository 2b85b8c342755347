package providerkit

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"

	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
)

// TestEmitReachabilityOncePerTransition: a pass whose "before" lags behind this process's own
// last write (a stale cache) announces nothing new; a real transition is announced once.
func TestEmitReachabilityOncePerTransition(t *testing.T) {
	rec := events.NewFakeRecorder(16)
	r := &Reporter{Recorder: rec}
	p := &banlieuev1.Provider{ObjectMeta: metav1.ObjectMeta{Name: "lab", Namespace: "ns", UID: "u1"}}
	reach := func(st metav1.ConditionStatus, reason string) []metav1.Condition {
		return []metav1.Condition{{Type: banlieuev1.ConditionProviderReachable, Status: st, Reason: reason}}
	}
	up := reach(metav1.ConditionTrue, banlieuev1.ReasonReconciled)
	down := reach(metav1.ConditionFalse, banlieuev1.ReasonConnectFailed)
	for _, step := range []struct {
		before, after []metav1.Condition
		want          string // the event's type and reason, "" for none
	}{
		{nil, up, "Normal HostReachable"},
		{nil, up, ""}, // the cache does not hold the first write yet
		{up, up, ""},
		{up, down, "Warning ConnectFailed"},
		{up, down, ""}, // again from a stale cache
		{down, up, "Normal HostReachable"},
	} {
		r.EmitReachability(p, step.before, step.after)
		got := ""
		select {
		case e := <-rec.Events:
			got = e
		default:
		}
		if step.want == "" && got != "" || step.want != "" && (len(got) < len(step.want) || got[:len(step.want)] != step.want) {
			t.Errorf("before %v after %v: event %q, want %q", step.before, step.after, got, step.want)
		}
	}
}
