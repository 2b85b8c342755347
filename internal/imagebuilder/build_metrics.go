package imagebuilder

import (
	"github.com/prometheus/client_golang/prometheus"
	batchv1 "k8s.io/api/batch/v1"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
	"banlieue.io/banlieue/internal/app"
)

// The build series (docs/operations.md, "banlieue's series"). A build Job's process lives too
// short to be scraped, so this role records what it reads of each finished Job: the Job
// controller's start and end times, and the artifact size the build reported (ADR 0116). The
// vectors stay empty until SetupWithManager, so only the imagebuilder role exports them.
var (
	buildDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "banlieue_image_build_duration_seconds",
		Help: "Run time of finished build Jobs (status.startTime to their Complete or Failed condition), by result.",
		// 5 s to ~85 min: a small cloud image downloads and converts in seconds, a large one
		// over a slow link in most of an hour.
		Buckets: prometheus.ExponentialBuckets(5, 2, 11),
	}, []string{"result"})
	buildBytes = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "banlieue_image_build_bytes_total",
		Help: "Bytes of the artifacts successful builds wrote (status.buildArtifact.sizeBytes).",
	}, nil)
	// builds are the build Jobs already recorded, since this process leads.
	builds = app.NewObservedOnce(app.LeadingSince)
)

func init() {
	metrics.Registry.MustRegister(buildDuration, buildBytes)
}

// initBuildMetrics creates the series at zero: no build has finished yet, which is what an
// alert or a rate over them needs to tell from "not scraped".
func initBuildMetrics() {
	for _, r := range app.JobResults {
		buildDuration.WithLabelValues(r)
	}
	buildBytes.WithLabelValues()
}

// recordBuild records a build Job once, when the status it led to is final: a Ready artifact
// is a success, a Failed one a failure. A Job that succeeded with the wrong output kind is
// replaced (rebuildAs) and not recorded; its replacement is.
func recordBuild(job *batchv1.Job, artifact *banlieuev1.BuildArtifact) {
	var result string
	switch artifact.Phase {
	case banlieuev1.BuildReady:
		result = app.JobSucceeded
	case banlieuev1.BuildFailed:
		result = app.JobFailed
	default:
		return
	}
	_, took, finished, ok := app.FinishedJob(job)
	if !ok || !builds.First(job.UID, finished) {
		return
	}
	buildDuration.WithLabelValues(result).Observe(took.Seconds())
	if result == app.JobSucceeded {
		buildBytes.WithLabelValues().Add(float64(artifact.SizeBytes))
	}
}
