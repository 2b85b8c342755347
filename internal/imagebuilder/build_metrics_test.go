package imagebuilder

import (
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
	"banlieue.io/banlieue/internal/app"
	"banlieue.io/banlieue/internal/testenv"
)

// finishedBuildJob is a build Job that ran for took and ended at end as typ.
func finishedBuildJob(uid string, end time.Time, took time.Duration, typ batchv1.JobConditionType) *batchv1.Job {
	start := metav1.NewTime(end.Add(-took))
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: BuildJobName("img"), UID: types.UID(uid)},
		Status: batchv1.JobStatus{StartTime: &start, Conditions: []batchv1.JobCondition{
			{Type: typ, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(end)}}},
	}
}

// Each finished build is recorded once, under its artifact's outcome, from the Job's own times;
// a resync, a running Job, a replaced one or one that ended before this process are not.
func TestRecordBuildOnce(t *testing.T) {
	initBuildMetrics()
	now := time.Now()
	// As if this process had been elected now.
	builds = app.NewObservedOnce(func() (time.Time, bool) { return now, true })
	ready := &banlieuev1.BuildArtifact{Phase: banlieuev1.BuildReady, SizeBytes: 300 << 20}
	failed := &banlieuev1.BuildArtifact{Phase: banlieuev1.BuildFailed}
	pending := &banlieuev1.BuildArtifact{Phase: banlieuev1.BuildPending}
	running := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{UID: "running"}, Status: batchv1.JobStatus{StartTime: &metav1.Time{Time: now}, Active: 1}}
	steps := []struct {
		name               string
		job                *batchv1.Job
		artifact           *banlieuev1.BuildArtifact
		succeeded, failed  float64 // observations added
		bytes, wantSeconds float64
	}{
		{"a success", finishedBuildJob("a", now, 95*time.Second, batchv1.JobComplete), ready, 1, 0, 300 << 20, 95},
		{"the same Job at the next resync", finishedBuildJob("a", now, 95*time.Second, batchv1.JobComplete), ready, 0, 0, 0, 0},
		{"a running Job", running, &banlieuev1.BuildArtifact{Phase: banlieuev1.BuildBuilding}, 0, 0, 0, 0},
		{"a failure", finishedBuildJob("b", now, 10*time.Minute, batchv1.JobFailed), failed, 0, 1, 0, 600},
		{"succeeded with the wrong kind, being replaced", finishedBuildJob("c", now, time.Minute, batchv1.JobComplete), pending, 0, 0, 0, 0},
		{"finished before this process started", finishedBuildJob("d", now.Add(-time.Hour), time.Minute, batchv1.JobComplete), ready, 0, 0, 0, 0},
	}
	value := func(name string, labels map[string]string) float64 {
		v, ok := testenv.RegistrySample(t, name, labels)
		if !ok {
			t.Fatalf("no series %s%v", name, labels)
		}
		return v
	}
	sum := func() float64 {
		families, err := metrics.Registry.Gather()
		if err != nil {
			t.Fatal(err)
		}
		total := 0.0
		for _, f := range families {
			if f.GetName() == "banlieue_image_build_duration_seconds" {
				for _, m := range f.GetMetric() {
					total += m.GetHistogram().GetSampleSum()
				}
			}
		}
		return total
	}
	ok := map[string]string{"result": "succeeded"}
	bad := map[string]string{"result": "failed"}
	for _, s := range steps {
		s0, f0, b0, sum0 := value("banlieue_image_build_duration_seconds", ok), value("banlieue_image_build_duration_seconds", bad),
			value("banlieue_image_build_bytes_total", map[string]string{}), sum()
		recordBuild(s.job, s.artifact)
		if d := value("banlieue_image_build_duration_seconds", ok) - s0; d != s.succeeded {
			t.Errorf("%s: succeeded observations +%v, want +%v", s.name, d, s.succeeded)
		}
		if d := value("banlieue_image_build_duration_seconds", bad) - f0; d != s.failed {
			t.Errorf("%s: failed observations +%v, want +%v", s.name, d, s.failed)
		}
		if d := value("banlieue_image_build_bytes_total", map[string]string{}) - b0; d != s.bytes {
			t.Errorf("%s: bytes +%v, want +%v", s.name, d, s.bytes)
		}
		if d := sum() - sum0; d != s.wantSeconds {
			t.Errorf("%s: seconds observed +%v, want +%v", s.name, d, s.wantSeconds)
		}
	}
}
