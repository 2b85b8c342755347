// Command apidocs writes docs/reference/api.md from the generated CRDs in config/crd/bases.
//
//	go run ./hack/apidocs           # regenerate docs/reference/api.md
//	go run ./hack/apidocs --check   # exit 1 when docs/reference/api.md is stale
//
// Run it from the repository root (make does).
package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"

	"banlieue.io/banlieue/hack/apidocs/gen"
)

func main() {
	crds := flag.String("crds", gen.DefaultCRDDir, "directory of the generated CRDs")
	out := flag.String("out", gen.DefaultOutput, "file to write")
	check := flag.Bool("check", false, "do not write; exit 1 when the file differs from what would be written")
	flag.Parse()

	want, err := gen.Generate(*crds)
	if err != nil {
		fmt.Fprintln(os.Stderr, "apidocs:", err)
		os.Exit(1)
	}
	if *check {
		have, err := os.ReadFile(*out)
		if err != nil || !bytes.Equal(have, want) {
			fmt.Fprintf(os.Stderr, "apidocs: %s is stale; run: go run ./hack/apidocs\n", *out)
			os.Exit(1)
		}
		return
	}
	if err := os.WriteFile(*out, want, 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "apidocs:", err)
		os.Exit(1)
	}
}
