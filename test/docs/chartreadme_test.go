package docs

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	chartdoc "banlieue.io/banlieue/hack/chartdoc/gen"
	"banlieue.io/banlieue/internal/testenv"
)

// TestChartREADMEIsFresh fails when the values table of charts/banlieue/README.md differs from
// what hack/chartdoc generates from the chart's values.yaml and values.schema.json.
func TestChartREADMEIsFresh(t *testing.T) {
	dir := filepath.Join(testenv.RepoRoot(), chartdoc.DefaultChart)
	want, err := chartdoc.Generate(dir)
	if err != nil {
		t.Fatalf("hack/chartdoc: %v", err)
	}
	have, err := os.ReadFile(filepath.Join(dir, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(have, want) {
		t.Errorf("%s/README.md is stale: run go run ./hack/chartdoc (make docs)", chartdoc.DefaultChart)
	}
}
