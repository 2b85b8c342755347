package libvirt

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"
)

const (
	digestA = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	digestB = "fedcba9876543210fedcba9876543210fedcba9876543210fedcba9876543210"
)

// nameHash is 16 hex of the sha256 of name and a NUL, as the import has always cut long names.
func nameHash(name string) string {
	sum := sha256.Sum256([]byte(name + "\x00"))
	return hex.EncodeToString(sum[:])[:16]
}

func TestArtifactVolumeName(t *testing.T) {
	long := strings.Repeat("a", 253)
	for _, tc := range []struct {
		image string
		iso   bool
		want  string
	}{
		{"ubuntu", false, "ubuntu-0123456789abcdef.raw"},
		{"ubuntu.raw", false, "ubuntu.raw-0123456789abcdef.raw"},
		{"win", true, "win-0123456789abcdef.iso"},
		{"win.iso", true, "win.iso-0123456789abcdef.iso"},
		{strings.Repeat("b", 179), false, strings.Repeat("b", 179) + "-0123456789abcdef.raw"},
		{long, false, strings.Repeat("a", 162) + "_" + nameHash(long) + "-0123456789abcdef.raw"},
	} {
		got := ArtifactVolumeName(tc.image, digestA, tc.iso)
		if got != tc.want {
			t.Errorf("ArtifactVolumeName(%q, %v) = %q, want %q", tc.image, tc.iso, got, tc.want)
		}
		if len(got) > MaxVolumeName {
			t.Errorf("ArtifactVolumeName(%q) is %d characters", tc.image, len(got))
		}
	}
	// Distinct VMImages, or distinct artifacts of one, never share a volume, however long.
	seen := map[string]string{}
	for _, image := range []string{"foo", "foo.raw", "foo-raw", "foo.raw.raw", "foo-0123456789abcdef",
		strings.Repeat("c", 179), strings.Repeat("c", 180), long, long[:252] + "b", long[:200] + "x" + long[201:]} {
		for _, digest := range []string{digestA, strings.Repeat("f", 64)} {
			for _, iso := range []bool{false, true} {
				v := ArtifactVolumeName(image, digest, iso)
				key := image + " " + digest[:1] + " " + map[bool]string{true: "iso", false: "raw"}[iso]
				if other, dup := seen[v]; dup {
					t.Errorf("%s and %s share volume %s", key, other, v)
				}
				seen[v] = key
			}
		}
	}
}

func TestArtifactVolumeDigest(t *testing.T) {
	long := strings.Repeat("a", 253)
	for _, tc := range []struct {
		image, name, digest string
	}{
		{"ubuntu", ArtifactVolumeName("ubuntu", digestA, false), digestA[:16]},
		{"ubuntu", ArtifactVolumeName("ubuntu", digestB, true), digestB[:16]},
		{long, ArtifactVolumeName(long, digestA, false), digestA[:16]},
		// Another VMImage's import volumes are never this one's.
		{"foo", ArtifactVolumeName("foo.raw", digestA, false), ""},
		{"foo", ArtifactVolumeName("foo-0123456789abcdef", digestA, false), ""},
		{"foo.raw", ArtifactVolumeName("foo", digestA, false), ""},
		{long, ArtifactVolumeName(long[:252]+"b", digestA, false), ""},
		// A by-hand import's default name of VMImage foo-0123456789abcdef looks like one.
		{"foo", "foo-0123456789abcdef.raw", "0123456789abcdef"},
		// Not the scheme: upper-case or non-hex digits, other extensions, markers, short.
		{"foo", "foo-0123456789ABCDEF.raw", ""},
		{"foo", "foo-0123456789abcdeg.raw", ""},
		{"foo", "foo-0123456789abcdef.qcow2", ""},
		{"foo", "foo-0123456789abcdef.raw.sha256", ""},
		{"foo", "foo.raw", ""},
		{"foo", "-0123456789abcdef.raw", ""},
		{"foo", "", ""},
	} {
		got, ok := ArtifactVolumeDigest(tc.image, tc.name)
		if got != tc.digest || ok != (tc.digest != "") {
			t.Errorf("ArtifactVolumeDigest(%.20q, %q) = %q, %v; want %q", tc.image, tc.name, got, ok, tc.digest)
		}
	}
}
