package docs

import (
	"fmt"
	"path"
	"regexp"
	"strings"
	"testing"
)

// citingFiles are the kinds of file whose comments or text may cite a design record.
var citingFiles = []string{".go", ".md", ".yaml", ".yml", ".sh", ".tpl", "Makefile", "Dockerfile"}

var (
	adrCitation = regexp.MustCompile(`\bADR-(\d{4})\b|\badr/(\d{4})\b`)
	adrFile     = regexp.MustCompile(`^docs/adr/(\d{4})-[a-z0-9-]+\.md$`)
	adrIndexRow = regexp.MustCompile(`(?m)^\| \[(\d{4})\]\((\d{4}-[a-z0-9-]+\.md)\) \| [^|]+ \| [^|]+ \|$`)
	// thisFile holds the checkers' own examples of broken citations, so the walks skip it.
	thisFile = "test/docs/citations_test.go"
	// outsideCitation is what a fresh clone cannot follow: the out-of-repository specification
	// and the steering checkout beside the repository.
	outsideCitation = regexp.MustCompile(`\bSPEC\b|\.\./shared\b|\bshared/SPEC`)
)

// adrRecords returns the records under docs/adr by number, and checks each one's title line.
func adrRecords(t *testing.T) map[string]string {
	t.Helper()
	records := map[string]string{}
	for _, f := range repoFiles(t, ".md") {
		m := adrFile.FindStringSubmatch(f)
		if m == nil {
			continue
		}
		if prev, ok := records[m[1]]; ok {
			t.Errorf("ADR-%s has two files: %s and %s", m[1], prev, f)
		}
		records[m[1]] = f
		if first, _, _ := strings.Cut(readRepoFile(t, f), "\n"); !strings.HasPrefix(first, "# ADR-"+m[1]+": ") {
			t.Errorf("%s: the first line is %q, not \"# ADR-%s: <title>\"", f, first, m[1])
		}
	}
	return records
}

// adrCitations finds every ADR number cited in text, with its line.
func adrCitations(text string) map[string][]int {
	out := map[string][]int{}
	for i, line := range strings.Split(text, "\n") {
		for _, m := range adrCitation.FindAllStringSubmatch(line, -1) {
			n := m[1] + m[2]
			out[n] = append(out[n], i+1)
		}
	}
	return out
}

// TestADRCitationsResolve: every ADR-NNNN or adr/NNNN cited anywhere in the repository is a
// record under docs/adr, and every record is in the index docs/adr/README.md, with a link to
// its own file. A comment that cites a record nobody wrote fails here.
func TestADRCitationsResolve(t *testing.T) {
	records := adrRecords(t)
	if len(records) == 0 {
		t.Fatal("no records under docs/adr")
	}
	cited := 0
	for _, f := range repoFiles(t, citingFiles...) {
		if f == thisFile {
			continue
		}
		for n, lines := range adrCitations(readRepoFile(t, f)) {
			cited++
			if _, ok := records[n]; !ok {
				t.Errorf("%s:%d cites ADR-%s, which is not under docs/adr", f, lines[0], n)
			}
		}
	}
	if cited == 0 {
		t.Error("found no ADR citation at all: is the pattern broken?")
	}
	index := readRepoFile(t, "docs/adr/README.md")
	indexed := map[string]bool{}
	for _, m := range adrIndexRow.FindAllStringSubmatch(index, -1) {
		rec, ok := records[m[1]]
		if !ok {
			t.Errorf("docs/adr/README.md: row %s links %s, which does not exist", m[1], m[2])
		} else if want := path.Base(rec); m[2] != want {
			t.Errorf("docs/adr/README.md: row %s links %s, want %s", m[1], m[2], want)
		}
		indexed[m[1]] = true
	}
	for n, f := range records {
		if !indexed[n] {
			t.Errorf("%s is not in the index docs/adr/README.md", f)
		}
	}
}

// TestNoCitationOutsideTheRepository: no code comment, script, manifest or document points a
// reader at the out-of-repository specification or the steering checkout, which a clone lacks.
// This file is the one place allowed to name them, in the patterns and their self-test.
func TestNoCitationOutsideTheRepository(t *testing.T) {
	for _, f := range repoFiles(t, citingFiles...) {
		if f == thisFile {
			continue
		}
		for _, e := range outsideCitations(f, readRepoFile(t, f)) {
			t.Error(e)
		}
	}
}

func outsideCitations(name, text string) []string {
	var errs []string
	for i, line := range strings.Split(text, "\n") {
		if m := outsideCitation.FindString(line); m != "" {
			errs = append(errs, fmt.Sprintf("%s:%d cites %q, which is not in the repository: %s", name, i+1, m, strings.TrimSpace(line)))
		}
	}
	return errs
}

// TestCitationCheckersCatchBreakage: the patterns find what they must, and only that.
func TestCitationCheckersCatchBreakage(t *testing.T) {
	got := adrCitations("// x (ADR-0043, ADR-0048)\nsee [r](../adr/0099-x.md) and ADR-12 and ADR-00431")
	if len(got) != 3 || got["0043"] == nil || got["0048"] == nil || got["0099"] == nil {
		t.Errorf("adrCitations found %v", got)
	}
	// The section sign is joined on at run time, so this fixture is no citation a reader of the
	// source (or a tool counting citations) would follow.
	for _, bad := range []string{"as SPEC " + "§3.3 says", "# read ../shared/reference", "see shared/SPEC.md"} {
		if len(outsideCitations("x", bad)) == 0 {
			t.Errorf("%q: not caught", bad)
		}
	}
	for _, good := range []string{"the spec says", "SPECIAL", "INSPECT", "spec.SPECs"} {
		if e := outsideCitations("x", good); len(e) > 0 {
			t.Errorf("%q: caught %v", good, e)
		}
	}
}
