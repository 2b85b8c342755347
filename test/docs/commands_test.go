package docs

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	"k8s.io/client-go/util/jsonpath"
	"sigs.k8s.io/yaml"

	"banlieue.io/banlieue/internal/testenv"
)

// commandDocs are the documents whose shell blocks are checked: every guide and the README.
func commandDocs(t *testing.T) []string {
	t.Helper()
	root := testenv.RepoRoot()
	docs, err := filepath.Glob(filepath.Join(root, "docs", "guides", "*.md"))
	if err != nil || len(docs) == 0 {
		t.Fatalf("no guides under docs/guides (%v)", err)
	}
	for i, d := range docs {
		docs[i], _ = filepath.Rel(root, d)
	}
	return append(docs, "README.md")
}

// docCommand is one simple command (no pipes, no &&) found in a shell block.
type docCommand struct {
	where string // file:line
	words []string
}

func (c docCommand) String() string { return c.where + ": " + strings.Join(c.words, " ") }

// shellLanguages are the fence info strings of runnable blocks. In `console` blocks only the
// lines after a `$ ` prompt are commands; the rest is output.
var shellLanguages = map[string]bool{"sh": true, "bash": true, "shell": true, "console": true}

// docCommands extracts every simple command of every shell block of doc.
func docCommands(t *testing.T, name, doc string) []docCommand {
	t.Helper()
	var out []docCommand
	lines := strings.Split(doc, "\n")
	for i := 0; i < len(lines); i++ {
		fence := strings.TrimSpace(lines[i])
		if !strings.HasPrefix(fence, "```") {
			continue
		}
		lang := strings.Fields(strings.TrimPrefix(fence, "```") + " x")[0]
		j := i + 1
		for j < len(lines) && !strings.HasPrefix(strings.TrimSpace(lines[j]), "```") {
			j++
		}
		if shellLanguages[lang] {
			console := lang == "console"
			for k := i + 1; k < j; k++ {
				line := lines[k]
				if console {
					if !strings.HasPrefix(line, "$ ") {
						continue
					}
					line = strings.TrimPrefix(line, "$ ")
				}
				start := k
				for strings.HasSuffix(strings.TrimRight(line, " "), "\\") && k+1 < j {
					k++
					line = strings.TrimSuffix(strings.TrimRight(line, " "), "\\") + " " + lines[k]
				}
				simple, err := splitShell(line)
				if err != nil {
					t.Errorf("%s:%d: %v: %s", name, start+1, err, line)
					continue
				}
				for _, words := range simple {
					out = append(out, docCommand{where: fmt.Sprintf("%s:%d", name, start+1), words: words})
				}
			}
		}
		i = j
	}
	return out
}

// splitShell splits one shell line into simple commands: words with quotes removed, split at
// | || && ; & and newlines, redirections and their targets dropped, comments removed. A
// command substitution $(…) becomes the word "$SUBST" and its contents a command of their own.
func splitShell(line string) ([][]string, error) {
	var cmds [][]string
	var cur []string
	var word strings.Builder
	inWord := false
	flushWord := func() {
		if inWord {
			cur = append(cur, word.String())
			word.Reset()
			inWord = false
		}
	}
	flushCmd := func() {
		flushWord()
		if len(cur) > 0 {
			cmds = append(cmds, cur)
		}
		cur = nil
	}
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case c == '\'':
			end := strings.IndexByte(line[i+1:], '\'')
			if end < 0 {
				return nil, fmt.Errorf("unterminated single quote")
			}
			word.WriteString(line[i+1 : i+1+end])
			inWord = true
			i += end + 1
		case c == '"':
			i++
			for ; i < len(line) && line[i] != '"'; i++ {
				if line[i] == '\\' && i+1 < len(line) && strings.IndexByte(`"\$`+"`", line[i+1]) >= 0 {
					i++
				}
				word.WriteByte(line[i])
			}
			if i >= len(line) {
				return nil, fmt.Errorf("unterminated double quote")
			}
			inWord = true
		case c == '\\' && i+1 < len(line):
			word.WriteByte(line[i+1])
			inWord = true
			i++
		case c == '$' && i+1 < len(line) && line[i+1] == '(':
			depth, j := 1, i+2
			for ; j < len(line) && depth > 0; j++ {
				switch line[j] {
				case '(':
					depth++
				case ')':
					depth--
				}
			}
			if depth != 0 {
				return nil, fmt.Errorf("unterminated $(")
			}
			inner, err := splitShell(line[i+2 : j-1])
			if err != nil {
				return nil, err
			}
			cmds = append(cmds, inner...)
			word.WriteString("$SUBST")
			inWord = true
			i = j - 1
		case c == '#' && !inWord:
			flushCmd()
			return cmds, nil
		case c == ' ' || c == '\t':
			flushWord()
		case c == '|' || c == ';' || c == '&' || c == '\n':
			flushCmd()
			if i+1 < len(line) && (line[i+1] == '|' || line[i+1] == '&') {
				i++
			}
		case c == '>' || c == '<':
			// A redirection: drop an fd number just before it and the target after it.
			if inWord && isDigits(word.String()) {
				word.Reset()
				inWord = false
			}
			flushWord()
			for i+1 < len(line) && (line[i+1] == '>' || line[i+1] == '&') {
				i++
			}
			for i+1 < len(line) && line[i+1] == ' ' {
				i++
			}
			for i+1 < len(line) && strings.IndexByte(" |;&", line[i+1]) < 0 {
				i++
			}
		default:
			word.WriteByte(c)
			inWord = true
		}
	}
	flushCmd()
	return cmds, nil
}

func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}

// program strips the environment assignments and wrappers (sudo, env, time) in front of a
// command and returns what runs and its arguments.
func program(words []string) (string, []string) {
	for len(words) > 0 {
		w := words[0]
		switch {
		case w == "sudo" || w == "env" || w == "time" || w == "exec":
			words = words[1:]
		case regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*=`).MatchString(w):
			words = words[1:]
		default:
			return w, words[1:]
		}
	}
	return "", nil
}

var scriptPath = regexp.MustCompile(`^(?:\./)?((?:hack|scripts)/[A-Za-z0-9_.-]+\.sh)$`)

// TestDocCommandsUseExistingFlags: every banlieue command, hack/ or scripts/ script and kubectl
// jsonpath/explain in a shell block of a guide or the README refers to subcommands, flags and
// API fields that exist, so renaming one breaks this test instead of the reader's copy-paste.
func TestDocCommandsUseExistingFlags(t *testing.T) {
	root := testenv.RepoRoot()
	cli := newCLI(t)
	crds := loadCRDs(t)
	var nBanlieue, nScript, nKubectl int
	for _, name := range commandDocs(t) {
		data, err := os.ReadFile(filepath.Join(root, name))
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range docCommands(t, name, string(data)) {
			prog, args := program(c.words)
			switch {
			case prog == "banlieue" || strings.HasSuffix(prog, "/banlieue"):
				nBanlieue++
				for _, e := range cli.check(t, args) {
					t.Errorf("%s\n\t%s", c, e)
				}
			case prog == "go" && len(args) >= 2 && args[0] == "run" && strings.TrimPrefix(args[1], "./") == "cmd/banlieue":
				nBanlieue++
				for _, e := range cli.check(t, args[2:]) {
					t.Errorf("%s\n\t%s", c, e)
				}
			case scriptPath.MatchString(prog):
				nScript++
				for _, e := range checkScript(t, scriptPath.FindStringSubmatch(prog)[1], args) {
					t.Errorf("%s\n\t%s", c, e)
				}
			case prog == "kubectl" || strings.HasSuffix(prog, "/kubectl"):
				if e, checked := crds.checkKubectl(args); checked {
					nKubectl++
					for _, e := range e {
						t.Errorf("%s\n\t%s", c, e)
					}
				}
			}
		}
	}
	t.Logf("checked %d banlieue commands, %d script calls, %d kubectl field references", nBanlieue, nScript, nKubectl)
	if nBanlieue == 0 || nScript == 0 || nKubectl == 0 {
		t.Errorf("found nothing to check in one category (banlieue %d, scripts %d, kubectl %d): is the extraction broken?", nBanlieue, nScript, nKubectl)
	}
}

// --- banlieue ---

// cli knows the banlieue binary's command tree and flags, read from its --help output.
type cli struct {
	bin  string
	mu   sync.Mutex
	help map[string]*cmdHelp // by space-joined subcommand path
}

type cmdHelp struct {
	subcommands map[string]bool
	long        map[string]bool // flag name -> takes a value
	short       map[string]bool
}

func newCLI(t *testing.T) *cli {
	t.Helper()
	return &cli{bin: testenv.Banlieue(t), help: map[string]*cmdHelp{}}
}

var (
	// cobra pads command names to the longest, which is followed by one space only.
	helpCommand = regexp.MustCompile(`^  ([a-z][a-z0-9-]*)(?:\s|$)`)
	helpFlag    = regexp.MustCompile(`^\s+(?:-([A-Za-z0-9]), )?--([A-Za-z0-9][A-Za-z0-9-]*)(?: ([A-Za-z0-9.]+))?(?:\s{2,}|$)`)
)

func (c *cli) helpOf(t *testing.T, path []string) *cmdHelp {
	t.Helper()
	key := strings.Join(path, " ")
	c.mu.Lock()
	defer c.mu.Unlock()
	if h, ok := c.help[key]; ok {
		return h
	}
	out, err := exec.Command(c.bin, append(append([]string{}, path...), "--help")...).CombinedOutput()
	if err != nil {
		t.Fatalf("banlieue %s --help: %v\n%s", key, err, out)
	}
	h := parseHelp(string(out))
	c.help[key] = h
	return h
}

// parseHelp reads cobra's help: "Available Commands:" and the "Flags:"/"Global Flags:" lists.
func parseHelp(out string) *cmdHelp {
	h := &cmdHelp{subcommands: map[string]bool{}, long: map[string]bool{}, short: map[string]bool{}}
	section := ""
	for _, line := range strings.Split(out, "\n") {
		if line != "" && !strings.HasPrefix(line, " ") {
			section = strings.TrimSpace(line)
			continue
		}
		switch {
		case strings.HasPrefix(section, "Available Commands") || strings.HasPrefix(section, "Additional Commands"):
			if m := helpCommand.FindStringSubmatch(line); m != nil {
				h.subcommands[m[1]] = true
			}
		case strings.HasSuffix(section, "Flags:"):
			if m := helpFlag.FindStringSubmatch(line); m != nil {
				takesValue := m[3] != ""
				h.long[m[2]] = takesValue
				if m[1] != "" {
					h.short[m[1]] = takesValue
				}
			}
		}
	}
	return h
}

// check returns what is wrong with `banlieue args...`.
func (c *cli) check(t *testing.T, args []string) []string {
	var path []string
	h := c.helpOf(t, nil)
	var errs []string
	positional := 0
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			return errs
		case strings.HasPrefix(a, "--"):
			name, _, hasValue := strings.Cut(a[2:], "=")
			takesValue, ok := h.long[name]
			if !ok {
				errs = append(errs, fmt.Sprintf("banlieue %s has no flag --%s", strings.Join(path, " "), name))
				continue
			}
			if takesValue && !hasValue {
				i++
			}
		case strings.HasPrefix(a, "-") && len(a) > 1:
			for j := 1; j < len(a); j++ {
				takesValue, ok := h.short[a[j:j+1]]
				if !ok {
					errs = append(errs, fmt.Sprintf("banlieue %s has no flag -%s", strings.Join(path, " "), a[j:j+1]))
					break
				}
				if takesValue {
					if j == len(a)-1 {
						i++
					}
					break
				}
			}
		default:
			if positional == 0 && h.subcommands[a] {
				path = append(path, a)
				h = c.helpOf(t, path)
				continue
			}
			if positional == 0 && len(h.subcommands) > 0 && len(path) == 0 {
				errs = append(errs, fmt.Sprintf("banlieue has no subcommand %q", a))
			}
			positional++
		}
	}
	return errs
}

// --- scripts ---

var (
	scriptUsageMu sync.Mutex
	scriptUsage   = map[string]string{}
	usageFlag     = regexp.MustCompile(`(?:^|[\s\[|(,])(--?[A-Za-z0-9][A-Za-z0-9-]*)`)
	bareWord      = regexp.MustCompile(`^[a-z][a-z-]*$`)
)

// usageOf is a script's usage text: its --help output for the user-facing scripts/ (which
// support --help), the comment block at the top of the file for hack/ (whose scripts do
// things when run, so they are not run here).
func usageOf(t *testing.T, script string) (string, error) {
	scriptUsageMu.Lock()
	defer scriptUsageMu.Unlock()
	if u, ok := scriptUsage[script]; ok {
		return u, nil
	}
	path := filepath.Join(testenv.RepoRoot(), script)
	src, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("%s does not exist", script)
	}
	var usage strings.Builder
	for i, line := range strings.Split(string(src), "\n") {
		if i == 0 && strings.HasPrefix(line, "#!") {
			continue
		}
		if !strings.HasPrefix(line, "#") {
			break
		}
		usage.WriteString(strings.TrimPrefix(line, "#") + "\n")
	}
	if strings.HasPrefix(script, "scripts/") {
		out, err := exec.Command(path, "--help").CombinedOutput()
		if err != nil {
			t.Fatalf("%s --help: %v\n%s", script, err, out)
		}
		usage.Write(out)
	}
	scriptUsage[script] = usage.String()
	return usage.String(), nil
}

// checkScript: the script exists, each flag in args is in its usage text, and a first
// argument that is a plain word is one of the subcommands the usage text shows (up, status,
// start…), for a script that has subcommands.
func checkScript(t *testing.T, script string, args []string) []string {
	usage, err := usageOf(t, script)
	if err != nil {
		return []string{err.Error()}
	}
	flags := map[string]bool{}
	for _, m := range usageFlag.FindAllStringSubmatch(usage, -1) {
		flags[m[1]] = true
	}
	// Subcommands are the words the usage text writes right after the script's name:
	// "hack/lab.sh up", "Usage: hack/libvirt-lab.sh start|stop|env".
	words := map[string]bool{}
	after := regexp.MustCompile(regexp.QuoteMeta(filepath.Base(script)) + `\s+([a-z][a-z-]*(?:\|[a-z][a-z-]*)*)\b`)
	for _, m := range after.FindAllStringSubmatch(usage, -1) {
		for _, w := range strings.Split(m[1], "|") {
			words[w] = true
		}
	}
	var errs []string
	for i, a := range args {
		if a == "--" {
			break
		}
		if strings.HasPrefix(a, "-") && len(a) > 1 {
			name, _, _ := strings.Cut(a, "=")
			if !flags[name] {
				errs = append(errs, fmt.Sprintf("%s: flag %s is not in its usage text", script, name))
			}
			continue
		}
		if i == 0 && len(words) > 0 && bareWord.MatchString(a) && !words[a] {
			errs = append(errs, fmt.Sprintf("%s: %q is not a subcommand its usage text names", script, a))
		}
	}
	return errs
}

// --- kubectl and the CRDs ---

type crd struct {
	kind    string
	names   []string
	schemas []map[string]any // openAPIV3Schema of each version
}

type crdSet []*crd

func loadCRDs(t *testing.T) crdSet {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(testenv.RepoRoot(), "config", "crd", "bases", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no CRDs under config/crd/bases (%v)", err)
	}
	var set crdSet
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var obj struct {
			Spec struct {
				Group string
				Names struct {
					Kind       string
					Plural     string
					Singular   string
					ShortNames []string
				}
				Versions []struct {
					Schema struct {
						OpenAPIV3Schema map[string]any
					}
				}
			}
		}
		if err := yaml.Unmarshal(data, &obj); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		n := obj.Spec.Names
		c := &crd{kind: n.Kind}
		for _, name := range append([]string{n.Plural, n.Singular, strings.ToLower(n.Kind)}, n.ShortNames...) {
			c.names = append(c.names, name, name+"."+obj.Spec.Group)
		}
		for _, v := range obj.Spec.Versions {
			c.schemas = append(c.schemas, v.Schema.OpenAPIV3Schema)
		}
		set = append(set, c)
	}
	return set
}

func (s crdSet) lookup(resource string) *crd {
	resource, _, _ = strings.Cut(resource, "/") // TYPE/NAME
	resource = strings.ToLower(resource)
	for _, c := range s {
		for _, n := range c.names {
			if n == resource {
				return c
			}
		}
	}
	return nil
}

// kubectlValueFlags are kubectl's flags that take a separate value.
var kubectlValueFlags = map[string]bool{
	"-n": true, "--namespace": true, "-o": true, "--output": true, "-l": true, "--selector": true,
	"--kubeconfig": true, "-f": true, "--filename": true, "-c": true, "--container": true,
	"--context": true, "--field-selector": true, "--sort-by": true, "--template": true,
	"--timeout": true, "--for": true, "--api-version": true,
}

// checkKubectl checks `kubectl args...` when it names banlieue objects with a jsonpath output
// or explains one of their fields. checked is false for other kubectl commands.
func (s crdSet) checkKubectl(args []string) (errs []string, checked bool) {
	var positional []string
	var output string
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "-o" || a == "--output":
			if i+1 < len(args) {
				output = args[i+1]
			}
			i++
		case strings.HasPrefix(a, "--output="):
			output = strings.TrimPrefix(a, "--output=")
		case strings.HasPrefix(a, "-o"):
			output = strings.TrimPrefix(strings.TrimPrefix(a, "-o"), "=")
		case strings.HasPrefix(a, "-"):
			if kubectlValueFlags[a] {
				i++
			}
		default:
			positional = append(positional, a)
		}
	}
	if len(positional) < 2 {
		return nil, false
	}
	switch positional[0] {
	case "explain":
		kind, path, _ := strings.Cut(positional[1], ".")
		c := s.lookup(kind)
		if c == nil {
			return nil, false
		}
		fields := []string{}
		if path != "" {
			fields = strings.Split(path, ".")
		}
		if !c.hasFieldPath(fields) {
			return []string{fmt.Sprintf("%s has no field %s (config/crd/bases)", c.kind, path)}, true
		}
		return nil, true
	case "get":
		tmpl, ok := strings.CutPrefix(output, "jsonpath=")
		if !ok {
			return nil, false
		}
		var kinds []*crd
		for _, r := range strings.Split(positional[1], ",") {
			if c := s.lookup(r); c != nil {
				kinds = append(kinds, c)
			}
		}
		if len(kinds) == 0 {
			return nil, false
		}
		for _, c := range kinds {
			for _, e := range c.checkJSONPath(tmpl) {
				errs = append(errs, fmt.Sprintf("%s: %s", c.kind, e))
			}
		}
		return errs, true
	}
	return nil, false
}

// anySchema stands for a part of an object whose fields the CRD does not constrain.
var anySchema = map[string]any{"x-kubernetes-preserve-unknown-fields": true}

func (c *crd) hasFieldPath(fields []string) bool {
	for _, schema := range c.schemas {
		node := schema
		for _, f := range fields {
			if node = field(node, f); node == nil {
				break
			}
			if items, ok := node["items"].(map[string]any); ok && node["type"] == "array" {
				node = items
			}
		}
		if node != nil {
			return true
		}
	}
	return false
}

// field is the schema of property name of node, nil when there is none.
func field(node map[string]any, name string) map[string]any {
	if node == nil {
		return nil
	}
	if node["x-kubernetes-preserve-unknown-fields"] == true {
		return anySchema
	}
	if node["type"] == "array" {
		node, _ = node["items"].(map[string]any)
		if node == nil {
			return nil
		}
	}
	if props, ok := node["properties"].(map[string]any); ok {
		if p, ok := props[name].(map[string]any); ok {
			return p
		}
	}
	switch ap := node["additionalProperties"].(type) {
	case map[string]any:
		return ap
	case bool:
		if ap {
			return anySchema
		}
	}
	return nil
}

// checkJSONPath walks a kubectl jsonpath template over the CRD's schema: every field must be
// declared. Inside {range …}{end} fields are relative to the element; @ in a filter is the
// element it tests. A template valid against any version of the CRD passes.
func (c *crd) checkJSONPath(tmpl string) []string {
	p, err := jsonpath.Parse("doc", tmpl)
	if err != nil {
		return []string{fmt.Sprintf("jsonpath %q does not parse: %v", tmpl, err)}
	}
	var best []string
	for i, schema := range c.schemas {
		// The root is the object itself (get NAME) or a List of them (get without a name); the
		// CRD schema leaves metadata open (ObjectMeta), in the object and in each item.
		withMeta := func() map[string]any {
			o := map[string]any{"type": "object", "properties": map[string]any{}}
			for k, v := range schema["properties"].(map[string]any) {
				o["properties"].(map[string]any)[k] = v
			}
			o["properties"].(map[string]any)["metadata"] = anySchema
			return o
		}
		root := withMeta()
		root["properties"].(map[string]any)["items"] = map[string]any{"type": "array", "items": withMeta()}
		errs := walkTemplate(p.Root, root)
		if i == 0 || len(errs) < len(best) {
			best = errs
		}
		if len(errs) == 0 {
			return nil
		}
	}
	return best
}

func walkTemplate(root *jsonpath.ListNode, object map[string]any) []string {
	var errs []string
	stack := []map[string]any{object}
	for _, n := range root.Nodes {
		action, ok := n.(*jsonpath.ListNode)
		if !ok {
			continue
		}
		nodes := action.Nodes
		isRange := false
		if len(nodes) > 0 {
			if id, ok := nodes[0].(*jsonpath.IdentifierNode); ok {
				switch id.Name {
				case "range":
					isRange, nodes = true, nodes[1:]
				case "end":
					if len(stack) > 1 {
						stack = stack[:len(stack)-1]
					}
					continue
				}
			}
		}
		res, e := walkNodes(nodes, stack[len(stack)-1])
		errs = append(errs, e...)
		if isRange {
			if res != nil && res["type"] == "array" {
				res, _ = res["items"].(map[string]any)
			}
			if res == nil {
				res = anySchema
			}
			stack = append(stack, res)
		}
	}
	return errs
}

// walkNodes follows one action's nodes from cur and returns the schema it ends at (nil after an
// error, or for literal text).
func walkNodes(nodes []jsonpath.Node, cur map[string]any) (map[string]any, []string) {
	var errs []string
	var trail []string
	for _, n := range nodes {
		if cur == nil {
			return nil, errs
		}
		switch n := n.(type) {
		case *jsonpath.FieldNode:
			if n.Value == "" {
				continue
			}
			trail = append(trail, n.Value)
			next := field(cur, n.Value)
			if next == nil {
				errs = append(errs, fmt.Sprintf("no field .%s in the CRD schema", strings.Join(trail, ".")))
				return nil, errs
			}
			cur = next
		case *jsonpath.ArrayNode, *jsonpath.WildcardNode:
			if cur["type"] == "array" {
				cur, _ = cur["items"].(map[string]any)
			}
		case *jsonpath.FilterNode:
			if cur["type"] == "array" {
				cur, _ = cur["items"].(map[string]any)
			}
			for _, side := range []*jsonpath.ListNode{n.Left, n.Right} {
				if side == nil {
					continue
				}
				if _, e := walkNodes(side.Nodes, cur); len(e) > 0 {
					for _, x := range e {
						errs = append(errs, "in filter: "+x)
					}
				}
			}
		case *jsonpath.TextNode, *jsonpath.IntNode, *jsonpath.FloatNode, *jsonpath.BoolNode:
			return nil, errs
		case *jsonpath.RecursiveNode, *jsonpath.UnionNode:
			return anySchema, errs // .. and [a,b] are not followed; nothing to check beyond
		case *jsonpath.ListNode:
			return walkNodes(n.Nodes, cur)
		}
	}
	return cur, errs
}

// TestDocCommandCheckerCatchesRenames: the checks above fail on a renamed flag, subcommand,
// script argument or field, and pass on the real ones.
func TestDocCommandCheckerCatchesRenames(t *testing.T) {
	cli := newCLI(t)
	crds := loadCRDs(t)
	check := func(line string) []string {
		t.Helper()
		cmds, err := splitShell(line)
		if err != nil {
			t.Fatal(err)
		}
		var errs []string
		for _, words := range cmds {
			prog, args := program(words)
			switch {
			case strings.HasSuffix(prog, "banlieue"):
				errs = append(errs, cli.check(t, args)...)
			case scriptPath.MatchString(prog):
				errs = append(errs, checkScript(t, scriptPath.FindStringSubmatch(prog)[1], args)...)
			case strings.HasSuffix(prog, "kubectl"):
				e, _ := crds.checkKubectl(args)
				errs = append(errs, e...)
			}
		}
		return errs
	}
	good := []string{
		`banlieue provider libvirt check --endpoint qemu+tls://h/system --pki-dir /tmp/pki`,
		`bin/banlieue seed build --instance-id x --hostname h -o seed.iso --user-data=u`,
		`hack/lab.sh status`,
		`scripts/bootstrap-libvirt-tls.sh --root /tmp/bt --extra-san kvm-7 --rotate`,
		`kubectl -n ns get virtualmachine web-01 -o jsonpath='{range .status.conditions[*]}{.type}={.status} {.reason}{"\n"}{end}'`,
		`kubectl get bvm -o jsonpath='{.items[*].status.conditions[?(@.type=="Ready")].status}'`,
		`kubectl get blvm,bvm x -o jsonpath='{.metadata.name} {.spec}'`,
		`kubectl get bvm -o jsonpath='{range .items[*]}{.metadata.name}{"\t"}{.status.phase}{"\n"}{end}'`,
		`kubectl explain virtualmachine.spec.classRef`,
		`kubectl get pods -o jsonpath='{.status.whatever}'`, // not ours: not checked
	}
	for _, line := range good {
		if errs := check(line); len(errs) > 0 {
			t.Errorf("%s: unexpected %v", line, errs)
		}
	}
	bad := []string{
		`banlieue provider libvirt check --endpoint qemu+tls://h/system --pki-directory /tmp/pki`,
		`banlieue seed build -x`,
		`banlieue seeds build`,
		`hack/lab.sh start`,
		`hack/no-such-script.sh`,
		`scripts/bootstrap-libvirt-tls.sh --extra-sans kvm-7`,
		`kubectl -n ns get bvm web-01 -o jsonpath='{.status.condition}'`,
		`kubectl get bvm web-01 -o jsonpath='{range .status.conditions[*]}{.reasons}{end}'`,
		`kubectl get bvm -o jsonpath='{.items[*].status.conditions[?(@.kind=="Ready")].status}'`,
		`kubectl get libvirtmachine x -o=jsonpath='{.status.addressSources}'`,
		`kubectl explain bvm.spec.classReference`,
	}
	for _, line := range bad {
		if errs := check(line); len(errs) == 0 {
			t.Errorf("%s: the checker found nothing wrong", line)
		} else {
			t.Logf("%s\n\t%v", line, errs)
		}
	}
}
