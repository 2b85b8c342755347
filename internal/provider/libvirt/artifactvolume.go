package libvirt

import (
	"crypto/sha256"
	"encoding/hex"
)

// The names of the volumes an import writes (internal/provider/libvirt/image). They live here,
// below the image package, because the machine controller checks a boot volume against them
// (authority.go): a machine built on an earlier import of its VMImage keeps that base after the
// row moved to a rebuilt artifact (docs/reliability.md, "Ownership: only what is banlieue's").

// MaxVolumeName is the longest volume name banlieue writes: a LibvirtMachine's
// spec.bootSource.volume admits 200 characters, and a base no machine can name is of no use.
const MaxVolumeName = 200

// volumeDigestChars is how much of the artifact's sha256 an import volume's name carries: 64
// bits, so two artifacts of one VMImage do not share a volume by chance.
const volumeDigestChars = 16

// ArtifactVolumeName is the volume an import Job writes a VMImage's artifact into, on every
// pool: `<vmimage>-<first 16 hex of the artifact's sha256>.raw` (`.iso` for an ISO). Named by
// content, a rebuilt artifact lands in a volume of its own, and the base that existing overlays
// back onto is never rewritten. Stripping the fixed-length suffix gives the VMImage name back,
// so two VMImages (`foo` and `foo.raw`) never share a volume. A VMImage name too long to fit
// the 200 characters keeps its first 162, then `_` and 16 hex of the sha256 of the whole name
// followed by a NUL: Kubernetes names never contain `_`, so a shortened name cannot equal one
// kept whole.
func ArtifactVolumeName(vmimage, sha256Hex string, iso bool) string {
	suffix := "-" + sha256Hex[:volumeDigestChars] + ImageExtension(iso)
	if len(vmimage)+len(suffix) > MaxVolumeName {
		keep := MaxVolumeName - len(suffix) - 1 - volumeDigestChars
		sum := sha256.Sum256([]byte(vmimage + "\x00"))
		vmimage = vmimage[:keep] + "_" + hex.EncodeToString(sum[:])[:volumeDigestChars]
	}
	return vmimage + suffix
}

// ImageExtension is the extension of an imported volume: `.iso` for an installer, `.raw` else.
func ImageExtension(iso bool) string {
	if iso {
		return ".iso"
	}
	return ".raw"
}

// ArtifactVolumeDigest returns the digest digits of name when name is
// ArtifactVolumeName(vmimage, <digest>, iso) for some 16 lower-case hex digits and kind. The
// name is rebuilt and compared whole, so a volume of another VMImage (`foo.raw` against `foo`,
// `foo-0123456789abcdef` against `foo`) never matches: the suffix has a fixed length.
func ArtifactVolumeDigest(vmimage, name string) (string, bool) {
	const ext = len(".raw")
	if len(name) < 1+volumeDigestChars+ext {
		return "", false
	}
	kind := name[len(name)-ext:]
	digest := name[len(name)-ext-volumeDigestChars : len(name)-ext]
	if kind != ".raw" && kind != ".iso" || !isLowerHex(digest) {
		return "", false
	}
	if ArtifactVolumeName(vmimage, digest, kind == ".iso") != name {
		return "", false
	}
	return digest, true
}

func isLowerHex(s string) bool {
	for _, r := range s {
		if !(r >= '0' && r <= '9' || r >= 'a' && r <= 'f') {
			return false
		}
	}
	return s != ""
}
