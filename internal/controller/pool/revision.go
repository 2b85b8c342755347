package pool

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"strings"

	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
)

// revisionLength keeps the revision short enough to read in a label listing while 48 bits of
// digest still tell builds apart.
const revisionLength = 12

// imageRevision names the image content new members are created from: the built artifact's
// checksum, shortened, or gen-<generation> for an image with no build (a BackingFile source),
// whose spec is all that can change.
func imageRevision(image *banlieuev1.VMImage) string {
	if a := image.Status.BuildArtifact; a != nil && a.Checksum != "" {
		return shortDigest(a.Checksum)
	}
	return "gen-" + strconv.FormatInt(image.Generation, 10)
}

// shortDigest is the leading hex of an "<alg>:<hex>" checksum, so the label can be matched by eye
// against the image status. Anything that is not plain hex is hashed first, because the result
// must be a valid label value.
func shortDigest(checksum string) string {
	digest := strings.ToLower(checksum[strings.LastIndex(checksum, ":")+1:])
	if len(digest) < revisionLength || strings.Trim(digest, "0123456789abcdef") != "" {
		sum := sha256.Sum256([]byte(checksum))
		digest = hex.EncodeToString(sum[:])
	}
	return digest[:revisionLength]
}
