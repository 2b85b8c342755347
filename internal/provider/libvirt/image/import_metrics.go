package image

import (
	"github.com/prometheus/client_golang/prometheus"
	batchv1 "k8s.io/api/batch/v1"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
	"banlieue.io/banlieue/internal/app"
)

// The import series (docs/operations.md, "banlieue's series"). An import Job's process lives
// too short to be scraped, so the provider role records what it reads of each finished import
// Job: the Job controller's start and end times, and the size of the artifact it uploaded
// (ADR 0116). The vectors stay empty until SetupWithManager, so only the provider exports them.
var (
	importDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "banlieue_image_import_duration_seconds",
		Help: "Run time of finished import Jobs (status.startTime to their Complete or Failed condition), by result.",
		// 5 s to ~85 min, the build's buckets: an import reads the artifact the build wrote and
		// uploads it over one libvirt stream.
		Buckets: prometheus.ExponentialBuckets(5, 2, 11),
	}, []string{"result"})
	importBytes = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "banlieue_image_import_bytes_total",
		Help: "Bytes of the artifacts successful import Jobs uploaded into a pool (the artifact's sizeBytes).",
	}, nil)
	// imports are the import Jobs already recorded, since this process leads.
	imports = app.NewObservedOnce(app.LeadingSince)
)

func init() {
	metrics.Registry.MustRegister(importDuration, importBytes)
}

// initImportMetrics creates the series at zero: no import has finished yet.
func initImportMetrics() {
	for _, r := range app.JobResults {
		importDuration.WithLabelValues(r)
	}
	importBytes.WithLabelValues()
}

// recordImport records a finished import Job of the image's current artifact once. The bytes
// are the artifact's size, what the Job read and the volume holds; a sparse upload sends only
// its data on the wire.
func recordImport(job *batchv1.Job, artifact *banlieuev1.BuildArtifact) {
	result, took, finished, ok := app.FinishedJob(job)
	if !ok || !imports.First(job.UID, finished) {
		return
	}
	importDuration.WithLabelValues(result).Observe(took.Seconds())
	if result == app.JobSucceeded && artifact != nil {
		importBytes.WithLabelValues().Add(float64(artifact.SizeBytes))
	}
}
