package app

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	batchv1 "k8s.io/api/batch/v1"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// JobSeries are the series of one kind of finished Job (build, import): a duration histogram by
// result and a byte counter (docs/operations.md, "banlieue's series"). A Job's process lives too
// short to be scraped, so the role that owns the Jobs records what it reads of each finished one:
// the Job controller's start and end times, and the bytes the Job handled (ADR 0116). The series
// are registered with the process and stay empty until Init, so only the owning role exports them.
type JobSeries struct {
	duration *prometheus.HistogramVec
	bytes    *prometheus.CounterVec
	// once holds the Jobs already recorded, since this process leads.
	once *ObservedOnce
}

// NewJobSeries registers <prefix>_duration_seconds and <prefix>_bytes_total with
// controller-runtime's registry; call it once per prefix, from a package variable.
func NewJobSeries(prefix, durationHelp, bytesHelp string) *JobSeries {
	s := &JobSeries{
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: prefix + "_duration_seconds",
			Help: durationHelp,
			// 5 s to ~85 min: a small image builds or uploads in seconds, a large one over a slow
			// link in most of an hour.
			Buckets: prometheus.ExponentialBuckets(5, 2, 11),
		}, []string{"result"}),
		bytes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: prefix + "_bytes_total",
			Help: bytesHelp,
		}, nil),
		once: NewObservedOnce(LeadingSince),
	}
	metrics.Registry.MustRegister(s.duration, s.bytes)
	return s
}

// Since is s recording events from since on instead of from when this process leads: a test
// plays an election with it. The series are shared with s.
func (s *JobSeries) Since(since func() (time.Time, bool)) *JobSeries {
	return &JobSeries{duration: s.duration, bytes: s.bytes, once: NewObservedOnce(since)}
}

// Init creates the series at zero: no Job has finished yet, which is what an alert or a rate
// over them needs to tell from "not scraped".
func (s *JobSeries) Init() {
	for _, r := range JobResults {
		s.duration.WithLabelValues(r)
	}
	s.bytes.WithLabelValues()
}

// Record records a finished Job once: its run time under result (the Job's own result when
// result is empty) and, for a success, bytes. A running Job, one already recorded or one that
// finished before this process led is not recorded.
func (s *JobSeries) Record(job *batchv1.Job, result string, bytes int64) {
	own, took, finished, ok := FinishedJob(job)
	if !ok || !s.once.First(job.UID, finished) {
		return
	}
	if result == "" {
		result = own
	}
	s.duration.WithLabelValues(result).Observe(took.Seconds())
	if result == JobSucceeded {
		s.bytes.WithLabelValues().Add(float64(bytes))
	}
}
