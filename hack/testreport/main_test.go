package main

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"
)

// A stream as go test -json writes it for two packages run at once: one passes with a skipped
// and a passing subtest, one fails in a subtest, and a third has no test files.
const stream = `{"Action":"start","Package":"a"}
{"Action":"start","Package":"b"}
{"Action":"run","Package":"a","Test":"TestOK"}
{"Action":"output","Package":"a","Test":"TestOK","Output":"=== RUN   TestOK\n"}
{"Action":"run","Package":"b","Test":"TestBad"}
{"Action":"run","Package":"b","Test":"TestBad/case"}
{"Action":"output","Package":"b","Test":"TestBad/case","Output":"    bad_test.go:9: want 2, got 3\n"}
{"Action":"run","Package":"a","Test":"TestOK/sub"}
{"Action":"pass","Package":"a","Test":"TestOK/sub","Elapsed":0.1}
{"Action":"fail","Package":"b","Test":"TestBad/case","Elapsed":0.2}
{"Action":"fail","Package":"b","Test":"TestBad","Elapsed":0.3}
{"Action":"run","Package":"a","Test":"TestSkipped"}
{"Action":"skip","Package":"a","Test":"TestSkipped","Elapsed":0}
{"Action":"pass","Package":"a","Test":"TestOK","Elapsed":0.5}
{"Action":"output","Package":"b","Output":"panic: boom\n"}
{"Action":"output","Package":"b","Output":"FAIL\n"}
{"Action":"output","Package":"b","Output":"FAIL\tb\t1.500s\n"}
{"Action":"fail","Package":"b","Elapsed":1.5}
{"Action":"pass","Package":"a","Elapsed":2.25}
{"Action":"start","Package":"c"}
{"Action":"output","Package":"c","Output":"?   \tc\t[no test files]\n"}
{"Action":"skip","Package":"c","Elapsed":0}
`

func TestReport(t *testing.T) {
	var out bytes.Buffer
	r := newReport(&out)
	if err := r.read(strings.NewReader(stream)); err != nil {
		t.Fatal(err)
	}
	if !r.failed {
		t.Error("a failed test did not fail the report")
	}
	got := out.String()
	for _, want := range []string{
		"--- FAIL: b TestBad/case (0.20s)\n    bad_test.go:9: want 2, got 3\n",
		"FAIL\tb\t1.500s\n",
		"ok  \ta\t2.250s\t2 passed, 1 skipped\n",
		"?   \tc\t[no test files]\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q:\n%s", want, got)
		}
	}
	if strings.Count(got, "FAIL\tb\t") != 1 || !strings.Contains(got, "panic: boom\n") {
		t.Errorf("the package's own output, or not once its closing line:\n%s", got)
	}
	if strings.Contains(got, "=== RUN   TestOK") {
		t.Errorf("a passing test's output was printed:\n%s", got)
	}

	summary := filepath.Join(t.TempDir(), "summary")
	if err := r.writeSummary(summary); err != nil {
		t.Fatal(err)
	}
	var tab bytes.Buffer
	if err := table(&tab, []string{summary}); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(tab.String()), "\n")
	if last := lines[len(lines)-1]; last != "tests: 2 passed, 2 failed, 1 skipped" {
		t.Errorf("closing line %q", last)
	}
	if !strings.HasPrefix(lines[1], "a ") || !strings.HasPrefix(lines[2], "b ") {
		t.Errorf("packages not slowest first:\n%s", tab.String())
	}
	if strings.Contains(tab.String(), "\nc ") {
		t.Errorf("a package without tests is in the table:\n%s", tab.String())
	}
}

// The top-level tests' times go to the summary's .tests file, and -slowest lists them slowest
// first, subtests left out (their time is their parent's).
func TestSlowest(t *testing.T) {
	r := newReport(&bytes.Buffer{})
	if err := r.read(strings.NewReader(stream)); err != nil {
		t.Fatal(err)
	}
	summary := filepath.Join(t.TempDir(), "summary")
	if err := r.writeSummary(summary); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := slowest(&out, []string{summary, filepath.Join(t.TempDir(), "missing")}, 2); err != nil {
		t.Fatal(err)
	}
	want := "the 2 slowest tests\n     0.5  a TestOK\n     0.3  b TestBad\n"
	if out.String() != want {
		t.Errorf("slowest:\n%s\nwant:\n%s", out.String(), want)
	}
}

// A stream cut short (go test killed) fails the report and names the package left running.
func TestReportCutShort(t *testing.T) {
	var out bytes.Buffer
	r := newReport(&out)
	if err := r.read(strings.NewReader(`{"Action":"run","Package":"a","Test":"TestHang"}` + "\n")); err != nil {
		t.Fatal(err)
	}
	if !r.failed || !strings.Contains(out.String(), "FAIL\ta\t(the stream ended before the package did)") {
		t.Errorf("failed=%v, output:\n%s", r.failed, out.String())
	}
}
