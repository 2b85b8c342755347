// Package docs checks that the user documentation stays true to the code: the generated API
// reference matches the CRDs, and the guides' troubleshooting tables cite only condition
// reasons (and messages) that the code can actually emit.
package docs

import (
	"bytes"
	"go/ast"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	"banlieue.io/banlieue/hack/apidocs/gen"
	"banlieue.io/banlieue/internal/testenv"
)

// guides are the documents whose troubleshooting tables are checked.
var guides = []string{
	"docs/guides/libvirt-provider.md",
	"docs/guides/cloud-init-on-libvirt.md",
	"docs/guides/virtualmachine-pools.md",
}

// TestAPIReferenceIsFresh fails when docs/reference/api.md differs from what hack/apidocs
// generates from config/crd/bases.
func TestAPIReferenceIsFresh(t *testing.T) {
	root := testenv.RepoRoot()
	want, err := gen.Generate(filepath.Join(root, gen.DefaultCRDDir))
	if err != nil {
		t.Fatal(err)
	}
	have, err := os.ReadFile(filepath.Join(root, gen.DefaultOutput))
	if err != nil {
		t.Fatalf("%v: run go run ./hack/apidocs", err)
	}
	if !bytes.Equal(have, want) {
		t.Errorf("%s is stale: run go run ./hack/apidocs (make docs)", gen.DefaultOutput)
	}
}

// TestAPIReferenceIsDeterministic: two runs give the same bytes, so the freshness check never
// flaps.
func TestAPIReferenceIsDeterministic(t *testing.T) {
	dir := filepath.Join(testenv.RepoRoot(), gen.DefaultCRDDir)
	a, err := gen.Generate(dir)
	if err != nil {
		t.Fatal(err)
	}
	b, err := gen.Generate(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a, b) {
		t.Error("two runs of the generator differ")
	}
}

var (
	backticked = regexp.MustCompile("`([^`]+)`")
	// camelCase is a condition reason's shape: at least two capitalised words, letters and
	// digits only (Ready alone is a condition type, not a reason worth checking).
	camelCase = regexp.MustCompile(`^[A-Z][a-z0-9]+(?:[A-Z][a-z0-9]*)+$`)
	// reasonWord is a reason's shape in a Reason column, where a single word (Warm, Bound,
	// Ready) is a reason too.
	reasonWord = regexp.MustCompile(`^[A-Z][a-z0-9]+(?:[A-Z][a-z0-9]*)*$`)
	// placeholder is how the tables mark run-time values in a message, quoted or not.
	placeholder = regexp.MustCompile(`"?<[^>]*>"?|…`)
)

// troubleshootingTables returns the table rows (lines starting with '|') under every heading
// that contains "Troubleshooting", up to the next heading of the same or a higher level.
func troubleshootingTables(t *testing.T, doc string) []string {
	t.Helper()
	var rows []string
	inside, level := false, 0
	for _, line := range strings.Split(doc, "\n") {
		if strings.HasPrefix(line, "#") {
			l := len(line) - len(strings.TrimLeft(line, "#"))
			switch {
			case strings.Contains(line, "Troubleshooting"):
				inside, level = true, l
			case inside && l <= level:
				inside = false
			}
			continue
		}
		if inside && strings.HasPrefix(strings.TrimSpace(line), "|") && !strings.HasPrefix(strings.TrimSpace(line), "|---") {
			rows = append(rows, line)
		}
	}
	return rows
}

// TestTroubleshootingReasonsExist: every backticked CamelCase word in the Reason column of a
// troubleshooting table is a reason the code declares (codeReasons: api/, where the vocabulary
// lives, and any stray one under internal/ or pkg/), so a guide never tells users to look for a
// reason nothing emits. CamelCase words elsewhere in the tables (kinds,
// API enum values) must at least exist in internal/, pkg/ or api/.
func TestTroubleshootingReasonsExist(t *testing.T) {
	declared := codeReasons(t)
	code := literals(t, "internal", "pkg")
	withAPI := literals(t, "internal", "pkg", "api")
	root := testenv.RepoRoot()
	for _, guide := range guides {
		data, err := os.ReadFile(filepath.Join(root, guide))
		if err != nil {
			t.Fatal(err)
		}
		rows := troubleshootingTables(t, string(data))
		if len(rows) == 0 {
			t.Errorf("%s has no troubleshooting table", guide)
			continue
		}
		reasons, others := map[string]bool{}, map[string]bool{}
		reasonCols := map[int]bool{}
		for _, row := range rows {
			cells := splitRow(row)
			if isHeader(cells) {
				reasonCols = map[int]bool{}
				for i, c := range cells {
					if strings.Contains(strings.ToLower(c), "reason") {
						reasonCols[i] = true
					}
				}
				continue
			}
			for i, c := range cells {
				for _, m := range backticked.FindAllStringSubmatch(c, -1) {
					switch w := m[1]; {
					case reasonCols[i] && reasonWord.MatchString(w):
						reasons[w] = true
					case camelCase.MatchString(w):
						others[w] = true
					}
				}
			}
		}
		if len(reasons) == 0 {
			t.Errorf("%s: its troubleshooting tables name no condition reason in a Reason column", guide)
		}
		for _, w := range sortedKeys(reasons) {
			if declared[w] == nil {
				t.Errorf("%s cites reason `%s`, which the code declares nowhere", guide, w)
			}
		}
		for _, w := range sortedKeys(others) {
			if !withAPI[w] && !code[w] {
				t.Errorf("%s cites `%s`, which is no string literal in internal/, pkg/ or api/", guide, w)
			}
		}
	}
}

// TestTroubleshootingMessagesExist: a quoted message in a "Message (exact)" column must be made,
// for the most part, of text the code writes. The code's string literals are cut at their
// format verbs; at least 60% of the message (run-time placeholders removed) must be covered by
// those pieces. Values filled in at run time (names, addresses, libvirt's own errors) make up
// the rest; a renamed or invented message does not pass.
func TestTroubleshootingMessagesExist(t *testing.T) {
	var pieces []string
	for lit := range literals(t, "internal", "pkg") {
		for _, p := range formatVerb.Split(lit, -1) {
			if p = strings.TrimSpace(p); len(p) >= 4 {
				pieces = append(pieces, p)
			}
		}
	}
	root := testenv.RepoRoot()
	for _, guide := range guides {
		data, err := os.ReadFile(filepath.Join(root, guide))
		if err != nil {
			t.Fatal(err)
		}
		col, checked := -1, 0
		for _, row := range troubleshootingTables(t, string(data)) {
			cells := splitRow(row)
			if isHeader(cells) {
				col = indexOf(cells, "Message (exact)")
				continue
			}
			if col < 0 || col >= len(cells) {
				continue
			}
			for _, m := range backticked.FindAllStringSubmatch(cells[col], -1) {
				msg := placeholder.ReplaceAllString(m[1], "\x00")
				if len(strings.ReplaceAll(msg, "\x00", "")) < 16 {
					continue
				}
				checked++
				if c := coverage(msg, pieces); c < 0.6 {
					t.Errorf("%s quotes `%s`: only %.0f%% of it is text the code writes", guide, m[1], 100*c)
				}
			}
		}
		if checked == 0 {
			t.Errorf("%s: no message was checked; does its table have a \"Message (exact)\" column?", guide)
		}
	}
}

// formatVerb matches a fmt verb, where run-time values enter a message.
var formatVerb = regexp.MustCompile(`%[-+# 0-9.]*[a-zA-Z%]`)

// coverage is the share of msg's characters (placeholders, marked \x00, excluded) that lie in
// an occurrence of one of pieces.
func coverage(msg string, pieces []string) float64 {
	covered := make([]bool, len(msg))
	for _, p := range pieces {
		for off := 0; ; {
			i := strings.Index(msg[off:], p)
			if i < 0 {
				break
			}
			for j := off + i; j < off+i+len(p); j++ {
				covered[j] = true
			}
			off += i + 1
		}
	}
	total, n := 0, 0
	for i := 0; i < len(msg); i++ {
		if msg[i] == 0 {
			continue
		}
		total++
		if covered[i] {
			n++
		}
	}
	if total == 0 {
		return 1
	}
	return float64(n) / float64(total)
}

// literals returns every string literal of the non-test Go files under dirs.
func literals(t *testing.T, dirs ...string) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	goSources(t, func(_ string, _ *token.FileSet, f *ast.File) {
		ast.Inspect(f, func(n ast.Node) bool {
			if lit, ok := n.(*ast.BasicLit); ok && lit.Kind == token.STRING {
				if s, err := strconv.Unquote(lit.Value); err == nil {
					out[s] = true
				}
			}
			return true
		})
	}, dirs...)
	return out
}

// isHeader reports whether cells are a table's header row: the row right above |---|.
// Headers here are recognised by their first cell, which the guides keep fixed: Symptom or
// Cause (troubleshooting), You see (the pools guide's table), State (healthy states).
func isHeader(cells []string) bool {
	return len(cells) > 0 && (cells[0] == "Symptom" || cells[0] == "Cause" || cells[0] == "You see" || cells[0] == "State")
}

func sortedKeys(m map[string]bool) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// splitRow splits a Markdown table row into cells, honouring \| escapes.
func splitRow(row string) []string {
	row = strings.TrimSpace(row)
	row = strings.TrimPrefix(strings.TrimSuffix(row, "|"), "|")
	var cells []string
	var cur strings.Builder
	for i := 0; i < len(row); i++ {
		switch {
		case row[i] == '\\' && i+1 < len(row) && row[i+1] == '|':
			cur.WriteByte('|')
			i++
		case row[i] == '|':
			cells = append(cells, strings.TrimSpace(cur.String()))
			cur.Reset()
		default:
			cur.WriteByte(row[i])
		}
	}
	return append(cells, strings.TrimSpace(cur.String()))
}

func indexOf(xs []string, x string) int {
	for i, v := range xs {
		if v == x {
			return i
		}
	}
	return -1
}
