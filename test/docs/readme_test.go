package docs

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"banlieue.io/banlieue/internal/testenv"
)

// readmeSection returns the README's text under "## heading", up to the next "## " heading.
func readmeSection(t *testing.T, heading string) string {
	t.Helper()
	readme := readRepoFile(t, "README.md")
	start := strings.Index(readme, "\n## "+heading+"\n")
	if start < 0 {
		t.Fatalf("README.md has no section %q", heading)
	}
	rest := readme[start+len("\n## "+heading+"\n"):]
	if end := strings.Index(rest, "\n## "); end >= 0 {
		rest = rest[:end]
	}
	return rest
}

// boxRow returns the cells after the first of the "What is in the box" row whose first cell is
// the backticked path.
func boxRow(t *testing.T, path string) string {
	t.Helper()
	for _, line := range strings.Split(readmeSection(t, "What is in the box"), "\n") {
		if strings.HasPrefix(line, "| `"+path+"` |") {
			return strings.TrimPrefix(line, "| `"+path+"` |")
		}
	}
	t.Fatalf("README.md's \"What is in the box\" has no row for `%s`", path)
	return ""
}

// TestREADMEListsEveryKind: every kind under config/crd/bases is named in the README's "What is
// in the box", so a new CRD cannot ship unannounced.
func TestREADMEListsEveryKind(t *testing.T) {
	box := readmeSection(t, "What is in the box")
	for _, c := range loadCRDs(t) {
		if !regexp.MustCompile(`\b` + c.kind + `\b`).MatchString(box) {
			t.Errorf("README.md's \"What is in the box\" does not name the kind %s (config/crd/bases)", c.kind)
		}
	}
}

// TestREADMEListsEveryGuide: every guide under docs/guides is linked from "What is in the box".
func TestREADMEListsEveryGuide(t *testing.T) {
	box := readmeSection(t, "What is in the box")
	guides, err := filepath.Glob(filepath.Join(testenv.RepoRoot(), "docs", "guides", "*.md"))
	if err != nil || len(guides) == 0 {
		t.Fatalf("no guides under docs/guides (%v)", err)
	}
	for _, g := range guides {
		link := "(docs/guides/" + filepath.Base(g) + ")"
		if !strings.Contains(box, link) {
			t.Errorf("README.md's \"What is in the box\" does not link docs/guides/%s", filepath.Base(g))
		}
	}
}

// listedCommands reads the commands a row names: every backticked word group, with `a b|c`
// standing for `a b` and `a c` (a table cell writes | as \|).
func listedCommands(row string) []string {
	var out []string
	for _, m := range backticked.FindAllStringSubmatch(strings.ReplaceAll(row, `\|`, "|"), -1) {
		words := strings.Fields(m[1])
		if len(words) == 0 {
			continue
		}
		prefix := strings.Join(words[:len(words)-1], " ")
		for _, last := range strings.Split(words[len(words)-1], "|") {
			out = append(out, strings.TrimSpace(prefix+" "+last))
		}
	}
	return out
}

// commandTree lists every command path under path, by reading each command's --help: the
// cobra-made help and completion's per-shell children are not banlieue's own.
func commandTree(t *testing.T, c *cli, path []string) []string {
	t.Helper()
	var out []string
	h := c.helpOf(t, path)
	for name := range h.subcommands {
		if name == "help" {
			continue
		}
		sub := append(append([]string{}, path...), name)
		out = append(out, strings.Join(sub, " "))
		if name != "completion" || len(path) > 0 {
			out = append(out, commandTree(t, c, sub)...)
		}
	}
	sort.Strings(out)
	return out
}

// TestREADMEListsEveryCommand: the README's row for cmd/banlieue names exactly the commands the
// binary has, and the kubectl plugin's verbs exactly the plugin's (read from --help, so a new
// subcommand that is not announced, or an announced one that is gone, fails here).
func TestREADMEListsEveryCommand(t *testing.T) {
	bin := newCLI(t).bin
	dir := t.TempDir()
	plugin := filepath.Join(dir, "kubectl-banlieue")
	if err := os.Symlink(bin, plugin); err != nil {
		t.Fatal(err)
	}
	have := map[string]bool{}
	for _, p := range commandTree(t, &cli{bin: bin, help: map[string]*cmdHelp{}}, nil) {
		have[p] = true
	}
	for _, p := range commandTree(t, &cli{bin: plugin, help: map[string]*cmdHelp{}}, nil) {
		have["kubectl banlieue "+p] = true
	}
	if !have["provider libvirt check"] || !have["kubectl banlieue console"] {
		t.Fatalf("the command tree read from --help lacks known commands (%v): is the help parser broken?", have)
	}
	listed := map[string]bool{}
	for _, p := range listedCommands(boxRow(t, "cmd/banlieue/")) {
		listed[p] = true
		if !have[p] {
			t.Errorf("README.md's \"What is in the box\" names `%s`, which the binary does not have", p)
		}
	}
	for p := range have {
		if !listed[p] && !listsUnder(listed, p) {
			t.Errorf("README.md's \"What is in the box\" does not name the command `%s`", p)
		}
	}
}

// listsUnder reports whether a command under group is listed: `provider libvirt check` names
// the group `provider`, which runs nothing of its own.
func listsUnder(listed map[string]bool, group string) bool {
	for p := range listed {
		if strings.HasPrefix(p, group+" ") {
			return true
		}
	}
	return false
}

// TestHelpListsRunnableCommands keeps the help reading honest: `banlieue provider libvirt
// check --help` runs, so a path the tree found is a command the binary accepts.
func TestHelpListsRunnableCommands(t *testing.T) {
	bin := newCLI(t).bin
	if out, err := exec.Command(bin, "provider", "libvirt", "check", "--help").CombinedOutput(); err != nil {
		t.Fatalf("banlieue provider libvirt check --help: %v\n%s", err, out)
	}
	if _, err := exec.Command(bin, "no-such-command").CombinedOutput(); err == nil {
		t.Fatal("banlieue no-such-command succeeded: the tree's commands cannot be told from others")
	}
}

// existing are features that exist, with the file that shows it: the README's limitations may
// not deny them ("no console", "no Cluster API provider").
var existing = map[string]string{
	"Cluster API":    "docs/guides/cluster-api.md",
	"console":        "docs/guides/console.md",
	"restart":        "api/v1alpha1/virtualmachine_types.go",
	"graceful power": "api/v1alpha1/common_types.go",
	"kubelet":        "docs/guides/real-node.md",
	"domain events":  "internal/provider/libvirt/machine_domainevents.go",
}

// TestKnownLimitationsDenyNothingThatExists: "Known limitations" says "no X" of no kind, no
// command and no feature that exists, and cites no internal issue.
func TestKnownLimitationsDenyNothingThatExists(t *testing.T) {
	limits := readmeSection(t, "Known limitations")
	var names []string
	for _, c := range loadCRDs(t) {
		names = append(names, c.kind)
	}
	for _, p := range listedCommands(boxRow(t, "cmd/banlieue/")) {
		fields := strings.Fields(p)
		names = append(names, fields[len(fields)-1])
	}
	for name, evidence := range existing {
		if _, err := os.Stat(filepath.Join(testenv.RepoRoot(), evidence)); err != nil {
			t.Errorf("%s exists as %s: %v", name, evidence, err)
		}
		names = append(names, name)
	}
	prose := strings.ReplaceAll(limits, "`", "")
	sort.Strings(names)
	names = slices.Compact(names)
	for _, name := range names {
		deny := regexp.MustCompile(`(?i)\b(?:no|without|lacks?)\s+(?:\w+\s+)?` + regexp.QuoteMeta(name) + `\b`)
		if m := deny.FindString(prose); m != "" {
			t.Errorf("README.md's \"Known limitations\" says %q, but %s exists", m, name)
		}
	}
	if strings.Contains(prose, "by polling") {
		t.Errorf("README.md's \"Known limitations\" says something is found by polling; the provider's domain events find host changes (%s)", existing["domain events"])
	}
}

// issueRef is a reference to an issue number a reader cannot look up: "#16" (not a "(#1-step)"
// anchor) or "issue 16".
var issueRef = regexp.MustCompile(`(?:^|[^\w/&])#[0-9]+(?:[^0-9\w-]|$)|(?i)\bissues?\s+[0-9]+\b`)

// issueFreeDocs are the documents that must cite no issue numbers: the front page and the
// reference docs and guides. docs/adr holds dated records, and docs/performance.md is being
// rewritten as a reference. The CHANGELOG is read by users, who cannot look issues up either.
func issueFreeDocs(t *testing.T) []string {
	t.Helper()
	root := testenv.RepoRoot()
	docs := []string{"README.md", "CONTRIBUTING.md", "SECURITY.md", "CHANGELOG.md"}
	for _, pattern := range []string{"docs/*.md", "docs/guides/*.md", "docs/design/*.md"} {
		files, err := filepath.Glob(filepath.Join(root, filepath.FromSlash(pattern)))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			rel, _ := filepath.Rel(root, f)
			rel = filepath.ToSlash(rel)
			if issueRefsAllowed[rel] {
				continue
			}
			docs = append(docs, rel)
		}
	}
	return docs
}

var issueRefsAllowed = map[string]bool{}

// TestDocsCiteNoIssueNumbers: the documents are organised by topic, never by issue number.
func TestDocsCiteNoIssueNumbers(t *testing.T) {
	for _, name := range issueFreeDocs(t) {
		for i, line := range strings.Split(readRepoFile(t, name), "\n") {
			if m := issueRef.FindString(line); m != "" {
				t.Errorf("%s:%d cites an issue number (%q): say what it is about, or link the doc that tells it", name, i+1, strings.TrimSpace(m))
			}
		}
	}
}

// TestIssueRefPattern: the pattern finds issue numbers and leaves step anchors and colours alone.
func TestIssueRefPattern(t *testing.T) {
	for s, want := range map[string]bool{
		"least privilege (#16)":                         true,
		"#16 made it so":                                true,
		"see issue 19 for the targets":                  true,
		"Issues 18 and 19":                              true,
		"[1. Install](#1-install-cluster-api)":          false,
		"a colour &#160; entity":                        false,
		"https://example.org/x#42":                      false,
		"step 5 of the guide":                           false,
		"[step 5](#5-what-the-operator-creates-for-it)": false,
	} {
		if got := issueRef.MatchString(s); got != want {
			t.Errorf("issueRef.MatchString(%q) = %v, want %v", s, got, want)
		}
	}
}
