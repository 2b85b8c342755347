// Package checksum parses and verifies the `<alg>:<hex>` digests that travel with images: the
// source checksum a VMImage declares, and the artifact checksum the imagebuilder publishes and
// the import re-verifies over the bytes it uploads.
package checksum

import (
	"crypto/sha256"
	"crypto/sha512"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"strings"
)

// ChunkSize is how much of a file is hashed at a time: large enough to keep the syscall count
// low, small enough that memory stays flat whatever the image size.
const ChunkSize = 1 << 20

// Digest is a parsed `<alg>:<hex>` value with a lower-case hex part.
type Digest struct {
	Alg string
	Hex string
}

// String is the canonical `<alg>:<hex>` form.
func (d Digest) String() string { return d.Alg + ":" + d.Hex }

// IsZero reports an unset digest.
func (d Digest) IsZero() bool { return d.Alg == "" }

var hexLen = map[string]int{"sha256": sha256.Size * 2, "sha512": sha512.Size * 2}

// Parse splits s into algorithm and hex. Only sha256 and sha512 are accepted: anything weaker
// would let a tampered image through, and failing closed is the point of a checksum.
func Parse(s string) (Digest, error) {
	alg, hx, ok := strings.Cut(s, ":")
	if !ok || alg == "" || hx == "" {
		return Digest{}, fmt.Errorf("expected `<alg>:<hex>` (e.g. sha256:<64 hex digits>), got %q", s)
	}
	alg = strings.ToLower(alg)
	want, known := hexLen[alg]
	if !known {
		return Digest{}, fmt.Errorf("unsupported algorithm %q (use sha256 or sha512)", alg)
	}
	if _, err := hex.DecodeString(hx); err != nil || len(hx) != want {
		return Digest{}, fmt.Errorf("expected `<alg>:<hex>` with %d hex digits for %s, got %q", want, alg, s)
	}
	return Digest{Alg: alg, Hex: strings.ToLower(hx)}, nil
}

// New returns a hash of the algorithm (sha256 for the zero Digest).
func (d Digest) New() hash.Hash {
	if d.Alg == "sha512" {
		return sha512.New()
	}
	return sha256.New()
}

// Of returns the digest of what h has consumed, under alg.
func Of(alg string, h hash.Hash) Digest {
	return Digest{Alg: alg, Hex: hex.EncodeToString(h.Sum(nil))}
}

// File hashes the file at path with alg in ChunkSize reads.
func File(path, alg string) (Digest, error) {
	f, err := os.Open(path)
	if err != nil {
		return Digest{}, err
	}
	defer func() { _ = f.Close() }() // read only: closing it loses nothing
	h := Digest{Alg: alg}.New()
	if _, err := io.CopyBuffer(h, f, make([]byte, ChunkSize)); err != nil {
		return Digest{}, fmt.Errorf("hashing %s: %w", path, err)
	}
	return Of(alg, h), nil
}

// MismatchError is a file whose content does not match the expected digest.
type MismatchError struct {
	Path               string
	Expected, Computed Digest
}

func (e *MismatchError) Error() string {
	return fmt.Sprintf("checksum mismatch for %s: expected %s, computed %s", e.Path, e.Expected, e.Computed)
}

// ErrMismatch matches every *MismatchError under errors.Is.
var ErrMismatch = errors.New("checksum mismatch")

func (e *MismatchError) Is(target error) bool { return target == ErrMismatch }

// Verify hashes path and compares it with want; a difference is a *MismatchError.
func Verify(path string, want Digest) error {
	got, err := File(path, want.Alg)
	if err != nil {
		return err
	}
	if got != want {
		return &MismatchError{Path: path, Expected: want, Computed: got}
	}
	return nil
}
