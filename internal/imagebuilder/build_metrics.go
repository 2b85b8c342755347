package imagebuilder

import (
	batchv1 "k8s.io/api/batch/v1"

	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
	"banlieue.io/banlieue/internal/app"
)

// builds are the build series; the bytes are the artifact size the build reported.
var builds = app.NewJobSeries("banlieue_image_build",
	"Run time of finished build Jobs (status.startTime to their Complete or Failed condition), by result.",
	"Bytes of the artifacts successful builds wrote (status.buildArtifact.sizeBytes).")

// recordBuild records a build Job once, when the status it led to is final: a Ready artifact
// is a success, a Failed one a failure, whatever the Job's own result. A Job that succeeded with
// the wrong output kind is replaced (rebuildAs) and not recorded; its replacement is.
func recordBuild(job *batchv1.Job, artifact *banlieuev1.BuildArtifact) {
	switch artifact.Phase {
	case banlieuev1.BuildReady:
		builds.Record(job, app.JobSucceeded, artifact.SizeBytes)
	case banlieuev1.BuildFailed:
		builds.Record(job, app.JobFailed, 0)
	}
}
