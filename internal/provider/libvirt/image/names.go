package image

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// maxVolumeName is the longest volume name banlieue writes: a LibvirtMachine's
// spec.bootSource.volume admits 200 characters, and a base no machine can name is of no use.
const maxVolumeName = 200

// volumeDigestChars is how much of the artifact's sha256 an import volume's name carries: 64
// bits, so two artifacts of one VMImage do not share a volume by chance.
const volumeDigestChars = 16

// hashChars is the length of the hash that makes a sanitised or cut Kubernetes name unique.
const hashChars = 10

// ArtifactVolumeName is the volume an import Job writes a VMImage's artifact into, on every
// pool: `<vmimage>-<first 16 hex of the artifact's sha256>.raw` (`.iso` for an ISO). Named by
// content, a rebuilt artifact lands in a volume of its own, and the base that existing overlays
// back onto is never rewritten. Stripping the fixed-length suffix gives the VMImage name back,
// so two VMImages (`foo` and `foo.raw`) never share a volume. A VMImage name too long to fit
// the 200 characters keeps its first 162, then `_` and 16 hex of the whole name's sha256:
// Kubernetes names never contain `_`, so a shortened name cannot equal one kept whole.
func ArtifactVolumeName(vmimage, sha256Hex string, iso bool) string {
	suffix := "-" + sha256Hex[:volumeDigestChars] + extension(iso)
	if len(vmimage)+len(suffix) > maxVolumeName {
		keep := maxVolumeName - len(suffix) - 1 - volumeDigestChars
		vmimage = vmimage[:keep] + "_" + hashOf(volumeDigestChars, vmimage)
	}
	return vmimage + suffix
}

// defaultVolumeName is the volume of a by-hand import without --volume-name: a name that stays
// the same across artifacts, for a BackingFile VMImage to point at. The extension is always
// appended, so that `foo` and `foo.raw` do not share a volume here either.
func defaultVolumeName(vmimage string, iso bool) string { return vmimage + extension(iso) }

func extension(iso bool) string {
	if iso {
		return ".iso"
	}
	return ".raw"
}

// ImportJobName is the import Job of one VMImage, Provider and pool: `import-<vmimage>-<provider>-<pool>`
// lower-cased, every character that is not a letter or digit turned into '-', cut to leave room
// for '-' and 10 hex of the sha256 of the unsanitised VMImage, Provider namespace, Provider and
// pool. The hash is always there: sanitising merges names (`nvme_pool`, `nvme-pool`), cutting
// merges long ones, and '-' also occurs inside the names joined (`a-b` on Provider `c` is `a`
// on Provider `b-c`), so no name without it would be free of collisions. 63 characters at most
// (internal/naming.Capped).
func ImportJobName(image, providerNamespace, provider, pool string) string {
	sanitized := sanitize(strings.ToLower("import-"+image+"-"+provider+"-"+pool), isNameChar)
	return withHash(sanitized, hashOf(hashChars, image, providerNamespace, provider, pool))
}

// labelValue is s when it is a valid label value. Otherwise (too long, or holding characters a
// label value may not) every such character becomes '-', the result is cut, and '-' and 10 hex
// of the sha256 of s are appended, so that two inputs never share a value and an import of a
// 70-character VMImage or of pool `nvme pool` can still be created.
func labelValue(s string) string {
	if len(validation.IsValidLabelValue(s)) == 0 {
		return s
	}
	return withHash(sanitize(s, isLabelChar), hashOf(hashChars, s))
}

// withHash cuts prefix so that it, '-' and hash fit a label value, and trims it to end on a
// letter or digit. The hash alone is returned when nothing of prefix is left.
func withHash(prefix, hash string) string {
	prefix = prefix[:min(len(prefix), validation.LabelValueMaxLength-1-len(hash))]
	prefix = strings.TrimFunc(prefix, func(r rune) bool { return !isAlnum(r) })
	if prefix == "" {
		return hash
	}
	return prefix + "-" + hash
}

// sanitize replaces every rune keep refuses with '-'.
func sanitize(s string, keep func(rune) bool) string {
	return strings.Map(func(r rune) rune {
		if keep(r) {
			return r
		}
		return '-'
	}, s)
}

func isAlnum(r rune) bool {
	return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9'
}

func isNameChar(r rune) bool { return r >= 'a' && r <= 'z' || r >= '0' && r <= '9' }

func isLabelChar(r rune) bool { return isAlnum(r) || r == '-' || r == '_' || r == '.' }

// hashOf is the first n hex digits of the sha256 of parts, each ended by a NUL: no Kubernetes
// or libvirt name contains one, so distinct lists never hash the same input.
func hashOf(n int, parts ...string) string {
	h := sha256.New()
	for _, p := range parts {
		h.Write([]byte(p)) // hash.Hash.Write never fails.
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))[:n]
}

// importIdentity is what an import Job is for: the VMImage, the Provider (namespace and name),
// the pool and the artifact's checksum, hashed whole. A Job of the expected name is adopted only
// when it carries exactly this value and is controlled by the VMImage of the same UID.
func importIdentity(image, providerNamespace, provider, pool, checksum string) string {
	return hashOf(sha256.Size*2, image, providerNamespace, provider, pool, checksum)
}
