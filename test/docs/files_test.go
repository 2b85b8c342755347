package docs

import (
	"go/ast"
	"go/parser"
	"go/token"
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

// goSources parses every non-test Go file under dirs (repository-relative) and hands each to fn
// with its repository-relative path; the walks of the code the docs are held to share it.
func goSources(t *testing.T, fn func(rel string, fset *token.FileSet, f *ast.File), dirs ...string) {
	t.Helper()
	root := testenv.RepoRoot()
	fset := token.NewFileSet()
	for _, dir := range dirs {
		err := filepath.WalkDir(filepath.Join(root, dir), func(path string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return err
			}
			f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(root, path)
			fn(rel, fset, f)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
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
