// Command testreport reads `go test -json` on standard input and prints what a person needs of
// it: a line per package as `go test` prints it (ok, FAIL, no test files), and the whole output
// of every failed test, package or build. hack/test.sh runs several `go test` streams at once;
// their -json events carry the package, so their output does not interleave mid-test here.
//
//	go test -json ./... | testreport -summary FILE   # appends "pkg status seconds pass fail skip" lines
//	testreport -table FILE...                          # a table of those lines, and the totals
//
// Each summary file FILE has a sibling FILE.tests of "pkg test seconds" lines, one per top-level
// test, from which -table -slowest N prints where the time went (docs/testing.md).
//
// It exits 1 when a test, package or build failed, so a pipeline under pipefail fails.
package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"
)

// event is one line of test2json's output (go doc test2json).
type event struct {
	Time        time.Time
	Action      string
	Package     string
	ImportPath  string
	Test        string
	Elapsed     float64
	Output      string
	FailedBuild string
}

// result is one package's line in a summary file.
type result struct {
	pkg              string
	status           string
	seconds          float64
	pass, fail, skip int
	hasTests         bool
}

type report struct {
	out      io.Writer
	pkgs     map[string]*result
	output   map[string]*strings.Builder // by package, then package+"\x00"+test
	build    map[string]*strings.Builder // build output by import path
	failed   bool
	finished []*result
	tests    []testTime // top-level tests, in the order they ended
}

// testTime is one top-level test's line in a summary's .tests file.
type testTime struct {
	pkg, test string
	seconds   float64
}

func newReport(out io.Writer) *report {
	return &report{out: out, pkgs: map[string]*result{}, output: map[string]*strings.Builder{},
		build: map[string]*strings.Builder{}}
}

func (r *report) buf(m map[string]*strings.Builder, key string) *strings.Builder {
	b, ok := m[key]
	if !ok {
		b = &strings.Builder{}
		m[key] = b
	}
	return b
}

func (r *report) pkg(name string) *result {
	p, ok := r.pkgs[name]
	if !ok {
		p = &result{pkg: name}
		r.pkgs[name] = p
	}
	return p
}

// handle takes one event. Output is kept per test until the test ends and printed only if it
// failed; a package's own output (panics, TestMain, build errors) is printed if the package failed.
func (r *report) handle(e event) {
	if e.Action == "build-output" {
		r.buf(r.build, e.ImportPath).WriteString(e.Output)
		return
	}
	if e.Action == "build-fail" {
		r.failed = true
		_, _ = fmt.Fprintf(r.out, "# %s\n%s", e.ImportPath, r.buf(r.build, e.ImportPath).String())
		return
	}
	if e.Package == "" {
		return
	}
	key := e.Package
	if e.Test != "" {
		key += "\x00" + e.Test
	}
	p := r.pkg(e.Package)
	switch e.Action {
	case "output":
		r.buf(r.output, key).WriteString(e.Output)
	case "run":
		p.hasTests = true
	case "pass", "fail", "skip":
		if e.Test != "" {
			r.testEnded(p, key, e)
			return
		}
		r.packageEnded(p, e)
	}
}

func (r *report) testEnded(p *result, key string, e event) {
	if !strings.Contains(e.Test, "/") {
		r.tests = append(r.tests, testTime{pkg: e.Package, test: e.Test, seconds: e.Elapsed})
	}
	switch e.Action {
	case "pass":
		p.pass++
	case "skip":
		p.skip++
	case "fail":
		p.fail++
		// A parent fails with its subtest: print the subtest's output once, the parent's line too.
		_, _ = fmt.Fprintf(r.out, "--- FAIL: %s %s (%.2fs)\n%s", e.Package, e.Test, e.Elapsed, r.output[key])
	}
	delete(r.output, key)
}

func (r *report) packageEnded(p *result, e event) {
	p.seconds = e.Elapsed
	p.status = e.Action
	switch {
	case e.Action == "fail":
		r.failed = true
		// go test's own closing lines for the package ("FAIL", "FAIL pkg 1.2s") are replaced by
		// the one below.
		for _, line := range strings.SplitAfter(r.output[e.Package].String(), "\n") {
			if line != "FAIL\n" && !strings.HasPrefix(line, "FAIL\t"+e.Package+"\t") {
				_, _ = fmt.Fprint(r.out, line)
			}
		}
		_, _ = fmt.Fprintf(r.out, "FAIL\t%s\t%.3fs\n", e.Package, e.Elapsed)
	case !p.hasTests:
		// go test's own line: "?   pkg [no test files]" or "ok pkg [no tests to run]".
		p.status = "none"
		_, _ = fmt.Fprint(r.out, r.output[e.Package])
	default:
		_, _ = fmt.Fprintf(r.out, "ok  \t%s\t%.3fs\t%d passed, %d skipped\n", e.Package, e.Elapsed, p.pass, p.skip)
	}
	delete(r.output, e.Package)
	r.finished = append(r.finished, p)
}

func (r *report) read(in io.Reader) error {
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 1<<20), 16<<20) // a test's single output line can be long
	for sc.Scan() {
		line := sc.Bytes()
		var e event
		if len(line) == 0 || line[0] != '{' || json.Unmarshal(line, &e) != nil {
			// go test's own lines (e.g. a package that did not build, under -json before go 1.24)
			_, _ = fmt.Fprintf(r.out, "%s\n", line)
			if strings.HasPrefix(string(line), "FAIL") {
				r.failed = true
			}
			continue
		}
		r.handle(e)
	}
	// A stream that ends with packages still running was cut short (a timeout's panic is
	// reported by go test as the package's failure; anything else is a failure too).
	for name, p := range r.pkgs {
		if p.status == "" {
			r.failed = true
			_, _ = fmt.Fprintf(r.out, "%sFAIL\t%s\t(the stream ended before the package did)\n", r.output[name], name)
			p.status = "fail"
			r.finished = append(r.finished, p)
		}
	}
	return sc.Err()
}

func (r *report) writeSummary(path string) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	for _, p := range r.finished {
		_, _ = fmt.Fprintf(f, "%s %s %.1f %d %d %d\n", p.pkg, p.status, p.seconds, p.pass, p.fail, p.skip)
	}
	if err := f.Close(); err != nil {
		return err
	}
	t, err := os.OpenFile(path+".tests", os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	for _, tt := range r.tests {
		_, _ = fmt.Fprintf(t, "%s %s %.1f\n", tt.pkg, tt.test, tt.seconds)
	}
	return t.Close()
}

// slowest prints the n slowest top-level tests of the summaries' .tests files.
func slowest(out io.Writer, paths []string, n int) error {
	var rows []testTime
	for _, path := range paths {
		data, err := os.ReadFile(path + ".tests")
		if errors.Is(err, fs.ErrNotExist) {
			continue
		} else if err != nil {
			return err
		}
		for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
			f := strings.Fields(line)
			if len(f) != 3 {
				continue
			}
			s, err := strconv.ParseFloat(f[2], 64)
			if err != nil {
				continue
			}
			rows = append(rows, testTime{pkg: f[0], test: f[1], seconds: s})
		}
	}
	sort.SliceStable(rows, func(i, j int) bool { return rows[i].seconds > rows[j].seconds })
	rows = rows[:min(n, len(rows))]
	_, _ = fmt.Fprintf(out, "the %d slowest tests\n", len(rows))
	for _, r := range rows {
		_, _ = fmt.Fprintf(out, "%8.1f  %s %s\n", r.seconds, strings.TrimPrefix(r.pkg, "banlieue.io/banlieue/"), r.test)
	}
	return nil
}

// table prints the summary files' packages, slowest first, and the totals; the last line is
// the plain "N passed, N failed, N skipped" that CI reads.
func table(out io.Writer, paths []string) error {
	var rows []result
	for _, path := range paths {
		data, err := os.ReadFile(path)
		if errors.Is(err, fs.ErrNotExist) {
			continue // a stream that had no packages
		} else if err != nil {
			return err
		}
		for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
			f := strings.Fields(line)
			if len(f) != 6 {
				continue
			}
			row := result{pkg: f[0], status: f[1]}
			row.seconds, _ = strconv.ParseFloat(f[2], 64)
			row.pass, _ = strconv.Atoi(f[3])
			row.fail, _ = strconv.Atoi(f[4])
			row.skip, _ = strconv.Atoi(f[5])
			rows = append(rows, row)
		}
	}
	sort.SliceStable(rows, func(i, j int) bool { return rows[i].seconds > rows[j].seconds })
	var total result
	_, _ = fmt.Fprintf(out, "%-52s %-5s %8s %6s %6s %6s\n", "package", "", "seconds", "passed", "failed", "skipped")
	for _, r := range rows {
		if r.status == "none" {
			continue
		}
		_, _ = fmt.Fprintf(out, "%-52s %-5s %8.1f %6d %6d %6d\n", r.pkg, r.status, r.seconds, r.pass, r.fail, r.skip)
		total.seconds += r.seconds
		total.pass += r.pass
		total.fail += r.fail
		total.skip += r.skip
	}
	_, _ = fmt.Fprintf(out, "%-52s %-5s %8.1f %6d %6d %6d\n", "all packages (seconds added up)", "", total.seconds, total.pass, total.fail, total.skip)
	_, _ = fmt.Fprintf(out, "tests: %d passed, %d failed, %d skipped\n", total.pass, total.fail, total.skip)
	return nil
}

func main() {
	summary := flag.String("summary", "", "append each package's result to this file")
	tableMode := flag.Bool("table", false, "print a table of the summary files named as arguments")
	slowestN := flag.Int("slowest", 0, "with -table, first print the N slowest top-level tests")
	flag.Parse()
	if *tableMode {
		var err error
		if *slowestN > 0 {
			err = slowest(os.Stdout, flag.Args(), *slowestN)
		}
		if err == nil {
			err = table(os.Stdout, flag.Args())
		}
		if err != nil {
			_, _ = fmt.Fprintln(os.Stderr, "testreport:", err)
			os.Exit(2)
		}
		return
	}
	r := newReport(os.Stdout)
	if err := r.read(os.Stdin); err != nil {
		_, _ = fmt.Fprintln(os.Stderr, "testreport: reading go test -json:", err)
		os.Exit(2)
	}
	if *summary != "" {
		if err := r.writeSummary(*summary); err != nil {
			_, _ = fmt.Fprintln(os.Stderr, "testreport:", err)
			os.Exit(2)
		}
	}
	if r.failed {
		os.Exit(1)
	}
}
