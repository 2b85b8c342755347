// Package userdata is the contract between banlieue-controller, which writes a machine's
// rendered cloud-init user-data into a per-machine Secret, and the provider, which reads it back
// (docs/adr/0095-user-data-in-a-per-machine-secret.md): the Secret's name, keys and labels, and
// the salted hash the machine carries in its spec instead of the content.
package userdata

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"

	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
	"banlieue.io/banlieue/internal/naming"
)

// Keys of the per-machine Secret.
const (
	// KeyUserData holds the rendered user-data, byte for byte as the seed carries it.
	KeyUserData = "user-data"
	// KeySalt holds the random salt of the machine's spec.userDataHash, so the hash, which every
	// reader of LibvirtMachines sees, cannot be checked against guessed content.
	KeySalt = "salt"
)

// LabelValueMachine is banlieuev1.LabelUserData on banlieue's own per-machine Secret, telling
// it from a user's opted-in Secret ("true").
const LabelValueMachine = "machine"

// SaltSize is the length of a new salt in bytes.
const SaltSize = 16

// SecretName is the per-machine Secret of the machine named machine. It is a naming.Unique name
// over the machine's name, so two machines of a namespace never share one, and its "userdata-"
// prefix keeps it apart from the names banlieue gives anything else.
func SecretName(machine string) string {
	return naming.Unique("userdata-"+machine, "userdata", machine)
}

// Hash is the hex SHA-256 of salt followed by content: the machine's spec.userDataHash.
func Hash(salt, content []byte) string {
	h := sha256.New()
	h.Write(salt)    // hash.Hash.Write never fails.
	h.Write(content) // hash.Hash.Write never fails.
	return hex.EncodeToString(h.Sum(nil))
}

// Matches reports whether salt and content hash to want, in constant time.
func Matches(salt, content []byte, want string) bool {
	return subtle.ConstantTimeCompare([]byte(Hash(salt, content)), []byte(want)) == 1
}

// Labels are the per-machine Secret's labels: banlieue's, the machine's, and the user-data
// marker.
func Labels(machine string) map[string]string {
	return map[string]string{
		banlieuev1.LabelManagedBy: "banlieue-controller",
		banlieuev1.LabelOwnedBy:   naming.Capped(machine),
		banlieuev1.LabelUserData:  LabelValueMachine,
	}
}
