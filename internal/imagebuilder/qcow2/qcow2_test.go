package qcow2

import (
	"bytes"
	"context"
	"crypto/rand"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestConvertMatchesQemuImg converts images qemu-img made (v2 and v3, 512 B to 2 MiB clusters,
// compressed with deflate and zstd, with zero clusters) and compares the result byte for byte
// with qemu-img's own raw conversion.
func TestConvertMatchesQemuImg(t *testing.T) {
	if _, err := exec.LookPath("qemu-img"); err != nil {
		t.Skip("qemu-img not installed")
	}
	dir := t.TempDir()
	src := filepath.Join(dir, "src.raw")
	makeSource(t, src)
	cases := []struct {
		name string
		args []string
	}{
		{"v3-64k", []string{"-o", "compat=1.1"}},
		{"v2-64k", []string{"-o", "compat=0.10"}},
		{"v3-512", []string{"-o", "compat=1.1,cluster_size=512"}},
		{"v3-2m", []string{"-o", "compat=1.1,cluster_size=2M"}},
		{"v3-deflate", []string{"-c", "-o", "compat=1.1"}},
		{"v2-deflate-4k", []string{"-c", "-o", "compat=0.10,cluster_size=4096"}},
		{"v3-zstd", []string{"-c", "-o", "compat=1.1,compression_type=zstd"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			q := filepath.Join(dir, tc.name+".qcow2")
			run(t, append(append([]string{"convert", "-O", "qcow2"}, tc.args...), src, q)...)
			compare(t, q, filepath.Join(dir, tc.name))
		})
	}
	t.Run("zero clusters and unallocated tail", func(t *testing.T) {
		q := filepath.Join(dir, "zero.qcow2")
		run(t, "convert", "-O", "qcow2", "-o", "compat=1.1", src, q)
		// Writing zeros over data makes qemu-io mark zero clusters (L2 bit 0) in v3.
		if out, err := exec.Command("qemu-io", "-f", "qcow2", "-c", "write -z 0 1M", q).CombinedOutput(); err != nil {
			t.Skipf("qemu-io: %v %s", err, out)
		}
		compare(t, q, filepath.Join(dir, "zero"))
	})
	// A shrunk image keeps its L1 table (here 128 entries where 1 is needed): within the
	// bound of maxL1Entries.
	t.Run("shrunk from 64G to 32M", func(t *testing.T) {
		q := filepath.Join(dir, "shrunk.qcow2")
		run(t, "create", "-q", "-f", "qcow2", q, "64G")
		if out, err := exec.Command("qemu-io", "-f", "qcow2", "-c", "write -P 7 1M 1M", "-c", "write -P 9 10G 1M", q).CombinedOutput(); err != nil {
			t.Skipf("qemu-io: %v %s", err, out)
		}
		run(t, "resize", "-q", "--shrink", q, "32M")
		compare(t, q, filepath.Join(dir, "shrunk"))
	})
}

func makeSource(t *testing.T, path string) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	const size = 24<<20 + 4096 + 37 // not a multiple of any cluster size
	if err := f.Truncate(size); err != nil {
		t.Fatal(err)
	}
	random := make([]byte, 1<<20)
	_, _ = rand.Read(random)
	text := bytes.Repeat([]byte("compressible banlieue "), 50000)
	for _, w := range []struct {
		off  int64
		data []byte
	}{{0, random}, {3 << 20, text}, {9<<20 + 333, random[:70000]}, {size - 5000, random[:5000]}} {
		if _, err := f.WriteAt(w.data, w.off); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

func compare(t *testing.T, q, base string) {
	t.Helper()
	want := base + ".qemu.raw"
	run(t, "convert", "-O", "raw", q, want)
	got := base + ".ours.raw"
	in, err := os.Open(q)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = in.Close() }() // read only: closing it loses nothing
	fi, _ := in.Stat()
	img, err := Open(in, fi.Size(), testLimits)
	if err != nil {
		t.Fatal(err)
	}
	out, err := os.Create(got)
	if err != nil {
		t.Fatal(err)
	}
	if err := img.ConvertTo(context.Background(), out); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
	a, _ := os.ReadFile(want)
	b, _ := os.ReadFile(got)
	if !bytes.Equal(a, b) {
		t.Fatalf("%s: raw output differs from qemu-img's (%d vs %d bytes)", q, len(b), len(a))
	}
}

func run(t *testing.T, args ...string) {
	t.Helper()
	if out, err := exec.Command("qemu-img", args...).CombinedOutput(); err != nil {
		t.Fatalf("qemu-img %v: %v\n%s", args, err, out)
	}
}

func TestOpenRefuses(t *testing.T) {
	if _, err := Open(bytes.NewReader([]byte("not a qcow2 file at all, long enough for a header read ....................")), 80, testLimits); err == nil {
		t.Error("garbage accepted")
	}
}

// testLimits are the build's defaults (build.DefaultLimits), which real images must pass.
var testLimits = Limits{MaxVirtualSize: 256 << 30, MaxZstdWindow: 128 << 20}
