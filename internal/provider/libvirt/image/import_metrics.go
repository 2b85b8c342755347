package image

import (
	batchv1 "k8s.io/api/batch/v1"

	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
	"banlieue.io/banlieue/internal/app"
)

// imports are the import series; the bytes are the artifact's size, what the Job read and the
// volume holds (a sparse upload sends only its data on the wire).
var imports = app.NewJobSeries("banlieue_image_import",
	"Run time of finished import Jobs (status.startTime to their Complete or Failed condition), by result.",
	"Bytes of the artifacts successful import Jobs uploaded into a pool (the artifact's sizeBytes).")

// recordImport records a finished import Job of the image's current artifact once, under the
// Job's own result.
func recordImport(job *batchv1.Job, artifact *banlieuev1.BuildArtifact) {
	var size int64
	if artifact != nil {
		size = artifact.SizeBytes
	}
	imports.Record(job, "", size)
}
