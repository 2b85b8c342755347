package iso9660

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// build builds v and returns the written bytes, checking that Size was
// right and that the strict reader accepts the result.
func build(t testing.TB, v Volume) ([]byte, *parsedImage) {
	t.Helper()
	im, err := Build(v)
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	var buf bytes.Buffer
	n, err := im.WriteTo(&buf)
	if err != nil {
		t.Fatalf("WriteTo: %v", err)
	}
	if n != im.Size() || int64(buf.Len()) != im.Size() {
		t.Fatalf("Size() = %d, WriteTo returned %d and wrote %d bytes", im.Size(), n, buf.Len())
	}
	p, err := readImage(buf.Bytes())
	if err != nil {
		t.Fatalf("reading the image back: %v", err)
	}
	return buf.Bytes(), p
}

// writeTemp writes img to a file for the external tools.
func writeTemp(t testing.TB, img []byte) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "image.iso")
	if err := os.WriteFile(path, img, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// requireTool returns the path of an external reader. Outside CI a missing
// tool skips the test; CI installs them all, so there it fails.
func requireTool(t testing.TB, name string) string {
	t.Helper()
	path, err := exec.LookPath(name)
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("%s is required in CI: %v", name, err)
		}
		t.Skipf("%s not installed: %v", name, err)
	}
	return path
}

// run runs a tool and returns its stdout, failing the test on error.
func run(t testing.TB, name string, args ...string) []byte {
	t.Helper()
	cmd := exec.Command(requireTool(t, name), args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s %v: %v\n%s", name, args, err, stderr.Bytes())
	}
	return out
}
