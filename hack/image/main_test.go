package main

import (
	"archive/tar"
	"bufio"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

func TestParseUser(t *testing.T) {
	for _, tc := range []struct {
		in       string
		uid, gid int
		wantErr  bool
	}{
		{in: "65532:65532", uid: 65532, gid: 65532},
		{in: "0:0"},
		{in: "65532", wantErr: true},
		{in: "nonroot:nonroot", wantErr: true},
		{in: "1:x", wantErr: true},
	} {
		uid, gid, err := parseUser(tc.in)
		if (err != nil) != tc.wantErr || uid != tc.uid || gid != tc.gid {
			t.Errorf("parseUser(%q) = %d, %d, %v; want %d, %d, error %v", tc.in, uid, gid, err, tc.uid, tc.gid, tc.wantErr)
		}
	}
}

// dockerfile is what the repository's Dockerfile says about the image.
type dockerfile struct {
	copyTo, user string
	entrypoint   []string
}

func readDockerfile(t *testing.T) dockerfile {
	t.Helper()
	f, err := os.Open("../../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	var d dockerfile
	s := bufio.NewScanner(f)
	for s.Scan() {
		fields := strings.Fields(s.Text())
		if len(fields) < 2 {
			continue
		}
		switch fields[0] {
		case "COPY":
			d.copyTo = fields[len(fields)-1]
		case "USER":
			d.user = fields[1]
		case "ENTRYPOINT":
			if err := json.Unmarshal([]byte(strings.TrimPrefix(s.Text(), "ENTRYPOINT ")), &d.entrypoint); err != nil {
				t.Fatalf("Dockerfile ENTRYPOINT: %v", err)
			}
		}
	}
	if d.copyTo == "" || d.user == "" || len(d.entrypoint) == 0 {
		t.Fatalf("Dockerfile: COPY, USER or ENTRYPOINT not found: %+v", d)
	}
	return d
}

// TestImageMatchesDockerfile builds the image the way hack/image.sh does and reads it back: the
// daemonless image and the Dockerfile's must agree on where the binary is, who runs it and how.
func TestImageMatchesDockerfile(t *testing.T) {
	d := readDockerfile(t)
	dir := t.TempDir()
	bin := filepath.Join(dir, "banlieue")
	ca := filepath.Join(dir, "ca.crt")
	out := filepath.Join(dir, "image.tar")
	if err := os.WriteFile(bin, []byte("#!binary"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(ca, []byte("-----BEGIN CERTIFICATE-----\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	o := options{binary: bin, target: banlieuePath, tag: "registry.example/banlieue:test", out: out, user: banlieueUser, caBundle: ca, version: "test"}
	if err := run(o); err != nil {
		t.Fatal(err)
	}
	img, err := tarball.ImageFromPath(out, nil)
	if err != nil {
		t.Fatalf("reading the tarball back: %v", err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(cf.Config.Entrypoint, " "); got != strings.Join(d.entrypoint, " ") {
		t.Errorf("entrypoint %q, Dockerfile says %q", got, d.entrypoint)
	}
	if cf.Config.User != d.user {
		t.Errorf("user %q, Dockerfile says %q", cf.Config.User, d.user)
	}
	if cf.OS != "linux" || cf.Architecture != "amd64" {
		t.Errorf("platform %s/%s, want linux/amd64", cf.OS, cf.Architecture)
	}
	files := layerFiles(t, out)
	for path, mode := range map[string]os.FileMode{
		strings.TrimPrefix(d.copyTo, "/"): 0o755,
		caPath:                            0o644,
		"etc/passwd":                      0o644,
	} {
		got, ok := files[path]
		if !ok {
			t.Errorf("image has no /%s", path)
		} else if got != mode {
			t.Errorf("/%s has mode %v, want %v", path, got, mode)
		}
	}
}

func layerFiles(t *testing.T, out string) map[string]os.FileMode {
	t.Helper()
	img, err := tarball.ImageFromPath(out, nil)
	if err != nil {
		t.Fatal(err)
	}
	layers, err := img.Layers()
	if err != nil || len(layers) != 1 {
		t.Fatalf("layers: %v (%d), want exactly one", err, len(layers))
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = rc.Close() }()
	return tarModes(t, rc)
}

// tarModes lists the regular files of a tar stream with their permission bits.
func tarModes(t *testing.T, r io.Reader) map[string]os.FileMode {
	t.Helper()
	files := map[string]os.FileMode{}
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return files
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg {
			files[h.Name] = os.FileMode(h.Mode).Perm()
		}
	}
}
