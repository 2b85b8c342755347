package app_test

import (
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"banlieue.io/banlieue/internal/app"
	"banlieue.io/banlieue/internal/testenv"
)

// testSeries is registered once per test binary, as a role registers its own.
var testSeries = app.NewJobSeries("banlieue_test_job", "run time", "bytes")

// Each finished Job is recorded once, under its result (the caller's, or the Job's own), with
// its bytes when it succeeded; a resync, a running Job or one that ended before this process
// led are not.
func TestJobSeriesRecordsEachJobOnce(t *testing.T) {
	testSeries.Init()
	now := time.Now()
	// As if this process had been elected now.
	series := testSeries.Since(func() (time.Time, bool) { return now, true })
	job := func(uid string, end time.Time, typ batchv1.JobConditionType) *batchv1.Job {
		start := metav1.NewTime(end.Add(-42 * time.Second))
		return &batchv1.Job{ObjectMeta: metav1.ObjectMeta{UID: types.UID(uid)}, Status: batchv1.JobStatus{StartTime: &start,
			Conditions: []batchv1.JobCondition{{Type: typ, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(end)}}}}
	}
	running := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{UID: "running"}, Status: batchv1.JobStatus{StartTime: &metav1.Time{Time: now}, Active: 1}}
	steps := []struct {
		name              string
		job               *batchv1.Job
		result            string
		succeeded, failed float64 // observations added
		bytes, seconds    float64
	}{
		{"a success", job("a", now, batchv1.JobComplete), "", 1, 0, 1 << 30, 42},
		{"the same Job at the next resync", job("a", now, batchv1.JobComplete), "", 0, 0, 0, 0},
		{"a running Job", running, "", 0, 0, 0, 0},
		{"a failure: no bytes", job("b", now, batchv1.JobFailed), "", 0, 1, 0, 42},
		{"a completed Job the caller calls failed", job("c", now, batchv1.JobComplete), app.JobFailed, 0, 1, 0, 42},
		{"finished before this process led", job("d", now.Add(-time.Hour), batchv1.JobComplete), "", 0, 0, 0, 0},
	}
	const hist, bytes = "banlieue_test_job_duration_seconds", "banlieue_test_job_bytes_total"
	ok, bad, none := map[string]string{"result": app.JobSucceeded}, map[string]string{"result": app.JobFailed}, map[string]string{}
	for _, s := range steps {
		s0, f0, b0, sum0 := sample(t, hist, ok), sample(t, hist, bad), sample(t, bytes, none), testenv.RegistryHistogramSum(t, hist)
		series.Record(s.job, s.result, 1<<30)
		if d := sample(t, hist, ok) - s0; d != s.succeeded {
			t.Errorf("%s: succeeded observations +%v, want +%v", s.name, d, s.succeeded)
		}
		if d := sample(t, hist, bad) - f0; d != s.failed {
			t.Errorf("%s: failed observations +%v, want +%v", s.name, d, s.failed)
		}
		if d := sample(t, bytes, none) - b0; d != s.bytes {
			t.Errorf("%s: bytes +%v, want +%v", s.name, d, s.bytes)
		}
		if d := testenv.RegistryHistogramSum(t, hist) - sum0; d != s.seconds {
			t.Errorf("%s: seconds observed +%v, want +%v", s.name, d, s.seconds)
		}
	}
}

func sample(t *testing.T, name string, labels map[string]string) float64 {
	t.Helper()
	v, ok := testenv.RegistrySample(t, name, labels)
	if !ok {
		t.Fatalf("no series %s%v", name, labels)
	}
	return v
}
