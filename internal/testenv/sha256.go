package testenv

import (
	"crypto/sha256"
	"encoding/hex"
	"io"
	"os"
	"testing"

	"banlieue.io/banlieue/pkg/extentdigest"
)

// FileSHA256 is the hex sha256 of a file, e.g. a volume read straight from its pool directory.
func FileSHA256(t testing.TB, path string) string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }() // read only: closing it loses nothing
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// FileExtentDigest is the extent digest (pkg/extentdigest) of a whole file, fed in one write:
// the reference a build's or an import's digest is compared with.
func FileExtentDigest(t testing.TB, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	x := extentdigest.New(int64(len(b)))
	_, _ = x.Write(b)
	d, err := x.Sum()
	if err != nil {
		t.Fatal(err)
	}
	return d
}
