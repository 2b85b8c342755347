package controller

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
	"banlieue.io/banlieue/internal/app"
)

// A VM is recorded once, the first time a written status turns Ready True, with the time from
// its creation to that condition's lastTransitionTime.
func TestRecordTimeToReady(t *testing.T) {
	initReadyMetrics()
	now := time.Now()
	// As if this process had been elected now.
	readyVMs = app.NewObservedOnce(func() (time.Time, bool) { return now, true })
	vm := func(uid string, age time.Duration) *banlieuev1.VirtualMachine {
		return &banlieuev1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{UID: types.UID(uid), CreationTimestamp: metav1.NewTime(now.Add(-age))}}
	}
	ready := func(status metav1.ConditionStatus, reason string) []metav1.Condition {
		return []metav1.Condition{{Type: banlieuev1.ConditionReady, Status: status, Reason: reason, LastTransitionTime: metav1.NewTime(now)}}
	}
	notReady := ready(metav1.ConditionFalse, banlieuev1.ReasonInfrastructureNotReady)
	isReady := ready(metav1.ConditionTrue, banlieuev1.ReasonReconciled)
	steps := []struct {
		name          string
		vm            *banlieuev1.VirtualMachine
		before, after []metav1.Condition
		want          float64 // seconds observed; 0 for none
	}{
		{"not Ready yet", vm("a", time.Minute), nil, notReady, 0},
		{"becomes Ready", vm("a", 80*time.Second), notReady, isReady, 80},
		{"a pass over a Ready VM", vm("a", 90*time.Second), isReady, isReady, 0},
		{"Ready again after a NotReady spell", vm("a", time.Hour), notReady, isReady, 0},
		{"Ready in its first status write", vm("b", 15*time.Second), nil, isReady, 15},
		{"a lagging cache shows the old status again", vm("b", 20*time.Second), notReady, isReady, 0},
		{"Ready with a condition older than this process", vm("c", time.Hour),
			notReady, []metav1.Condition{{Type: banlieuev1.ConditionReady, Status: metav1.ConditionTrue, LastTransitionTime: metav1.NewTime(now.Add(-time.Hour))}}, 0},
	}
	for _, s := range steps {
		count0, sum0 := readyHistogram(t)
		recordTimeToReady(s.vm, s.before, s.after)
		count, sum := readyHistogram(t)
		wantCount := uint64(0)
		if s.want > 0 {
			wantCount = 1
		}
		if count-count0 != wantCount || sum-sum0 != s.want {
			t.Errorf("%s: +%d observations of %vs, want +%d of %vs", s.name, count-count0, sum-sum0, wantCount, s.want)
		}
	}
}

func readyHistogram(t *testing.T) (count uint64, sum float64) {
	t.Helper()
	families, err := metrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() == "banlieue_vm_time_to_ready_seconds" {
			h := f.GetMetric()[0].GetHistogram()
			return h.GetSampleCount(), h.GetSampleSum()
		}
	}
	t.Fatal("banlieue_vm_time_to_ready_seconds is not in the registry")
	return 0, 0
}
