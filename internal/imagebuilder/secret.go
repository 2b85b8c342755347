package imagebuilder

import (
	"crypto/sha256"
	"encoding/hex"

	corev1 "k8s.io/api/core/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"

	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
	"banlieue.io/banlieue/internal/imagebuilder/build"
)

// sourceKey is the key of the build Secret that holds importFrom.
const sourceKey = "from"

// The source URL may carry a credential (userinfo, a presigned query), and a Job's argv and
// annotations are read by anyone who may get Jobs or pods, shown by `kubectl describe` and kept
// in the audit log. So the URL goes into a Secret named after the Job, always (deciding which
// URLs hold a credential would be a guess), and reaches the build through the environment
// (docs/guides/image-sources.md, "Credentials in source URLs").

// SourceSecretName is the name of the Secret beside a VMImage's build Job: the Job's own name.
func SourceSecretName(vmimage string) string {
	return BuildJobName(vmimage)
}

// sourceSecret is the build Secret of s: importFrom under sourceKey, labelled like the Job and
// owned by the VMImage like the Job, so it goes with the VMImage. It outlives a replaced Job on
// purpose: the replacement reads the same name, applied with the new source before it exists.
func sourceSecret(s jobSpec) *corev1ac.SecretApplyConfiguration {
	return corev1ac.Secret(SourceSecretName(s.Image.Name), s.Namespace).
		WithLabels(jobLabels(s.Image)).
		WithOwnerReferences(metav1ac.OwnerReference().
			WithAPIVersion(banlieuev1.GroupVersion.String()).WithKind("VMImage").
			WithName(s.Image.Name).WithUID(s.Image.UID).WithController(true)).
		WithType(corev1.SecretTypeOpaque).
		WithData(map[string][]byte{sourceKey: []byte(s.Source.ImportFrom)})
}

// sourceEnv is how the build container reads importFrom: the kubelet resolves it from the
// Secret, so the value is in no object but the Secret.
func sourceEnv(vmimage string) corev1.EnvVar {
	return corev1.EnvVar{Name: build.FromEnv, ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
		LocalObjectReference: corev1.LocalObjectReference{Name: SourceSecretName(vmimage)},
		Key:                  sourceKey,
	}}}
}

// SourceHash identifies a source (importFrom and checksum) without holding it: the build Job's
// banlieue.io/source-hash annotation, which stale() compares. The NUL keeps `a`+`bc` apart from
// `ab`+`c`.
func SourceHash(src banlieuev1.ImageSource) string {
	sum := sha256.Sum256([]byte(src.ImportFrom + "\x00" + src.Checksum))
	return "sha256:" + hex.EncodeToString(sum[:])
}
