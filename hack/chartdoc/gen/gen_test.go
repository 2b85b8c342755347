package gen

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const testSchema = `{
  "definitions": {"quantity": {"type": ["string", "number"], "description": "A quantity."}},
  "properties": {
    "image": {"properties": {"tag": {"type": "string"}, "pullPolicy": {"enum": ["", "Always"]}}},
    "size": {"$ref": "#/definitions/quantity"},
    "role": {"properties": {"replicas": {"type": "integer", "description": "Pods."}, "resources": {"type": "object"}}},
    "secure": {"properties": {"runAsNonRoot": {"const": true}}},
    "min": {"oneOf": [{"type": "integer"}, {"type": "string"}]},
    "names": {"type": "array", "items": {"type": "string"}}
  }
}`

func chart(t *testing.T, values string) string {
	t.Helper()
	dir := t.TempDir()
	for name, data := range map[string]string{"values.yaml": values, "values.schema.json": testSchema} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestTable: comments attach to the key right below them (a blank line cuts them off), a key
// with commented keys below is expanded after a row of its own comment, one without is a single
// row, and the schema gives the type and, where no comment does, the description.
func TestTable(t *testing.T) {
	values := `# The image.
image:
  # Its tag.
  tag: ""
  # Its pull
  # policy | escaped.
  pullPolicy: ""
# A stray note, cut off by the blank line.

size: 1Gi
role:
  # Its pods.
  replicas: 1
  # Its resources.
  resources:
    limits:
      cpu: "1"
# Security.
secure:
  runAsNonRoot: true
# Minimum.
min: 1
# Names.
names:
- a
- b
`
	got, err := Table(chart(t, values))
	if err != nil {
		t.Fatal(err)
	}
	want := "| Value | Type | Default | Description |\n|---|---|---|---|\n" +
		"| `image` | object | | The image. |\n" +
		"| `image.tag` | string | `\"\"` | Its tag. |\n" +
		"| `image.pullPolicy` | one of \"\", \"Always\" | `\"\"` | Its pull policy \\| escaped. |\n" +
		"| `size` | string or number | `\"1Gi\"` | A quantity. |\n" +
		"| `role.replicas` | integer | `1` | Its pods. |\n" +
		"| `role.resources` | object | `{\"limits\":{\"cpu\":\"1\"}}` | Its resources. |\n" +
		"| `secure` | object | `{\"runAsNonRoot\":true}` | Security. |\n" +
		"| `min` | integer or string | `1` | Minimum. |\n" +
		"| `names` | list of string | `[\"a\",\"b\"]` | Names. |\n"
	if string(got) != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}

// TestTableRefuses: an undocumented value, a key the schema lacks and a README without its
// markers are errors that name what is wrong.
func TestTableRefuses(t *testing.T) {
	for _, tc := range []struct{ values, want string }{
		{"image:\n  # Its tag.\n  tag: \"\"\n  pullPolicy: \"\"\n", "image.pullPolicy has no comment"},
		{"# Not in the schema.\nother: 1\n", "no schema for other"},
		{"# Three spaces.\nimage:\n   tag: \"\"\n", "want two spaces"},
	} {
		if _, err := Table(chart(t, tc.values)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: err %v, want one containing %q", tc.values, err, tc.want)
		}
	}
	if _, err := README([]byte("# chart\n"), []byte("| x |\n")); err == nil || !strings.Contains(err.Error(), "lacks the markers") {
		t.Errorf("README without markers: err %v", err)
	}
}
