package docs

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

	"banlieue.io/banlieue/internal/testenv"
)

// codeReason is a condition reason the code can emit, and where it is declared.
type codeReason struct {
	value string
	where []string
}

// codeReasons collects the reasons the code under api/, internal/ and pkg/ can write: the string
// values of constants named Reason*, and literal strings given as Reason in a Condition
// composite literal (metav1.Condition{Reason: "…"}). Test files are left out.
func codeReasons(t *testing.T) map[string]*codeReason {
	t.Helper()
	out := map[string]*codeReason{}
	add := func(value, where string) {
		if out[value] == nil {
			out[value] = &codeReason{value: value}
		}
		out[value].where = append(out[value].where, where)
	}
	goSources(t, func(rel string, fset *token.FileSet, f *ast.File) {
		reasonsOfFile(fset, f, rel, add)
	}, "api", "internal", "pkg")
	return out
}

// reasonsOfFile calls add for each reason one file declares: constants named Reason* with a
// string value, and string literals keyed Reason in a Condition composite literal.
func reasonsOfFile(fset *token.FileSet, f *ast.File, rel string, add func(value, where string)) {
	// Constants of the file, to resolve `ReasonX = ReasonY` and `Reason: ReasonX` aliases.
	consts := map[string]string{}
	for _, decl := range f.Decls {
		gen, ok := decl.(*ast.GenDecl)
		if !ok || gen.Tok != token.CONST {
			continue
		}
		for _, spec := range gen.Specs {
			vs := spec.(*ast.ValueSpec)
			for i, name := range vs.Names {
				if i < len(vs.Values) {
					if s, ok := stringValue(vs.Values[i], consts); ok {
						consts[name.Name] = s
					}
				}
			}
		}
	}
	for _, decl := range f.Decls {
		gen, ok := decl.(*ast.GenDecl)
		if !ok || gen.Tok != token.CONST {
			continue
		}
		for _, spec := range gen.Specs {
			for _, name := range spec.(*ast.ValueSpec).Names {
				if strings.HasPrefix(name.Name, "Reason") {
					if s, ok := consts[name.Name]; ok {
						add(s, fmt.Sprintf("%s: const %s", rel, name.Name))
					}
				}
			}
		}
	}
	ast.Inspect(f, func(n ast.Node) bool {
		lit, ok := n.(*ast.CompositeLit)
		if !ok || !isConditionType(lit.Type) {
			return true
		}
		for _, elt := range lit.Elts {
			kv, ok := elt.(*ast.KeyValueExpr)
			if !ok {
				continue
			}
			if key, ok := kv.Key.(*ast.Ident); ok && key.Name == "Reason" {
				if bl, ok := kv.Value.(*ast.BasicLit); ok && bl.Kind == token.STRING {
					if s, err := strconv.Unquote(bl.Value); err == nil {
						add(s, fmt.Sprintf("%s:%d: Reason literal", rel, fset.Position(bl.Pos()).Line))
					}
				}
			}
		}
		return true
	})
}

// stringValue is the value of a string constant expression: a literal, or a constant of the
// same file already seen.
func stringValue(e ast.Expr, consts map[string]string) (string, bool) {
	switch e := e.(type) {
	case *ast.BasicLit:
		if e.Kind == token.STRING {
			s, err := strconv.Unquote(e.Value)
			return s, err == nil
		}
	case *ast.Ident:
		s, ok := consts[e.Name]
		return s, ok
	case *ast.ParenExpr:
		return stringValue(e.X, consts)
	}
	return "", false
}

// isConditionType: metav1.Condition, or any type spelled Condition (a package's own alias).
func isConditionType(e ast.Expr) bool {
	switch e := e.(type) {
	case *ast.SelectorExpr:
		return e.Sel.Name == "Condition"
	case *ast.Ident:
		return e.Name == "Condition"
	}
	return false
}

// guideTable is one Markdown table under a troubleshooting or healthy-states heading.
type guideTable struct {
	guide, heading string
	header         []string
	rows           [][]string
}

// reasonSectionTables returns the tables of a guide that sit under a heading containing
// "Troubleshooting" or "Healthy states" (up to the next heading of the same or a higher level).
func reasonSectionTables(guide, doc string) []guideTable {
	var tables []guideTable
	inside, level, heading := false, 0, ""
	lines := strings.Split(doc, "\n")
	inFence := false
	for i := 0; i < len(lines); i++ {
		line := lines[i]
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			inFence = !inFence
			continue
		}
		if inFence {
			continue
		}
		if strings.HasPrefix(line, "#") {
			l := len(line) - len(strings.TrimLeft(line, "#"))
			lower := strings.ToLower(line)
			switch {
			case strings.Contains(lower, "troubleshooting") || strings.Contains(lower, "healthy states"):
				inside, level, heading = true, l, strings.TrimSpace(strings.TrimLeft(line, "#"))
			case inside && l <= level:
				inside = false
			case inside:
				heading = strings.TrimSpace(strings.TrimLeft(line, "#"))
			}
			continue
		}
		if !inside || !strings.HasPrefix(strings.TrimSpace(line), "|") {
			continue
		}
		// A table: a header row, a |---| row, then rows.
		if i+1 >= len(lines) || !strings.HasPrefix(strings.TrimSpace(lines[i+1]), "|-") {
			continue
		}
		tab := guideTable{guide: guide, heading: heading, header: splitRow(line)}
		i += 2
		for ; i < len(lines) && strings.HasPrefix(strings.TrimSpace(lines[i]), "|"); i++ {
			tab.rows = append(tab.rows, splitRow(lines[i]))
		}
		i--
		tables = append(tables, tab)
	}
	return tables
}

// documentedReasons maps each backticked word of a reason-bearing cell to where it is written.
// In a table with a Reason column only that column counts; in one without (the pools guide's
// "You see" table) every cell does.
func documentedReasons(t *testing.T) map[string][]string {
	t.Helper()
	root := testenv.RepoRoot()
	guides, err := filepath.Glob(filepath.Join(root, "docs", "guides", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	for _, path := range guides {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(root, path)
		for _, tab := range reasonSectionTables(rel, string(data)) {
			cols := map[int]bool{}
			for i, h := range tab.header {
				if strings.Contains(strings.ToLower(h), "reason") {
					cols[i] = true
				}
			}
			for _, row := range tab.rows {
				for i, cell := range row {
					if len(cols) > 0 && !cols[i] {
						continue
					}
					for _, m := range backticked.FindAllStringSubmatch(cell, -1) {
						// `Warm=False Filling` names the reason after the status.
						for _, w := range strings.FieldsFunc(m[1], func(r rune) bool { return r == ' ' || r == '=' || r == ',' }) {
							out[w] = append(out[w], rel+" § "+tab.heading)
						}
					}
				}
			}
		}
	}
	return out
}

// TestEveryReasonIsDocumented: every condition reason the code can emit is named in a
// troubleshooting table (or, for a healthy state, a healthy-states table) of some guide, so a
// user who reads a reason in `kubectl get -o yaml` finds what it means and what to do.
func TestEveryReasonIsDocumented(t *testing.T) {
	reasons := codeReasons(t)
	if len(reasons) < 10 {
		t.Fatalf("found only %d reasons in the code; is the collector broken?", len(reasons))
	}
	documented := documentedReasons(t)
	var missing []string
	for _, r := range sortedReasons(reasons) {
		if len(documented[r.value]) == 0 {
			missing = append(missing, fmt.Sprintf("`%s` (%s)", r.value, strings.Join(r.where, "; ")))
		}
	}
	if len(missing) > 0 {
		t.Errorf("%d of %d condition reasons appear in no guide's troubleshooting or healthy-states table:\n\t%s",
			len(missing), len(reasons), strings.Join(missing, "\n\t"))
	}
	t.Logf("%d of %d condition reasons documented", len(reasons)-len(missing), len(reasons))
}

// TestReasonsAreDeclaredInAPI: the API packages own the vocabulary the roles share, so no
// reason is declared, or written as a literal, anywhere else.
func TestReasonsAreDeclaredInAPI(t *testing.T) {
	var outside []string
	for _, r := range sortedReasons(codeReasons(t)) {
		for _, w := range r.where {
			if !strings.HasPrefix(w, "api/") {
				outside = append(outside, fmt.Sprintf("`%s` at %s", r.value, w))
			}
		}
	}
	if len(outside) > 0 {
		t.Errorf("%d condition reasons are declared outside api/:\n\t%s", len(outside), strings.Join(outside, "\n\t"))
	}
}

// TestReasonCollectorFindsKnownReasons guards the collector itself: reasons declared as
// constants in different packages are all found.
func TestReasonCollectorFindsKnownReasons(t *testing.T) {
	reasons := codeReasons(t)
	for _, want := range []string{"ConnectFailed", "DomainRunning", "NoProviderMatched", "Importing", "Filling", "Bound", "WorkloadApplied"} {
		if reasons[want] == nil {
			t.Errorf("the collector did not find reason %q", want)
		}
	}
	src := `package x
const ReasonA = "Alpha"
const (
	ReasonB    = ReasonA
	ReasonC    = "Gamma"
	notAReason = "Nope"
)
var _ = metav1.Condition{Type: "Ready", Reason: "Literal"}
`
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "x.go", src, 0)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	reasonsOfFile(fset, f, "x.go", func(v, _ string) { got[v] = true })
	want := map[string]bool{"Alpha": true, "Gamma": true, "Literal": true}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("reasonsOfFile = %v, want %v", got, want)
	}
}

func sortedReasons(m map[string]*codeReason) []*codeReason {
	out := make([]*codeReason, 0, len(m))
	for _, r := range m {
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].value < out[j].value })
	return out
}
