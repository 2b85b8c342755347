package docs

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"banlieue.io/banlieue/internal/testenv"
)

var (
	// sectionCitation is how code and docs point into a document: docs/x.md, "Section".
	sectionCitation = regexp.MustCompile(`(docs/[A-Za-z0-9/._-]+\.md),? "([^"]+)"`)
	// commentJoin joins a comment's lines (Go's //, shell's and YAML's #) into one line, so a
	// citation wrapped across two lines is read whole.
	commentJoin = regexp.MustCompile(`\n[ \t]*(?://|#)[ \t]*|\s*\n\s*`)
	boldLead    = regexp.MustCompile(`\*\*([^*]+)\*\*`)
)

// sectionTitles are what a citation may name in doc: its headings and its bold lead-ins
// ("**Installer ISOs.** …"), with backticks and a final period dropped, in lower case.
func sectionTitles(doc string) []string {
	norm := func(s string) string {
		return strings.ToLower(strings.TrimSuffix(strings.TrimSpace(strings.ReplaceAll(s, "`", "")), "."))
	}
	var titles []string
	for _, line := range parseMarkdown(doc).lines {
		if strings.HasPrefix(line, "#") {
			titles = append(titles, norm(strings.TrimLeft(line, "#")))
		}
		for _, m := range boldLead.FindAllStringSubmatch(line, -1) {
			titles = append(titles, norm(m[1]))
		}
	}
	return titles
}

// TestSectionCitationsResolve: every `docs/x.md, "Section"` in the repository's code, scripts
// and docs names a heading (or the start of one) or a bold lead-in of that document, so renaming
// a section breaks this test instead of the reader's search.
func TestSectionCitationsResolve(t *testing.T) {
	root := testenv.RepoRoot()
	titles := map[string][]string{}
	n := 0
	for _, f := range repoFiles(t, citingFiles...) {
		if strings.HasPrefix(f, "test/docs/") {
			continue // the checkers' own examples
		}
		data, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			t.Fatal(err)
		}
		text := commentJoin.ReplaceAllString(string(data), " ")
		for _, m := range sectionCitation.FindAllStringSubmatch(text, -1) {
			doc, section := m[1], strings.ToLower(strings.ReplaceAll(m[2], "`", ""))
			known, ok := titles[doc]
			if !ok {
				data, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(doc)))
				if err != nil {
					t.Errorf("%s cites %s, which does not exist", f, doc)
					titles[doc] = nil
					continue
				}
				known = sectionTitles(string(data))
				titles[doc] = known
			}
			if known == nil {
				continue
			}
			n++
			if !citesOneOf(section, known) {
				t.Errorf("%s cites %s, %q: no heading or bold lead-in of %s starts so", f, doc, m[2], doc)
			}
		}
	}
	if n < 50 {
		t.Errorf("found only %d section citations: is the extraction broken?", n)
	}
}

func citesOneOf(section string, titles []string) bool {
	for _, title := range titles {
		if strings.HasPrefix(title, section) {
			return true
		}
	}
	return false
}

// TestSectionCitationCheckerCatchesBreakage: a wrapped citation is read whole, and a section
// that is not there is not found.
func TestSectionCitationCheckerCatchesBreakage(t *testing.T) {
	doc := "# Guide\n\n## Names on the host\n\n**Installer ISOs.** text\n"
	titles := sectionTitles(doc)
	for section, want := range map[string]bool{
		"names on the host": true,
		"names on":          true,
		"installer isos":    true,
		"installer isos.":   false,
		"names off":         false,
		"guides":            false,
	} {
		if got := citesOneOf(section, titles); got != want {
			t.Errorf("citesOneOf(%q) = %v, want %v", section, got, want)
		}
	}
	text := commentJoin.ReplaceAllString("// see docs/guides/x.md, \"Names on\n// the host\"", " ")
	if m := sectionCitation.FindStringSubmatch(text); m == nil || m[2] != "Names on the host" {
		t.Errorf("a citation wrapped over two comment lines read as %q", m)
	}
}
