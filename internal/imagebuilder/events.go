package imagebuilder

import (
	corev1 "k8s.io/api/core/v1"

	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
)

// recorderName is the reporting controller of the imagebuilder's events.
const recorderName = "banlieue-imagebuilder"

// buildTransition decides the event a status write announces, from the build artifact the pass
// found and the one it wrote: BuildPublished when the artifact becomes Ready, the failure's own
// reason (BuildFailed, SourceRefused) when the build becomes Failed. A pass that finds the build
// where it was announces nothing (docs/adr/0106); BuildStarted is announced where the Job is
// created (createJob).
func buildTransition(before, after *banlieuev1.BuildArtifact) (eventType, reason string, ok bool) {
	if after == nil || (before != nil && before.Phase == after.Phase) {
		return "", "", false
	}
	switch after.Phase {
	case banlieuev1.BuildReady:
		return corev1.EventTypeNormal, banlieuev1.ReasonBuildPublished, true
	case banlieuev1.BuildFailed:
		return corev1.EventTypeWarning, after.Reason, true
	}
	return "", "", false
}
