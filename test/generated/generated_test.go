// Package generated fails when the committed deepcopy methods, CRDs or ClusterRoles differ from
// what `make generate manifests` produces from the current API types and rbac markers.
package generated

import (
	"bytes"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"banlieue.io/banlieue/internal/testenv"
)

// sources are what the generators read; generated are what they write.
var (
	sources   = []string{"api", "internal", "pkg", "charts", "config/admission", "go.mod", "go.sum", "Makefile"}
	generated = []string{"config/crd/bases", "config/rbac/controller", "config/rbac/operator",
		"config/rbac/imagebuilder", "config/rbac/provider-libvirt", "api"}
)

func TestGeneratedFilesAreFresh(t *testing.T) {
	if testing.Short() {
		t.Skip("regenerating takes a while; skipped with -short")
	}
	root := testenv.RepoRoot()
	work := t.TempDir()
	for _, src := range sources {
		copyTree(t, filepath.Join(root, src), filepath.Join(work, src))
	}
	cmd := exec.Command("make", "--no-print-directory", "generate", "manifests")
	cmd.Dir = work
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("make generate manifests: %v\n%s", err, out)
	}
	for _, dir := range generated {
		compareTrees(t, filepath.Join(work, dir), filepath.Join(root, dir))
	}
}

func copyTree(t *testing.T, from, to string) {
	t.Helper()
	err := filepath.WalkDir(from, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(from, path)
		target := filepath.Join(to, rel)
		if d.IsDir() {
			if d.Name() == "testdata" {
				return filepath.SkipDir
			}
			return os.MkdirAll(target, 0o755)
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(target, data, 0o644)
	})
	if err != nil {
		t.Fatalf("copying %s: %v", from, err)
	}
}

// compareTrees reports every file that differs or exists on one side only. Only generated files
// are compared: config/ holds nothing else, and under api/ they are zz_generated.*.
func compareTrees(t *testing.T, fresh, committed string) {
	t.Helper()
	want := readGenerated(t, fresh)
	got := readGenerated(t, committed)
	for name, data := range want {
		if have, ok := got[name]; !ok {
			t.Errorf("%s is generated but not committed: run make generate manifests", name)
		} else if !bytes.Equal(have, data) {
			t.Errorf("%s is stale: run make generate manifests", name)
		}
	}
	for name := range got {
		if _, ok := want[name]; !ok {
			t.Errorf("%s is committed but no longer generated: delete it", name)
		}
	}
}

func readGenerated(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	files := map[string][]byte{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		if filepath.Ext(path) != ".yaml" && !strings.HasPrefix(d.Name(), "zz_generated.") {
			return nil
		}
		rel, _ := filepath.Rel(dir, path)
		data, err := os.ReadFile(path)
		files[rel] = data
		return err
	})
	if err != nil {
		t.Fatalf("reading %s: %v", dir, err)
	}
	return files
}
