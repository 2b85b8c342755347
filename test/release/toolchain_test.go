package release

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// A release is built with the Go of go.mod's toolchain line only if every entry point exports
// it: a machine's go env says GOTOOLCHAIN=local, which ignores that line. These tests read the
// files only (no go command, no API server).

var (
	toolchainLine = regexp.MustCompile(`(?m)^toolchain (go\S+)$`)
	// A go command started by a script: at a line's start, after a separator, or after
	// VAR=value assignments (CGO_ENABLED=0 go build).
	goCommand = regexp.MustCompile(`(^|[\s;&|(!]|\$\()go\s+(build|test|run|vet|install|mod|env|tool|list|version|generate|get|work|clean|fix|fmt|doc)\b`)
	shExport  = regexp.MustCompile(`^\s*export GOTOOLCHAIN=(\S+)\s*$`)
	mkExport  = regexp.MustCompile(`^export GOTOOLCHAIN\s*:?=\s*(\S+)\s*$`)
	// source hack/lib/NAME.sh, "$(dirname "${BASH_SOURCE[0]}")/lib/NAME.sh", or in hack/lib a
	// sibling: the argument and the file's name.
	sourceLib = regexp.MustCompile(`^\s*(?:source|\.)\s+(.*?([a-z0-9-]+\.sh))"?\s*$`)
)

// leadOwned are scripts that start go but whose owner has yet to add the export; each is named
// in the report of the change that added this test. A script here that gets the export fails
// the test, so the entry is removed with it.
var leadOwned = map[string]bool{}

func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	return root
}

func goModToolchain(t *testing.T, root string) string {
	t.Helper()
	m := toolchainLine.FindSubmatch(readFile(t, filepath.Join(root, "go.mod")))
	if m == nil {
		t.Fatal("go.mod has no toolchain line: a release would be built with whatever Go the builder has")
	}
	return string(m[1])
}

// scriptSetting is where a shell script sets GOTOOLCHAIN: the value and the line (1-based), or
// "" when it does not. Sourcing a hack/lib file that sets it counts, at the source line.
func scriptSetting(t *testing.T, root, file string, depth int) (string, int) {
	t.Helper()
	if depth > 4 {
		return "", 0
	}
	for i, line := range lines(t, filepath.Join(root, file)) {
		if m := shExport.FindStringSubmatch(line); m != nil {
			return m[1], i + 1
		}
		if m := sourceLib.FindStringSubmatch(line); m != nil {
			if !strings.Contains(m[1], "lib/") && path.Dir(file) != "hack/lib" {
				continue // the lab's env file and the like
			}
			lib := path.Join("hack/lib", m[2])
			if _, err := os.Stat(filepath.Join(root, lib)); err != nil || lib == file {
				continue
			}
			if v, _ := scriptSetting(t, root, lib, depth+1); v != "" {
				return v, i + 1
			}
		}
	}
	return "", 0
}

// firstGoCommand is the first line (1-based) of a script that starts a go command, comments
// left out; 0 when none does.
func firstGoCommand(t *testing.T, root, file string) int {
	t.Helper()
	for i, line := range lines(t, filepath.Join(root, file)) {
		if strings.HasPrefix(strings.TrimSpace(line), "#") {
			continue
		}
		if goCommand.MatchString(line) {
			return i + 1
		}
	}
	return 0
}

func TestToolchainEveryScriptThatRunsGoExportsIt(t *testing.T) {
	root := repoRoot(t)
	want := goModToolchain(t, root)
	if got, _ := scriptSetting(t, root, "hack/lib/toolchain.sh", 0); got != want {
		t.Errorf("hack/lib/toolchain.sh exports GOTOOLCHAIN=%q, go.mod's toolchain line says %s", got, want)
	}
	checked := 0
	for _, file := range trackedShellScripts(t, root) {
		goAt := firstGoCommand(t, root, file)
		if goAt == 0 {
			continue
		}
		got, at := scriptSetting(t, root, file, 0)
		if leadOwned[file] {
			if got != "" {
				t.Errorf("%s now sets GOTOOLCHAIN: remove it from leadOwned", file)
			} else {
				t.Logf("%s starts go at line %d without exporting GOTOOLCHAIN (left to its owner)", file, goAt)
			}
			continue
		}
		checked++
		switch {
		case got == "":
			t.Errorf("%s starts go at line %d but neither exports GOTOOLCHAIN=%s nor sources hack/lib/toolchain.sh", file, goAt, want)
		case got != want:
			t.Errorf("%s exports GOTOOLCHAIN=%s at line %d, go.mod's toolchain line says %s", file, got, at, want)
		case at > goAt:
			t.Errorf("%s starts go at line %d, before it gets GOTOOLCHAIN at line %d", file, goAt, at)
		}
	}
	// The scripts known to run go today: the check above must have seen them.
	for _, file := range []string{".ci/run", "hack/test.sh", "hack/golangci-lint.sh", "hack/govulncheck.sh", "hack/lib/gotest.sh"} {
		if firstGoCommand(t, root, file) == 0 {
			t.Errorf("%s starts no go command that this test recognises: the pattern is wrong", file)
		}
	}
	if checked < 10 {
		t.Errorf("only %d scripts that run go were checked; expected the hack/ scripts and .ci/run", checked)
	}
}

func TestToolchainMakefileAndDocsExportIt(t *testing.T) {
	root := repoRoot(t)
	want := goModToolchain(t, root)
	found := ""
	for _, line := range lines(t, filepath.Join(root, "Makefile")) {
		if m := mkExport.FindStringSubmatch(line); m != nil {
			found = m[1]
		}
	}
	if found != want {
		t.Errorf("the Makefile exports GOTOOLCHAIN=%q, go.mod's toolchain line says %s", found, want)
	}
	// A developer's shell starts with the machine's Go too: the commands the README and
	// CONTRIBUTING give begin with the export.
	for _, doc := range []string{"README.md", "CONTRIBUTING.md", "docs/security.md"} {
		if !bytes.Contains(readFile(t, filepath.Join(root, doc)), []byte("export GOTOOLCHAIN="+want)) {
			t.Errorf("%s does not give `export GOTOOLCHAIN=%s`", doc, want)
		}
	}
	if !bytes.Contains(readFile(t, filepath.Join(root, "CHANGELOG.md")), []byte(want)) {
		t.Errorf("CHANGELOG.md does not state the toolchain %s", want)
	}
}

// trackedShellScripts are git's tracked files that bash or sh runs: *.sh, and files whose first
// line is a shell's shebang (.ci/run).
func trackedShellScripts(t *testing.T, root string) []string {
	t.Helper()
	cmd := exec.Command("git", "ls-files", "-z")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("git ls-files: %v", err)
	}
	var scripts []string
	for _, f := range strings.Split(strings.TrimRight(string(out), "\x00"), "\x00") {
		if strings.HasSuffix(f, ".sh") {
			scripts = append(scripts, f)
			continue
		}
		fh, err := os.Open(filepath.Join(root, f))
		if err != nil {
			continue // deleted in the work tree
		}
		first, _ := bufio.NewReader(fh).ReadString('\n')
		_ = fh.Close()
		if strings.HasPrefix(first, "#!") && (strings.Contains(first, "bash") || strings.HasSuffix(strings.TrimSpace(first), "/sh")) {
			scripts = append(scripts, f)
		}
	}
	if len(scripts) < 10 {
		t.Fatalf("git ls-files found only %d shell scripts", len(scripts))
	}
	return scripts
}

func lines(t *testing.T, file string) []string {
	t.Helper()
	return strings.Split(string(readFile(t, file)), "\n")
}
