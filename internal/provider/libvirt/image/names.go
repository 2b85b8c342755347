package image

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"

	providerlibvirt "banlieue.io/banlieue/internal/provider/libvirt"
)

// hashChars is the length of the hash that makes a sanitised or cut Kubernetes name unique.
const hashChars = 10

// defaultVolumeName is the volume of a by-hand import without --volume-name: a name that stays
// the same across artifacts, for a BackingFile VMImage to point at. The extension is always
// appended, so that `foo` and `foo.raw` do not share a volume here either.
func defaultVolumeName(vmimage string, iso bool) string {
	return vmimage + providerlibvirt.ImageExtension(iso)
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
