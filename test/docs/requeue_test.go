package docs

import (
	"go/ast"
	"go/token"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// requeueKinds maps the names the controllers give their intervals to the interval
// docs/operations.md ("Requeue intervals") documents for them.
var requeueKinds = map[string]string{
	"RequeueDefault": "default",
	"ErrorRetry":     "error",
	"RequeueLong":    "long",
}

// documentedRequeues reads the three intervals from the "Requeue intervals" section.
func documentedRequeues(t *testing.T) map[string]time.Duration {
	t.Helper()
	doc := readRepoFile(t, "docs/operations.md")
	_, section, ok := strings.Cut(doc, "\n## Requeue intervals\n")
	if !ok {
		t.Fatal(`docs/operations.md has no "## Requeue intervals" section`)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	out := map[string]time.Duration{}
	for kind, re := range map[string]*regexp.Regexp{
		"default": regexp.MustCompile(`\*\*(\d+) s\*\* \(default`),
		"error":   regexp.MustCompile(`\*\*(\d+) s\*\* after a failed pass`),
		"long":    regexp.MustCompile(`\*\*(\d+) s\*\* \(long`),
	} {
		m := re.FindStringSubmatch(section)
		if m == nil {
			t.Fatalf("docs/operations.md, Requeue intervals: no %s interval matching %s", kind, re)
		}
		n, _ := strconv.Atoi(m[1])
		out[kind] = time.Duration(n) * time.Second
	}
	return out
}

// codeRequeue is one interval constant of the code.
type codeRequeue struct {
	where, name string
	value       time.Duration
}

// codeRequeues finds the constants named in requeueKinds under internal/, of the form
// N * time.Second or N * time.Minute; other forms are logged and left to the constant they name.
func codeRequeues(t *testing.T) []codeRequeue {
	t.Helper()
	var out []codeRequeue
	goSources(t, func(rel string, _ *token.FileSet, f *ast.File) {
		for _, decl := range f.Decls {
			gen, ok := decl.(*ast.GenDecl)
			if !ok || gen.Tok != token.CONST {
				continue
			}
			for _, spec := range gen.Specs {
				vs := spec.(*ast.ValueSpec)
				for i, name := range vs.Names {
					if _, ok := requeueKinds[name.Name]; !ok || i >= len(vs.Values) {
						continue
					}
					v, ok := durationValue(vs.Values[i])
					if !ok {
						// An alias of another constant (app.ErrorRetry, say) is checked where that
						// one is declared.
						t.Logf("%s: const %s is not N * time.Second or N * time.Minute; not checked here", rel, name.Name)
						continue
					}
					out = append(out, codeRequeue{where: rel, name: name.Name, value: v})
				}
			}
		}
	}, "internal")
	return out
}

func durationValue(e ast.Expr) (time.Duration, bool) {
	b, ok := e.(*ast.BinaryExpr)
	if !ok || b.Op != token.MUL {
		return 0, false
	}
	lit, ok := b.X.(*ast.BasicLit)
	sel, ok2 := b.Y.(*ast.SelectorExpr)
	if !ok || !ok2 || lit.Kind != token.INT {
		return 0, false
	}
	n, err := strconv.Atoi(lit.Value)
	if err != nil {
		return 0, false
	}
	unit := map[string]time.Duration{"Second": time.Second, "Minute": time.Minute}[sel.Sel.Name]
	if x, ok := sel.X.(*ast.Ident); !ok || x.Name != "time" || unit == 0 {
		return 0, false
	}
	return time.Duration(n) * unit, true
}

// TestRequeueIntervalsMatchOperations: every controller's default, error and long requeue
// interval is the one docs/operations.md documents, so an operator reading it knows how soon a
// change is looked at again.
func TestRequeueIntervalsMatchOperations(t *testing.T) {
	want := documentedRequeues(t)
	seen := map[string]int{}
	for _, c := range codeRequeues(t) {
		kind := requeueKinds[c.name]
		seen[kind]++
		if c.value != want[kind] {
			t.Errorf("%s: %s = %v, but docs/operations.md (Requeue intervals) documents %v for the %s interval", c.where, c.name, c.value, want[kind], kind)
		}
	}
	for _, kind := range []string{"default", "error", "long"} {
		if seen[kind] == 0 {
			t.Errorf("no constant of the %s interval found under internal/: renamed? update requeueKinds", kind)
		}
	}
	t.Logf("checked %v constants against %v", seen, want)
}
