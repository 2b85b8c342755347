package image

import (
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
	"banlieue.io/banlieue/internal/app"
	"banlieue.io/banlieue/internal/testenv"
)

// Each finished import Job is recorded once, under its result, with the artifact's size when it
// succeeded; a resync, a running Job or one that ended before this process are not.
func TestRecordImportOnce(t *testing.T) {
	initImportMetrics()
	now := time.Now()
	// As if this process had been elected now.
	imports = app.NewObservedOnce(func() (time.Time, bool) { return now, true })
	job := func(uid string, end time.Time, typ batchv1.JobConditionType) *batchv1.Job {
		start := metav1.NewTime(end.Add(-42 * time.Second))
		return &batchv1.Job{ObjectMeta: metav1.ObjectMeta{UID: types.UID(uid)}, Status: batchv1.JobStatus{StartTime: &start,
			Conditions: []batchv1.JobCondition{{Type: typ, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(end)}}}}
	}
	running := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{UID: "running"}, Status: batchv1.JobStatus{StartTime: &metav1.Time{Time: now}, Active: 1}}
	artifact := &banlieuev1.BuildArtifact{Phase: banlieuev1.BuildReady, SizeBytes: 1 << 30}
	steps := []struct {
		name              string
		job               *batchv1.Job
		succeeded, failed float64
		bytes             float64
	}{
		{"a success", job("a", now, batchv1.JobComplete), 1, 0, 1 << 30},
		{"the same Job at the next resync", job("a", now, batchv1.JobComplete), 0, 0, 0},
		{"a running Job", running, 0, 0, 0},
		{"a failure: no bytes", job("b", now, batchv1.JobFailed), 0, 1, 0},
		{"finished before this process started", job("c", now.Add(-time.Hour), batchv1.JobComplete), 0, 0, 0},
	}
	value := func(name string, labels map[string]string) float64 {
		v, ok := testenv.RegistrySample(t, name, labels)
		if !ok {
			t.Fatalf("no series %s%v", name, labels)
		}
		return v
	}
	const hist, bytes = "banlieue_image_import_duration_seconds", "banlieue_image_import_bytes_total"
	ok, bad, none := map[string]string{"result": "succeeded"}, map[string]string{"result": "failed"}, map[string]string{}
	for _, s := range steps {
		s0, f0, b0 := value(hist, ok), value(hist, bad), value(bytes, none)
		recordImport(s.job, artifact)
		if d := value(hist, ok) - s0; d != s.succeeded {
			t.Errorf("%s: succeeded observations +%v, want +%v", s.name, d, s.succeeded)
		}
		if d := value(hist, bad) - f0; d != s.failed {
			t.Errorf("%s: failed observations +%v, want +%v", s.name, d, s.failed)
		}
		if d := value(bytes, none) - b0; d != s.bytes {
			t.Errorf("%s: bytes +%v, want +%v", s.name, d, s.bytes)
		}
	}
}
