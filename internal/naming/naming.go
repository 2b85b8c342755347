// Package naming derives Kubernetes object names that must fit a 63-character limit (label
// values, DNS-1123 labels such as Service or Job names) from longer, user-controlled inputs.
package naming

import (
	"fmt"
	"hash/fnv"
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
