package iso9660

import (
	"bytes"
	"flag"
	"os/exec"
	"testing"
)

// FuzzBuild builds a root with two fuzzed names and fuzzed content. Build may
// refuse the input but must not panic; an accepted image must read back, in
// both trees, with the content given. The committed corpus under
// testdata/fuzz/FuzzBuild runs as a normal test, and then every image is
// also checked with isoinfo, which is too slow to run per fuzz input.
func FuzzBuild(f *testing.F) {
	fuzzing := flag.Lookup("test.fuzz").Value.String() != ""
	f.Fuzz(func(t *testing.T, name string, data []byte, other string) {
		files := []File{{Name: name, Data: data}, {Name: other, Data: []byte(other)}}
		im, err := Build(Volume{Label: "CIDATA", Files: files})
		if err != nil {
			return
		}
		var buf bytes.Buffer
		if n, err := im.WriteTo(&buf); err != nil || n != im.Size() || int64(buf.Len()) != n {
			t.Fatalf("WriteTo wrote %d of %d bytes: %v", n, im.Size(), err)
		}
		p, err := readImage(buf.Bytes())
		if err != nil {
			t.Fatalf("reading back: %v", err)
		}
		for _, f := range files {
			if got, ok := p.joliet[f.Name]; !ok || !bytes.Equal(got, f.Data) {
				t.Fatalf("Joliet %q: got %q (present %v), want %q", f.Name, got, ok, f.Data)
			}
			base, ext, _ := primaryName(f.Name)
			if got := p.primary[string(primaryIdentifier(base, ext))]; !bytes.Equal(got, f.Data) {
				t.Fatalf("primary %q: got %q, want %q", f.Name, got, f.Data)
			}
		}
		if fuzzing {
			return
		}
		if _, err := exec.LookPath("isoinfo"); err != nil {
			return // TestExternalReaders reports the missing tool
		}
		path := writeTemp(t, buf.Bytes())
		for _, f := range files {
			if !isASCII(f.Name) {
				continue
			}
			if got := run(t, "isoinfo", "-J", "-i", path, "-x", "/"+f.Name); !bytes.Equal(got, f.Data) {
				t.Errorf("isoinfo -J -x /%s: got %q, want %q", f.Name, got, f.Data)
			}
		}
	})
}
