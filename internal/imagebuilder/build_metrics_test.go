package imagebuilder

import (
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
	"banlieue.io/banlieue/internal/testenv"
)

// A finished build is recorded under its artifact's outcome, not the Job's: a Job that
// succeeded with the wrong output kind (artifact Pending again, being replaced) is not recorded,
// and a Ready artifact adds its size. How each Job is recorded once is app.JobSeries' test.
func TestRecordBuildByArtifactPhase(t *testing.T) {
	builds.Init()
	now := time.Now()
	// As if this process had been elected now.
	builds = builds.Since(func() (time.Time, bool) { return now, true })
	job := func(uid string) *batchv1.Job {
		start := metav1.NewTime(now.Add(-95 * time.Second))
		return &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: BuildJobName("img"), UID: types.UID(uid)},
			Status: batchv1.JobStatus{StartTime: &start, Conditions: []batchv1.JobCondition{
				{Type: batchv1.JobComplete, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(now)}}}}
	}
	steps := []struct {
		name              string
		phase             banlieuev1.BuildPhase
		succeeded, failed float64 // observations added
		bytes             float64
	}{
		{"Ready: a success with its size", banlieuev1.BuildReady, 1, 0, 300 << 20},
		{"Failed although the Job completed", banlieuev1.BuildFailed, 0, 1, 0},
		{"the wrong kind, being replaced", banlieuev1.BuildPending, 0, 0, 0},
	}
	const hist, bytes = "banlieue_image_build_duration_seconds", "banlieue_image_build_bytes_total"
	value := func(name string, labels map[string]string) float64 {
		v, ok := testenv.RegistrySample(t, name, labels)
		if !ok {
			t.Fatalf("no series %s%v", name, labels)
		}
		return v
	}
	ok, bad, none := map[string]string{"result": "succeeded"}, map[string]string{"result": "failed"}, map[string]string{}
	for i, s := range steps {
		s0, f0, b0 := value(hist, ok), value(hist, bad), value(bytes, none)
		recordBuild(job(string(rune('a'+i))), &banlieuev1.BuildArtifact{Phase: s.phase, SizeBytes: 300 << 20})
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
