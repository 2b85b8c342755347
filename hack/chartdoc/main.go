// Command chartdoc writes the values table of charts/banlieue/README.md from the chart's
// values.yaml (the comment above each key) and values.schema.json (each value's type).
//
//	go run ./hack/chartdoc           # regenerate the table
//	go run ./hack/chartdoc --check   # exit 1 when the README's table is stale
//
// Run it from the repository root (make docs does).
package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"banlieue.io/banlieue/hack/chartdoc/gen"
)

func main() {
	chart := flag.String("chart", gen.DefaultChart, "chart directory")
	check := flag.Bool("check", false, "do not write; exit 1 when README.md differs from what would be written")
	flag.Parse()

	readme := filepath.Join(*chart, "README.md")
	want, err := gen.Generate(*chart)
	if err != nil {
		fmt.Fprintln(os.Stderr, "chartdoc:", err)
		os.Exit(1)
	}
	if *check {
		have, err := os.ReadFile(readme)
		if err != nil || !bytes.Equal(have, want) {
			fmt.Fprintf(os.Stderr, "chartdoc: %s is stale; run: go run ./hack/chartdoc\n", readme)
			os.Exit(1)
		}
		return
	}
	if err := os.WriteFile(readme, want, 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "chartdoc:", err)
		os.Exit(1)
	}
}
