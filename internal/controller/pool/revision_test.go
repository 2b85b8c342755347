package pool

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
)

func TestImageRevision(t *testing.T) {
	image := func(gen int64, checksum string) *banlieuev1.VMImage {
		img := &banlieuev1.VMImage{ObjectMeta: metav1.ObjectMeta{Generation: gen}}
		if checksum != "" {
			img.Status.BuildArtifact = &banlieuev1.BuildArtifact{Checksum: checksum}
		}
		return img
	}
	tests := []struct {
		image *banlieuev1.VMImage
		want  string
	}{
		{image(3, "sha256:0123456789ABCDEF0123456789abcdef0123456789abcdef0123456789abcdef"), "0123456789ab"},
		{image(3, ""), "gen-3"},
		// Not hex: hashed, so the label value is still valid and still changes with the input.
		{image(3, "weird:not/hex"), shortDigest("weird:not/hex")},
	}
	for _, tc := range tests {
		if got := imageRevision(tc.image); got != tc.want || len(got) > 63 {
			t.Errorf("revision = %q, want %q", got, tc.want)
		}
	}
	if a, b := shortDigest("weird:not/hex"), shortDigest("weird:not/hey"); a == b || len(a) != revisionLength {
		t.Errorf("hashed revisions %q and %q", a, b)
	}
}
