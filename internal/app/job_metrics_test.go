package app

import (
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestFinishedJob(t *testing.T) {
	start := metav1.NewTime(time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC))
	at := func(d time.Duration) metav1.Time { return metav1.NewTime(start.Add(d)) }
	cond := func(typ batchv1.JobConditionType, status corev1.ConditionStatus, d time.Duration) batchv1.JobCondition {
		return batchv1.JobCondition{Type: typ, Status: status, LastTransitionTime: at(d)}
	}
	tests := []struct {
		name       string
		status     batchv1.JobStatus
		wantResult string
		wantTook   time.Duration
		wantOK     bool
	}{
		{"running", batchv1.JobStatus{StartTime: &start, Active: 1}, "", 0, false},
		{"success criteria met, pods not yet gone", batchv1.JobStatus{StartTime: &start,
			Conditions: []batchv1.JobCondition{cond(batchv1.JobSuccessCriteriaMet, corev1.ConditionTrue, 90*time.Second)}}, "", 0, false},
		{"complete", batchv1.JobStatus{StartTime: &start, Conditions: []batchv1.JobCondition{
			cond(batchv1.JobSuccessCriteriaMet, corev1.ConditionTrue, 90*time.Second), cond(batchv1.JobComplete, corev1.ConditionTrue, 92*time.Second)}},
			JobSucceeded, 92 * time.Second, true},
		{"failed at its deadline", batchv1.JobStatus{StartTime: &start, Failed: 1, Conditions: []batchv1.JobCondition{
			cond(batchv1.JobFailureTarget, corev1.ConditionTrue, time.Hour), cond(batchv1.JobFailed, corev1.ConditionTrue, time.Hour+time.Second)}},
			JobFailed, time.Hour + time.Second, true},
		{"a false Complete condition is no end", batchv1.JobStatus{StartTime: &start,
			Conditions: []batchv1.JobCondition{cond(batchv1.JobComplete, corev1.ConditionFalse, time.Minute)}}, "", 0, false},
		{"failed before any pod started: no run time", batchv1.JobStatus{
			Conditions: []batchv1.JobCondition{cond(batchv1.JobFailed, corev1.ConditionTrue, time.Minute)}}, "", 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			result, took, finished, ok := FinishedJob(&batchv1.Job{Status: tt.status})
			if result != tt.wantResult || took != tt.wantTook || ok != tt.wantOK {
				t.Fatalf("FinishedJob = %q, %v, ok %v; want %q, %v, ok %v", result, took, ok, tt.wantResult, tt.wantTook, tt.wantOK)
			}
			if ok && !finished.Equal(start.Add(tt.wantTook)) {
				t.Errorf("finished at %v, want %v", finished, start.Add(tt.wantTook))
			}
		})
	}
}
