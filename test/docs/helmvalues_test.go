package docs

import (
	"fmt"
	"regexp"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

const (
	installGuide = "docs/guides/install.md"
	chartValues  = "charts/banlieue/values.yaml"
)

var (
	valuePath = regexp.MustCompile(`^\.?[a-zA-Z][a-zA-Z0-9]*(\.[a-zA-Z][a-zA-Z0-9]*)*(\.\*)?$`)
	setFlag   = regexp.MustCompile(`--set(?:-string)?[ =]([a-zA-Z][a-zA-Z0-9.]*)=`)
)

// documentedValues returns the value paths of the install guide's "### Values" table (first
// column; `.name` continues the path of the cell's previous entry, `x.*` means the map x) and
// of its `--set` examples.
func documentedValues(t *testing.T, guide string) []string {
	t.Helper()
	_, section, ok := strings.Cut(guide, "\n### Values\n")
	if !ok {
		t.Fatalf("%s has no \"### Values\" section", installGuide)
	}
	section, _, _ = strings.Cut(section, "\n#")
	var paths []string
	for _, line := range strings.Split(section, "\n") {
		if !strings.HasPrefix(line, "| `") {
			continue
		}
		parent := ""
		for _, m := range backticked.FindAllStringSubmatch(splitRow(line)[0], -1) {
			p := m[1]
			if !valuePath.MatchString(p) {
				continue
			}
			if strings.HasPrefix(p, ".") {
				p = parent + p
			}
			if i := strings.LastIndex(p, "."); i > 0 {
				parent = p[:i]
			}
			paths = append(paths, p)
		}
	}
	for _, m := range setFlag.FindAllStringSubmatch(guide, -1) {
		paths = append(paths, m[1])
	}
	return paths
}

// valueExists reports whether path (dot-separated; a trailing .* means "a map") is in values.
func valueExists(values map[string]any, path string) error {
	anyKey := strings.HasSuffix(path, ".*")
	node := any(values)
	for _, key := range strings.Split(strings.TrimSuffix(path, ".*"), ".") {
		m, ok := node.(map[string]any)
		if !ok {
			return fmt.Errorf("%s: %s is not a map", path, key)
		}
		if node, ok = m[key]; !ok {
			return fmt.Errorf("%s: no key %s", path, key)
		}
	}
	if _, isMap := node.(map[string]any); anyKey && !isMap {
		return fmt.Errorf("%s is not a map", path)
	}
	return nil
}

// TestHelmValuesAreTheChartsValues: every value the install guide documents or sets with --set
// is a key of charts/banlieue/values.yaml, and every top-level key of values.yaml is
// documented, so the table can neither promise a value the chart ignores nor hide one it has.
func TestHelmValuesAreTheChartsValues(t *testing.T) {
	var values map[string]any
	if err := yaml.Unmarshal([]byte(readRepoFile(t, chartValues)), &values); err != nil {
		t.Fatalf("%s: %v", chartValues, err)
	}
	paths := documentedValues(t, readRepoFile(t, installGuide))
	if len(paths) < 10 {
		t.Fatalf("only %d value paths found in %s: is the extraction broken? %v", len(paths), installGuide, paths)
	}
	top := map[string]bool{}
	for _, p := range paths {
		top[strings.Split(p, ".")[0]] = true
		if err := valueExists(values, p); err != nil {
			t.Errorf("%s documents %s, which %s lacks: %v", installGuide, p, chartValues, err)
		}
	}
	for k := range values {
		if !top[k] {
			t.Errorf("%s has %s, which the Values table of %s does not document", chartValues, k, installGuide)
		}
	}
	t.Logf("checked %d documented values", len(paths))
}

// TestHelmValueExtraction: the table's shorthand (`.name`, `x.*`) and --set flags are read as
// the paths they stand for, and missing keys are caught.
func TestHelmValueExtraction(t *testing.T) {
	guide := "\n### Values\n\n| Value | Default |\n|---|---|\n" +
		"| `providerClass.create`, `.name` | `true`, `libvirt` |\n| `controller.*`, `operator.*` | `replicas: 1` |\n\n" +
		"```sh\nhelm install x --set image.tag=v1 --set namespaces.create=false\n```\n"
	got := strings.Join(documentedValues(t, guide), " ")
	if want := "providerClass.create providerClass.name controller.* operator.* image.tag namespaces.create"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	values := map[string]any{"image": map[string]any{"tag": ""}, "log": "x"}
	for _, bad := range []string{"image.digest", "log.*", "log.level", "nope"} {
		if valueExists(values, bad) == nil {
			t.Errorf("%s: not caught", bad)
		}
	}
}
