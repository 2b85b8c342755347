package docs

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"banlieue.io/banlieue/internal/testenv"
)

// repoFiles lists the repository's files (relative, slash-separated) whose names end in one of
// suffixes, skipping hidden directories such as .git.
func repoFiles(t *testing.T, suffixes ...string) []string {
	t.Helper()
	root := testenv.RepoRoot()
	var out []string
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != root && strings.HasPrefix(d.Name(), ".") {
				return filepath.SkipDir
			}
			return nil
		}
		for _, s := range suffixes {
			if strings.HasSuffix(path, s) {
				rel, _ := filepath.Rel(root, path)
				out = append(out, filepath.ToSlash(rel))
				break
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// readRepoFile reads a file by its repository-relative path.
func readRepoFile(t *testing.T, rel string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), filepath.FromSlash(rel)))
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}
