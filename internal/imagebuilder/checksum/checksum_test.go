package checksum

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	hex64 := strings.Repeat("aB", 32)
	for _, tc := range []struct {
		in, want, err string
	}{
		{in: "sha256:" + hex64, want: "sha256:" + strings.ToLower(hex64)},
		{in: "SHA512:" + strings.Repeat("0", 128), want: "sha512:" + strings.Repeat("0", 128)},
		{in: "deadbeef", err: "expected `<alg>:<hex>`"},
		{in: "sha256:", err: "expected `<alg>:<hex>`"},
		{in: "md5:" + strings.Repeat("0", 32), err: `unsupported algorithm "md5"`},
		{in: "sha256:abc", err: "64 hex digits"},
		{in: "sha256:" + strings.Repeat("z", 64), err: "64 hex digits"},
	} {
		got, err := Parse(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("Parse(%q) error = %v, want containing %q", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil || got.String() != tc.want {
			t.Errorf("Parse(%q) = %v, %v; want %s", tc.in, got, err, tc.want)
		}
	}
}

func TestVerify(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(path, []byte("hello\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	good, _ := Parse("sha256:5891b5b522d5df086d0ff0b110fbd9d21bb4fc7163af34d08286a2e846f6be03")
	if err := Verify(path, good); err != nil {
		t.Fatal(err)
	}
	bad, _ := Parse("sha256:" + strings.Repeat("0", 64))
	err := Verify(path, bad)
	if !errors.Is(err, ErrMismatch) || !strings.Contains(err.Error(), "computed sha256:5891b5b5") {
		t.Fatalf("Verify mismatch = %v", err)
	}
}
