package imagebuilder

import (
	"encoding/json"
	"fmt"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
	"banlieue.io/banlieue/internal/imagebuilder/build"
	"banlieue.io/banlieue/pkg/extentdigest"
)

// pendingArtifact is the status while no Job exists (yet, or again after a stale one went).
func pendingArtifact(kind banlieuev1.ArtifactKind, message string) *banlieuev1.BuildArtifact {
	return &banlieuev1.BuildArtifact{Kind: kind, Phase: banlieuev1.BuildPending, Reason: banlieuev1.ReasonPending, Message: message}
}

// invalidSourceArtifact is the status of a source no build could accept.
func invalidSourceArtifact(kind banlieuev1.ArtifactKind, err error) *banlieuev1.BuildArtifact {
	return &banlieuev1.BuildArtifact{Kind: kind, Phase: banlieuev1.BuildFailed, Reason: banlieuev1.ReasonBuildFailed, Message: err.Error()}
}

// mirror maps a Job and, once it finished, its pod's termination message onto buildArtifact
// (docs/guides/libvirt-provider.md, "6. Get an image onto the host"). A successful build's message is its JSON result; a failed one's is the error.
func mirror(job *batchv1.Job, pvc, termination string) *banlieuev1.BuildArtifact {
	a := &banlieuev1.BuildArtifact{
		Kind:   jobKind(job),
		JobRef: &banlieuev1.JobReference{Name: job.Name, Namespace: job.Namespace},
	}
	switch stateOf(job) {
	case jobPending:
		a.Phase, a.Reason, a.Message = banlieuev1.BuildPending, banlieuev1.ReasonPending, "build Job "+job.Name+" created; waiting for its pod"
	case jobRunning:
		a.Phase, a.Reason, a.Message = banlieuev1.BuildBuilding, banlieuev1.ReasonBuilding, "build Job "+job.Name+" running"
	case jobFailed:
		a.Phase = banlieuev1.BuildFailed
		a.Reason, a.Message = parseFailure(termination)
		if m, ok := deadlineMessage(job); ok {
			a.Reason, a.Message = banlieuev1.ReasonBuildFailed, m
		} else if a.Message == "" {
			a.Message = failedMessage(job)
		}
	case jobSucceeded:
		res, err := parseResult(termination)
		if err != nil {
			a.Phase, a.Reason = banlieuev1.BuildFailed, banlieuev1.ReasonBuildFailed
			a.Message = fmt.Sprintf("build Job %s succeeded but its result is unreadable: %v", job.Name, err)
			return a
		}
		a.Phase, a.Reason, a.Message = banlieuev1.BuildReady, banlieuev1.ReasonReconciled, "artifact "+res.File+" built"
		a.Kind, a.File, a.Checksum, a.SizeBytes, a.SourceDigest = res.Kind, res.File, res.Checksum, res.SizeBytes, res.SourceDigest
		a.ExtentDigest = res.ExtentDigest
		a.PVCRef = &banlieuev1.LocalObjectReference{Name: pvc}
	}
	return a
}

// parseFailure decodes a failed build's termination message into the reason and message of
// its build.Failure. Anything else (the tail of the log a crashed build left) is a BuildFailed
// message as it stands.
func parseFailure(termination string) (reason, message string) {
	var f build.Failure
	if json.Unmarshal([]byte(termination), &f) == nil &&
		(f.Reason == banlieuev1.ReasonBuildFailed || f.Reason == banlieuev1.ReasonSourceRefused) {
		return f.Reason, f.Message
	}
	return banlieuev1.ReasonBuildFailed, termination
}

// parseResult decodes the build's termination message.
func parseResult(termination string) (build.Result, error) {
	var res build.Result
	if termination == "" {
		return res, fmt.Errorf("the build pod left no termination message")
	}
	if err := json.Unmarshal([]byte(termination), &res); err != nil {
		return res, err
	}
	switch {
	case res.File == "" || res.Checksum == "":
		return res, fmt.Errorf("no file or checksum in %q", termination)
	case res.Kind != banlieuev1.ArtifactCloudImage && res.Kind != banlieuev1.ArtifactISO:
		return res, fmt.Errorf("unknown artifact kind %q", res.Kind)
	}
	if res.ExtentDigest != "" {
		d, err := extentdigest.Parse(res.ExtentDigest)
		if err != nil {
			return res, fmt.Errorf("extentDigest: %w", err)
		}
		res.ExtentDigest = d
	}
	return res, nil
}

// podTermination is the termination message of the Job's pod that decided its outcome: the
// succeeded pod, or the last failed one (earlier failures may differ, e.g. a download the retry
// got further with). Pods of an earlier Job of the same name are skipped by owner UID.
func podTermination(pods []corev1.Pod, job types.UID, succeeded bool) (string, bool) {
	var msg string
	var last time.Time
	found := false
	for i := range pods {
		p := &pods[i]
		if !ownedBy(p, job) || len(p.Status.ContainerStatuses) == 0 {
			continue
		}
		term := p.Status.ContainerStatuses[0].State.Terminated
		if term == nil {
			continue
		}
		switch {
		case succeeded && p.Status.Phase == corev1.PodSucceeded:
			return term.Message, true
		case !succeeded && p.Status.Phase == corev1.PodFailed:
			if at := term.FinishedAt.Time; !found || !at.Before(last) {
				msg, last, found = term.Message, at, true
			}
		}
	}
	return msg, found
}

func ownedBy(p *corev1.Pod, uid types.UID) bool {
	for _, o := range p.OwnerReferences {
		if o.UID == uid {
			return true
		}
	}
	return false
}
