// Package naming derives Kubernetes object names that must fit a 63-character limit (label
// values, DNS-1123 labels such as Service or Job names) from longer, user-controlled inputs.
package naming

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"
)

// MaxLength is the longest name Capped returns: a DNS-1123 label, which is also the limit of a
// label value, so a capped name can be used as both.
const MaxLength = 63

// keep is how much of a too-long name survives: 54 characters, "-" and 8 hex digits make 63.
const keep = 54

// Capped returns name unchanged when it fits in MaxLength. Otherwise it keeps the first 54
// characters, trims trailing dashes and appends "-" and the FNV-1a-32 hash of the full name, so
// two long names that share a prefix still differ and the same input always maps to the same
// name (docs/decisions.md, "Names capped with a hash").
func Capped(name string) string {
	if len(name) <= MaxLength {
		return name
	}
	h := fnv.New32a()
	h.Write([]byte(name)) // hash.Hash.Write never fails.
	return fmt.Sprintf("%s-%08x", strings.TrimRight(name[:keep], "-"), h.Sum32())
}

// digestHex is how many hex digits of SHA-256 a Unique name carries: 64 bits, so nobody can
// search for a second identity that lands on someone else's name. Capped's 32-bit FNV is
// enough for a label on one's own objects, not for a name other tenants' objects share a
// scope with (docs/security.md, "Workload names in shared scopes").
const digestHex = 16

// keepUnique is how much of the readable part survives: 46 characters, "-" and 16 hex digits
// make 63.
const keepUnique = MaxLength - 1 - digestHex

// Unique names an object after identity, the tuple that must own it, with readable as the
// part people read. It is Capped's shape — a readable prefix, "-" and a digest — with two
// differences: the digest is always there, and it is taken over the identity's parts rather
// than over the joined string. Joining is ambiguous ("team"+"a-edge" and "team-a"+"edge" both
// read team-a-edge); the digest length-prefixes each part, so two different tuples never share
// a name, whatever their lengths. The result is at most 63 characters, ends in a hex digit,
// and its readable part is cut before a trailing "-" or "." so it stays a valid DNS-1123 name
// and label value whenever readable is built from such names.
func Unique(readable string, identity ...string) string {
	h := sha256.New()
	for _, part := range identity {
		h.Write([]byte(strconv.Itoa(len(part)) + ":" + part)) // hash.Hash.Write never fails.
	}
	digest := hex.EncodeToString(h.Sum(nil))[:digestHex]
	if len(readable) > keepUnique {
		readable = readable[:keepUnique]
	}
	return strings.TrimRight(readable, "-.") + "-" + digest
}
