// Package gen renders the API reference (docs/reference/api.md) from the generated
// CustomResourceDefinitions in config/crd/bases, which controller-gen produces from the Go API
// types. Reading the CRDs rather than the Go sources means the reference shows exactly what the
// API server enforces: types, defaults, enums, bounds, patterns and CEL rules with their
// messages.
//
// The output depends only on the CRD files: kinds are ordered by group then kind, fields by
// name, and nothing carries a date, so regenerating an unchanged API gives identical bytes.
package gen

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"sigs.k8s.io/yaml"
)

// DefaultCRDDir and DefaultOutput are relative to the repository root.
const (
	DefaultCRDDir = "config/crd/bases"
	DefaultOutput = "docs/reference/api.md"
)

// crd is the part of apiextensions.k8s.io/v1 CustomResourceDefinition the reference uses. It is
// declared here rather than imported so the generator needs nothing beyond sigs.k8s.io/yaml.
type crd struct {
	Kind     string `json:"kind"`
	Metadata struct {
		Name string `json:"name"`
	} `json:"metadata"`
	Spec struct {
		Group string `json:"group"`
		Names struct {
			Kind       string   `json:"kind"`
			ListKind   string   `json:"listKind"`
			Plural     string   `json:"plural"`
			Singular   string   `json:"singular"`
			ShortNames []string `json:"shortNames"`
			Categories []string `json:"categories"`
		} `json:"names"`
		Scope    string    `json:"scope"`
		Versions []version `json:"versions"`
	} `json:"spec"`
}

type version struct {
	Name                     string          `json:"name"`
	Served                   bool            `json:"served"`
	Storage                  bool            `json:"storage"`
	Deprecated               bool            `json:"deprecated"`
	AdditionalPrinterColumns []printerColumn `json:"additionalPrinterColumns"`
	Subresources             map[string]any  `json:"subresources"`
	Schema                   struct {
		OpenAPIV3Schema *schema `json:"openAPIV3Schema"`
	} `json:"schema"`
}

type printerColumn struct {
	Name        string `json:"name"`
	Type        string `json:"type"`
	Format      string `json:"format"`
	JSONPath    string `json:"jsonPath"`
	Priority    int    `json:"priority"`
	Description string `json:"description"`
}

type validation struct {
	Rule              string `json:"rule"`
	Message           string `json:"message"`
	MessageExpression string `json:"messageExpression"`
	Reason            string `json:"reason"`
	FieldPath         string `json:"fieldPath"`
}

// schema is a JSONSchemaProps subset: every keyword controller-gen emits for our types.
type schema struct {
	Type                 string             `json:"type"`
	Format               string             `json:"format"`
	Description          string             `json:"description"`
	Default              json.RawMessage    `json:"default"`
	Enum                 []json.RawMessage  `json:"enum"`
	Pattern              string             `json:"pattern"`
	Minimum              *float64           `json:"minimum"`
	Maximum              *float64           `json:"maximum"`
	ExclusiveMinimum     bool               `json:"exclusiveMinimum"`
	ExclusiveMaximum     bool               `json:"exclusiveMaximum"`
	MinLength            *int64             `json:"minLength"`
	MaxLength            *int64             `json:"maxLength"`
	MinItems             *int64             `json:"minItems"`
	MaxItems             *int64             `json:"maxItems"`
	MinProperties        *int64             `json:"minProperties"`
	MaxProperties        *int64             `json:"maxProperties"`
	Required             []string           `json:"required"`
	Nullable             bool               `json:"nullable"`
	Properties           map[string]*schema `json:"properties"`
	Items                *schema            `json:"items"`
	AdditionalProperties json.RawMessage    `json:"additionalProperties"`
	AnyOf                []*schema          `json:"anyOf"`
	IntOrString          bool               `json:"x-kubernetes-int-or-string"`
	PreserveUnknown      *bool              `json:"x-kubernetes-preserve-unknown-fields"`
	EmbeddedResource     bool               `json:"x-kubernetes-embedded-resource"`
	ListType             string             `json:"x-kubernetes-list-type"`
	ListMapKeys          []string           `json:"x-kubernetes-list-map-keys"`
	MapType              string             `json:"x-kubernetes-map-type"`
	Validations          []validation       `json:"x-kubernetes-validations"`
}

// additional returns the additionalProperties schema, if it is one (not a boolean).
func (s *schema) additional() *schema {
	if len(s.AdditionalProperties) == 0 || s.AdditionalProperties[0] != '{' {
		return nil
	}
	var a schema
	if err := json.Unmarshal(s.AdditionalProperties, &a); err != nil {
		return nil
	}
	return &a
}

// Load reads every *.yaml CRD in dir.
func Load(dir string) ([]crd, error) {
	paths, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		return nil, err
	}
	if len(paths) == 0 {
		return nil, fmt.Errorf("no CRDs (*.yaml) in %s", dir)
	}
	var crds []crd
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			return nil, err
		}
		var c crd
		if err := yaml.Unmarshal(data, &c); err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
		if c.Kind != "CustomResourceDefinition" {
			continue
		}
		crds = append(crds, c)
	}
	slices.SortFunc(crds, func(a, b crd) int {
		if c := strings.Compare(a.Spec.Group, b.Spec.Group); c != 0 {
			return c
		}
		return strings.Compare(a.Spec.Names.Kind, b.Spec.Names.Kind)
	})
	return crds, nil
}

// Generate renders the reference for the CRDs in crdDir.
func Generate(crdDir string) ([]byte, error) {
	crds, err := Load(crdDir)
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	b.WriteString(header)
	// Index.
	b.WriteString("| Kind | Group/version | Scope | Short names |\n|---|---|---|---|\n")
	for _, c := range crds {
		for _, v := range c.Spec.Versions {
			fmt.Fprintf(&b, "| [%s](#%s) | `%s/%s` | %s | %s |\n", c.Spec.Names.Kind, anchor(c.Spec.Names.Kind),
				c.Spec.Group, v.Name, c.Spec.Scope, codeList(c.Spec.Names.ShortNames))
		}
	}
	for _, c := range crds {
		for _, v := range c.Spec.Versions {
			if err := renderKind(&b, c, v); err != nil {
				return nil, fmt.Errorf("%s: %w", c.Metadata.Name, err)
			}
		}
	}
	return b.Bytes(), nil
}

const header = `<!-- Code generated by hack/apidocs from config/crd/bases; DO NOT EDIT. -->
<!-- Regenerate with: go run ./hack/apidocs   (test/docs fails when this file is stale) -->

# API reference

Every kind banlieue serves, read from the CustomResourceDefinitions that ` + "`make manifests`" + `
generates from the Go API types (` + "`api/`" + `). What is listed here is what the API server
enforces: a value outside an enum, a bound or a pattern, or one that breaks a CEL rule, is
refused at admission with the message shown.

Field paths are relative to the object; ` + "`[]`" + ` marks the items of a list and ` + "`{}`" + ` the values of
a map. **Required** means the API server rejects an object without the field (a field is only
required when its parent is present). Defaults are applied by the API server when the field is
omitted.

`

func renderKind(b *bytes.Buffer, c crd, v version) error {
	n := c.Spec.Names
	root := v.Schema.OpenAPIV3Schema
	if root == nil {
		return fmt.Errorf("version %s has no schema", v.Name)
	}
	fmt.Fprintf(b, "\n## %s\n\n", n.Kind)
	if d := oneLine(root.Description); d != "" {
		b.WriteString(d + "\n\n")
	}
	b.WriteString("| | |\n|---|---|\n")
	fmt.Fprintf(b, "| Group/version | `%s/%s` |\n", c.Spec.Group, v.Name)
	fmt.Fprintf(b, "| Kind | `%s` (list: `%s`) |\n", n.Kind, n.ListKind)
	fmt.Fprintf(b, "| Scope | %s |\n", c.Spec.Scope)
	fmt.Fprintf(b, "| Resource | `%s` (singular `%s`) |\n", n.Plural, n.Singular)
	fmt.Fprintf(b, "| Short names | %s |\n", codeList(n.ShortNames))
	fmt.Fprintf(b, "| Categories | %s |\n", codeList(n.Categories))
	fmt.Fprintf(b, "| Subresources | %s |\n", codeList(sortedKeys(v.Subresources)))
	state := []string{}
	if v.Served {
		state = append(state, "served")
	}
	if v.Storage {
		state = append(state, "storage version")
	}
	if v.Deprecated {
		state = append(state, "deprecated")
	}
	fmt.Fprintf(b, "| Version | %s |\n", strings.Join(state, ", "))

	if len(v.AdditionalPrinterColumns) > 0 {
		fmt.Fprintf(b, "\n### Printer columns\n\n`kubectl get %s` shows the columns of priority 0; `-o wide` adds the others.\n\n", n.Plural)
		b.WriteString("| Column | Type | JSONPath | Priority | Description |\n|---|---|---|---|---|\n")
		for _, col := range v.AdditionalPrinterColumns {
			typ := col.Type
			if col.Format != "" {
				typ += " (" + col.Format + ")"
			}
			fmt.Fprintf(b, "| %s | %s | `%s` | %d | %s |\n", cell(col.Name), typ, cell(col.JSONPath), col.Priority, cell(oneLine(col.Description)))
		}
	}
	if len(root.Validations) > 0 {
		b.WriteString("\n### Object rules\n\n")
		writeRules(b, root.Validations)
	}
	for _, part := range []string{"spec", "status"} {
		s := root.Properties[part]
		if s == nil {
			continue
		}
		fmt.Fprintf(b, "\n### %s\n\n", part)
		if d := oneLine(s.Description); d != "" {
			b.WriteString(d + "\n\n")
		}
		if len(s.Validations) > 0 {
			fmt.Fprintf(b, "Rules on `%s` as a whole:\n\n", part)
			writeRules(b, s.Validations)
			b.WriteString("\n")
		}
		var rows []row
		walk(&rows, part, s)
		if len(rows) == 0 {
			b.WriteString("No fields.\n")
			continue
		}
		b.WriteString("| Field | Type | Required | Default | Validation | Description |\n|---|---|---|---|---|---|\n")
		for _, r := range rows {
			req := ""
			if r.required {
				req = "yes"
			}
			fmt.Fprintf(b, "| `%s` | %s | %s | %s | %s | %s |\n", cell(r.path), cell(r.typ), req, r.def, r.validation, r.desc)
		}
	}
	return nil
}

func writeRules(b *bytes.Buffer, vs []validation) {
	for _, v := range vs {
		fmt.Fprintf(b, "- `%s` — %s\n", v.Rule, ruleMessage(v))
	}
}

func ruleMessage(v validation) string {
	switch {
	case v.Message != "":
		return "\"" + v.Message + "\""
	case v.MessageExpression != "":
		return "message from `" + v.MessageExpression + "`"
	}
	return "(no message)"
}

// row is one field of the flattened schema.
type row struct {
	path, typ, def, validation, desc string
	required                         bool
}

// walk appends a row per property under s (whose own path is path), depth first, properties in
// name order.
func walk(rows *[]row, path string, s *schema) {
	for _, name := range sortedKeys(s.Properties) {
		child := s.Properties[name]
		p := path + "." + name
		*rows = append(*rows, makeRow(p, child, slices.Contains(s.Required, name)))
		descend(rows, p, child)
	}
}

// descend adds the rows below a field: its properties, its list items' or map values' fields.
func descend(rows *[]row, p string, s *schema) {
	switch {
	case len(s.Properties) > 0:
		walk(rows, p, s)
	case s.Items != nil:
		item := s.Items
		if len(item.Properties) > 0 {
			walk(rows, p+"[]", item)
		} else if item.Items != nil || len(item.Validations) > 0 || hasBounds(item) {
			*rows = append(*rows, makeRow(p+"[]", item, false))
			descend(rows, p+"[]", item)
		}
	case s.additional() != nil:
		v := s.additional()
		if len(v.Properties) > 0 {
			walk(rows, p+".{}", v)
		}
	}
}

func hasBounds(s *schema) bool {
	return len(s.Enum) > 0 || s.Pattern != "" || s.Minimum != nil || s.Maximum != nil ||
		s.MinLength != nil || s.MaxLength != nil || s.Format != ""
}

func makeRow(path string, s *schema, required bool) row {
	r := row{path: path, typ: typeOf(s), required: required, desc: cell(oneLine(s.Description))}
	if len(s.Default) > 0 {
		r.def = "`" + cell(compactJSON(s.Default)) + "`"
	}
	r.validation = strings.Join(constraints(s), "<br>")
	return r
}

// typeOf names a schema's type the way a manifest author thinks of it.
func typeOf(s *schema) string {
	switch {
	case s.IntOrString:
		return "int or string"
	case len(s.AnyOf) > 0:
		var ts []string
		for _, a := range s.AnyOf {
			ts = append(ts, typeOf(a))
		}
		return strings.Join(ts, " or ")
	case s.Type == "array" && s.Items != nil:
		return "[]" + typeOf(s.Items)
	case s.Type == "object" && s.additional() != nil:
		return "map[string]" + typeOf(s.additional())
	case s.Type == "object" && s.PreserveUnknown != nil && *s.PreserveUnknown:
		return "object (free-form)"
	case s.Type == "integer" && s.Format != "":
		return "integer (" + s.Format + ")"
	case s.Type == "string" && s.Format != "":
		return "string (" + s.Format + ")"
	case s.Type == "":
		return "any"
	}
	return s.Type
}

// constraints lists a schema's validation keywords, each as a short phrase.
func constraints(s *schema) []string {
	var out []string
	if len(s.Enum) > 0 {
		vals := make([]string, len(s.Enum))
		for i, e := range s.Enum {
			vals[i] = "`" + cell(compactJSON(e)) + "`"
		}
		out = append(out, "one of "+strings.Join(vals, ", "))
	}
	bound := func(name string, v *float64, exclusive bool) {
		if v == nil {
			return
		}
		op := map[string]string{"min": "≥", "max": "≤"}[name]
		if exclusive {
			op = map[string]string{"min": ">", "max": "<"}[name]
		}
		out = append(out, op+" "+strconv.FormatFloat(*v, 'f', -1, 64))
	}
	bound("min", s.Minimum, s.ExclusiveMinimum)
	bound("max", s.Maximum, s.ExclusiveMaximum)
	length := func(what string, lo, hi *int64) {
		switch {
		case lo != nil && hi != nil:
			out = append(out, fmt.Sprintf("%s %d–%d", what, *lo, *hi))
		case lo != nil:
			out = append(out, fmt.Sprintf("%s ≥ %d", what, *lo))
		case hi != nil:
			out = append(out, fmt.Sprintf("%s ≤ %d", what, *hi))
		}
	}
	length("length", s.MinLength, s.MaxLength)
	length("items", s.MinItems, s.MaxItems)
	length("entries", s.MinProperties, s.MaxProperties)
	if s.Pattern != "" {
		out = append(out, "pattern `"+cell(s.Pattern)+"`")
	}
	switch s.ListType {
	case "map":
		out = append(out, "list keyed by "+codeList(s.ListMapKeys))
	case "set":
		out = append(out, "set (no duplicates)")
	case "atomic":
		out = append(out, "replaced as a whole")
	}
	if s.MapType == "atomic" {
		out = append(out, "replaced as a whole")
	}
	if s.Nullable {
		out = append(out, "nullable")
	}
	for _, v := range s.Validations {
		out = append(out, "CEL `"+cell(v.Rule)+"`: "+cell(ruleMessage(v)))
	}
	// Rules on the items of a list of objects have no row of their own, so they go here.
	if s.Items != nil && len(s.Items.Properties) > 0 {
		for _, v := range s.Items.Validations {
			out = append(out, "each item: CEL `"+cell(v.Rule)+"`: "+cell(ruleMessage(v)))
		}
	}
	return out
}

func compactJSON(raw json.RawMessage) string {
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return string(raw)
	}
	return buf.String()
}

// oneLine joins a multi-line description into one line for a table cell.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// cell escapes what would break a Markdown table row.
func cell(s string) string {
	s = strings.ReplaceAll(s, "|", `\|`)
	return strings.ReplaceAll(s, "\n", " ")
}

func codeList(xs []string) string {
	if len(xs) == 0 {
		return "—"
	}
	out := make([]string, len(xs))
	for i, x := range xs {
		out[i] = "`" + x + "`"
	}
	return strings.Join(out, ", ")
}

func anchor(kind string) string { return strings.ToLower(kind) }

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
