package app

import (
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
)

// The result label of the build and import duration series.
const (
	JobSucceeded = "succeeded"
	JobFailed    = "failed"
)

// JobResults are the values of the result label, which a role creates at zero observations.
var JobResults = []string{JobSucceeded, JobFailed}

// FinishedJob is how a finished Job ended and how long it ran: from status.startTime to the
// Complete or Failed condition's lastTransitionTime, both written by the Job controller, so the
// run time is the cluster's and not that of whichever role reads it. ok is false while the Job
// runs, and for a Job without a start time (stopped before any pod).
func FinishedJob(job *batchv1.Job) (result string, elapsed time.Duration, finishedAt time.Time, ok bool) {
	if job.Status.StartTime == nil {
		return "", 0, time.Time{}, false
	}
	for _, c := range job.Status.Conditions {
		if c.Status != corev1.ConditionTrue {
			continue
		}
		switch c.Type {
		case batchv1.JobComplete:
			result = JobSucceeded
		case batchv1.JobFailed:
			result = JobFailed
		default:
			continue
		}
		at := c.LastTransitionTime.Time
		return result, max(at.Sub(job.Status.StartTime.Time), 0), at, true
	}
	return "", 0, time.Time{}, false
}
