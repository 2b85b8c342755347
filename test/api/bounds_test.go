package api

import (
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"

	"banlieue.io/banlieue/internal/testenv"
)

// TestCRDSchemasAreBounded walks every committed CRD's schema and names the JSON path of each
// value with no upper bound: a string without maxLength (an enum, a date-time and an
// int-or-string bound themselves), a list without maxItems or without x-kubernetes-list-type, a
// map without maxProperties. An unbounded value lets one object grow to etcd's limit and leaves
// the API server no bound on the cost of a CEL rule over it (docs/security.md, "A bounded API").
// A map's string values are left out: controller-gen has no marker for them, and the map's
// maxProperties bounds how many there are.
func TestCRDSchemasAreBounded(t *testing.T) {
	crds := readCRDs(t)
	var unbounded []string
	for _, crd := range crds {
		for _, v := range crd.Spec.Versions {
			if v.Schema == nil || v.Schema.OpenAPIV3Schema == nil {
				t.Errorf("%s %s has no schema", crd.Name, v.Name)
				continue
			}
			prefix := crd.Spec.Names.Kind + "." + v.Name + ":"
			unbounded = append(unbounded, unboundedIn(prefix, "", v.Schema.OpenAPIV3Schema)...)
		}
	}
	sort.Strings(unbounded)
	for _, u := range unbounded {
		t.Error(u)
	}
}

// TestBoundsCheckFindsEachKind shows the walk finds each kind of unbounded value, nested in
// lists and maps, and accepts each kind of bound, so a green TestCRDSchemasAreBounded means
// something.
func TestBoundsCheckFindsEachKind(t *testing.T) {
	schema := `
type: object
properties:
  metadata: {type: object}
  spec:
    type: object
    properties:
      bounded: {type: string, maxLength: 63}
      enum: {type: string, enum: [A, B]}
      time: {type: string, format: date-time}
      quantity:
        anyOf: [{type: integer}, {type: string}]
        x-kubernetes-int-or-string: true
      name: {type: string}
      list:
        type: array
        x-kubernetes-list-type: atomic
        items: {type: string, maxLength: 1}
      noType:
        type: array
        maxItems: 4
        items: {type: string, maxLength: 1}
      set:
        type: array
        maxItems: 4
        x-kubernetes-list-type: set
        items: {type: string}
      labels:
        type: object
        additionalProperties: {type: string}
      pools:
        type: object
        maxProperties: 4
        additionalProperties:
          type: object
          properties:
            tags: {type: array, maxItems: 4, items: {type: string, maxLength: 8}}
      rows:
        type: array
        maxItems: 4
        x-kubernetes-list-type: map
        x-kubernetes-list-map-keys: [name]
        items:
          type: object
          properties:
            name: {type: string, maxLength: 8}
            attributes:
              type: object
              maxProperties: 4
              additionalProperties: {type: string}
`
	var s apiextensionsv1.JSONSchemaProps
	if err := yaml.Unmarshal([]byte(schema), &s); err != nil {
		t.Fatal(err)
	}
	got := unboundedIn("K.v1:", "", &s)
	want := []string{
		"K.v1: .spec.labels is a map without maxProperties",
		"K.v1: .spec.list is a list without maxItems",
		"K.v1: .spec.name is a string without maxLength",
		"K.v1: .spec.noType is a list without x-kubernetes-list-type",
		"K.v1: .spec.pools.*.tags is a list without x-kubernetes-list-type",
		"K.v1: .spec.set[] is a string without maxLength",
	}
	sort.Strings(got)
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("found\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// unboundedIn lists the unbounded values of s and below it, at JSON path path.
func unboundedIn(prefix, path string, s *apiextensionsv1.JSONSchemaProps) []string {
	var out []string
	report := func(what string) { out = append(out, prefix+" "+displayPath(path)+" is "+what) }
	if s.XIntOrString {
		// A Quantity or IntOrString: its string form is bounded by its pattern or the
		// API server's own parsing; its anyOf branches say nothing more.
		return nil
	}
	switch s.Type {
	case "string":
		if path == ".apiVersion" || path == ".kind" || strings.HasSuffix(path, ".*") {
			// The API server's own TypeMeta; a map's value (see TestCRDSchemasAreBounded).
			return nil
		}
		if s.MaxLength == nil && len(s.Enum) == 0 && !boundedFormat[s.Format] {
			report("a string without maxLength")
		}
	case "array":
		if s.MaxItems == nil {
			report("a list without maxItems")
		}
		if s.XListType == nil {
			report("a list without x-kubernetes-list-type")
		}
		if s.Items != nil && s.Items.Schema != nil {
			out = append(out, unboundedIn(prefix, path+"[]", s.Items.Schema)...)
		}
	case "object":
		if path == ".metadata" {
			// The API server's own ObjectMeta, bounded by its validation.
			return nil
		}
		if s.AdditionalProperties != nil && s.AdditionalProperties.Schema != nil {
			if s.MaxProperties == nil {
				report("a map without maxProperties")
			}
			out = append(out, unboundedIn(prefix, path+".*", s.AdditionalProperties.Schema)...)
		}
	}
	names := make([]string, 0, len(s.Properties))
	for name := range s.Properties {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		p := s.Properties[name]
		out = append(out, unboundedIn(prefix, path+"."+name, &p)...)
	}
	for _, group := range [][]apiextensionsv1.JSONSchemaProps{s.AllOf, s.AnyOf, s.OneOf} {
		for i := range group {
			out = append(out, unboundedIn(prefix, path, &group[i])...)
		}
	}
	return out
}

// boundedFormat are the string formats whose values have a fixed or parser-bounded length.
var boundedFormat = map[string]bool{"date-time": true, "date": true, "int-or-string": true}

func displayPath(path string) string {
	if path == "" {
		return "."
	}
	return path
}

func readCRDs(t *testing.T) []apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(testenv.RepoRoot(), "config", "crd", "bases", "*.yaml"))
	if err != nil || len(files) < 10 {
		t.Fatalf("expected the 10 CRDs in config/crd/bases, found %v (%v)", files, err)
	}
	var crds []apiextensionsv1.CustomResourceDefinition
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var crd apiextensionsv1.CustomResourceDefinition
		if err := yaml.UnmarshalStrict(data, &crd); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		crds = append(crds, crd)
	}
	return crds
}
