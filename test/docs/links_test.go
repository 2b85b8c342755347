package docs

import (
	"fmt"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"

	"banlieue.io/banlieue/internal/testenv"
)

var (
	mdLink     = regexp.MustCompile(`\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)
	inlineCode = regexp.MustCompile("`[^`]*`")
)

// markdown is one document's prose lines (fenced blocks blanked, so line numbers hold) and the
// anchors its headings get.
type markdown struct {
	lines   []string
	anchors map[string]bool
}

func parseMarkdown(text string) markdown {
	md := markdown{anchors: map[string]bool{}}
	seen := map[string]int{}
	fenced := false
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			md.lines = append(md.lines, "")
			continue
		}
		if fenced {
			md.lines = append(md.lines, "")
			continue
		}
		md.lines = append(md.lines, line)
		if strings.HasPrefix(line, "#") {
			slug := headingAnchor(strings.TrimLeft(line, "#"))
			if n := seen[slug]; n > 0 {
				md.anchors[fmt.Sprintf("%s-%d", slug, n)] = true
			} else {
				md.anchors[slug] = true
			}
			seen[slug]++
		}
	}
	return md
}

// headingAnchor is the anchor GitHub gives a heading: lower case, punctuation dropped, spaces
// turned into hyphens.
func headingAnchor(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(heading)) {
		switch {
		case unicode.IsLetter(r) || unicode.IsDigit(r) || r == '-' || r == '_':
			b.WriteRune(r)
		case r == ' ':
			b.WriteByte('-')
		}
	}
	return b.String()
}

// brokenLinks returns what is wrong with the relative links of the document name (relative to
// the repository): a target that does not exist, or an anchor its document lacks.
func brokenLinks(name string, doc markdown, read func(rel string) (markdown, error)) []string {
	var errs []string
	for i, line := range doc.lines {
		for _, m := range mdLink.FindAllStringSubmatch(inlineCode.ReplaceAllString(line, ""), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			file, anchor, _ := strings.Cut(target, "#")
			rel := name
			if file != "" {
				rel = path.Join(path.Dir(name), file)
			}
			where := fmt.Sprintf("%s:%d: link %s", name, i+1, target)
			if strings.HasPrefix(rel, "../") {
				errs = append(errs, where+": points outside the repository")
				continue
			}
			// file is empty for a heading of this very document, which exists.
			if file != "" {
				if _, err := os.Stat(filepath.Join(testenv.RepoRoot(), filepath.FromSlash(rel))); err != nil {
					errs = append(errs, where+": "+rel+" does not exist")
					continue
				}
			}
			if anchor == "" {
				continue
			}
			if !strings.HasSuffix(rel, ".md") {
				errs = append(errs, where+": an anchor into a file that is not Markdown")
				continue
			}
			target2 := doc
			if rel != name {
				var err error
				if target2, err = read(rel); err != nil {
					errs = append(errs, where+": "+err.Error())
					continue
				}
			}
			if !target2.anchors[anchor] {
				errs = append(errs, where+": "+rel+" has no heading #"+anchor)
			}
		}
	}
	return errs
}

// TestMarkdownLinksResolve: every relative link of every Markdown file (docs/, the README, the
// chart's README, the examples) reaches a file that exists and, when it names one, a heading
// of that file, so renaming a heading or moving a page breaks this test instead of the reader.
func TestMarkdownLinksResolve(t *testing.T) {
	cache := map[string]markdown{}
	read := func(rel string) (markdown, error) {
		if md, ok := cache[rel]; ok {
			return md, nil
		}
		data, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), filepath.FromSlash(rel)))
		if err != nil {
			return markdown{}, err
		}
		cache[rel] = parseMarkdown(string(data))
		return cache[rel], nil
	}
	files := repoFiles(t, ".md")
	links := 0
	for _, f := range files {
		md, err := read(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range md.lines {
			links += len(mdLink.FindAllString(inlineCode.ReplaceAllString(l, ""), -1))
		}
		for _, e := range brokenLinks(f, md, read) {
			t.Error(e)
		}
	}
	t.Logf("checked %d links in %d Markdown files", links, len(files))
	if links < 50 {
		t.Errorf("only %d links found: is the extraction broken?", links)
	}
}

// TestLinkCheckerCatchesBreakage: a missing file, a missing anchor and a link out of the
// repository are caught; GitHub's anchors for punctuated and repeated headings are honoured.
func TestLinkCheckerCatchesBreakage(t *testing.T) {
	doc := parseMarkdown("# Guide\n## 5. What the operator creates for it\n## The two halves of a `Url` import\n## Step\n## Step\n" +
		"```\n# not a heading\n```\n" +
		"[a](#5-what-the-operator-creates-for-it) [b](#the-two-halves-of-a-url-import) [c](#step-1) `[d](#nowhere)`\n" +
		"[e](#not-a-heading) [f](no-such-file.md) [g](architecture.md#no-such-heading) [h](../../outside.md) [i](architecture.md#roles)\n")
	read := func(rel string) (markdown, error) {
		data, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), filepath.FromSlash(rel)))
		return parseMarkdown(string(data)), err
	}
	errs := brokenLinks("docs/x.md", doc, read)
	want := []string{"#not-a-heading", "no-such-file.md does not exist", "#no-such-heading", "outside the repository"}
	if len(errs) != len(want) {
		t.Fatalf("got %d errors, want %d: %q", len(errs), len(want), errs)
	}
	for i, w := range want {
		if !strings.Contains(errs[i], w) {
			t.Errorf("error %d is %q, want it to mention %q", i, errs[i], w)
		}
	}
}
