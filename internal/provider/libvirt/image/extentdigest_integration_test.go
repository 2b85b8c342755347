package image

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"banlieue.io/banlieue/pkg/extentdigest"
)

// An import given --extent-digest (ADR-0134) verifies the bytes it uploads with that digest
// alone: the artifact imports, and so does a copy with its zeros written out as data (the same
// content, another layout), while a copy with a bit flipped inside an extent, or with data
// where the artifact has a hole, is refused and leaves neither volume nor marker.
func TestImportWithExtentDigest(t *testing.T) {
	s := newLabSuite(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	s.createProvider(ctx, t, "lab")
	pool := s.createPool(ctx, t, "ext")
	dir := t.TempDir()
	// 64 MiB, data at 0–2, 30–32 and 63–64 MiB, holes elsewhere.
	artifact := writeFile(t, filepath.Join(dir, "artifact.raw"), 64<<20, []int64{0, 30 << 20, 63 << 20}, 1<<20)
	sum := checksumOf(t, artifact, "sha256").String()
	extent := extentDigestOf(t, artifact)

	run := func(vmimage, src string, o ImportOptions) error {
		o.VMImage, o.Source, o.Provider, o.ProviderNamespace, o.Pool = vmimage, src, "lab", providerNamespace, pool.Name
		return Importer{Kube: s.env.Client, Out: io.Discard}.Import(ctx, o)
	}
	job := ImportOptions{Checksum: sum, ExtentDigest: extent}

	t.Run("the artifact imports, sparse, with its sha256 in the marker", func(t *testing.T) {
		if err := run("good", artifact, job); err != nil {
			t.Fatal(err)
		}
		vol := s.assertImported(ctx, t, pool, "good.raw", artifact)
		if a := allocated(t, vol.Key); a > 8<<20 {
			t.Errorf("volume allocates %d bytes for 3 MiB of data: holes were written", a)
		}
	})

	t.Run("a copy with its zeros written as data imports with the same digest", func(t *testing.T) {
		dense := copyFile(t, artifact, filepath.Join(dir, "dense.raw"))
		if err := writeAt(dense, make([]byte, 8<<20), 10<<20); err != nil {
			t.Fatal(err)
		}
		if allocated(t, dense) < allocated(t, artifact)+8<<20 {
			t.Fatalf("the dense copy allocates %d bytes, the artifact %d: the zeros were not written as data", allocated(t, dense), allocated(t, artifact))
		}
		if got := extentDigestOf(t, dense); got != extent {
			t.Fatalf("dense copy: extent digest %s, want %s", got, extent)
		}
		if err := run("dense", dense, job); err != nil {
			t.Fatal(err)
		}
		s.assertImported(ctx, t, pool, "dense.raw", artifact)
	})

	for _, tc := range []struct {
		name, vmimage string
		off           int64
		b             byte // what replaces the byte at off: the flipped one, or data in a hole
	}{
		{"a bit flipped inside an extent is refused", "flipped", 30<<20 + 12345, 0},
		{"data where the artifact has a hole is refused", "filled", 40<<20 + 7, 0x5a},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bad := copyFile(t, artifact, filepath.Join(t.TempDir(), "bad.raw"))
			b := tc.b
			if b == 0 {
				orig := make([]byte, 1)
				f, err := os.Open(artifact)
				if err != nil {
					t.Fatal(err)
				}
				_, err = f.ReadAt(orig, tc.off)
				_ = f.Close() // read only
				if err != nil {
					t.Fatal(err)
				}
				b = orig[0] ^ 0x10
			}
			if err := writeAt(bad, []byte{b}, tc.off); err != nil {
				t.Fatal(err)
			}
			err := run(tc.vmimage, bad, job)
			want := "invalid --extent-digest: extent digest mismatch for " + bad + ": expected " + extent + ", computed extents-sha256:"
			if err == nil || !strings.HasPrefix(err.Error(), want) ||
				!strings.Contains(err.Error(), "nothing was imported: volume "+tc.vmimage+".raw and its marker "+tc.vmimage+".raw.sha256 were deleted") {
				t.Fatalf("error = %v\nwant %s…", err, want)
			}
			s.assertNoVolume(ctx, t, pool, tc.vmimage+".raw")
		})
	}

	t.Run("an extent digest needs a sha256 --checksum, checked before the host is touched", func(t *testing.T) {
		for _, o := range []ImportOptions{{ExtentDigest: extent}, {ExtentDigest: extent, Checksum: checksumOf(t, artifact, "sha512").String()}} {
			err := run("nosha", artifact, o)
			if err == nil || !strings.HasPrefix(err.Error(), "invalid --extent-digest: it needs --checksum sha256:<hex>") {
				t.Fatalf("error = %v", err)
			}
		}
		err := run("nosha", artifact, ImportOptions{Checksum: sum, ExtentDigest: "sha256:" + sum})
		if err == nil || !strings.HasPrefix(err.Error(), "invalid --extent-digest: expected extents-sha256:<64 hex digits>") {
			t.Fatalf("error = %v", err)
		}
		s.assertNoVolume(ctx, t, pool, "nosha.raw")
	})
}

// extentDigestOf reads path whole, as the builder does, into an extent digest.
func extentDigestOf(t *testing.T, path string) string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }() // read only
	fi, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	x := extentdigest.New(fi.Size())
	if _, err := io.Copy(x, f); err != nil {
		t.Fatal(err)
	}
	d, err := x.Sum()
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// copyFile copies src to dst keeping its holes (data extents only, then the size).
func copyFile(t *testing.T, src, dst string) string {
	t.Helper()
	in, err := os.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = in.Close() }() // read only
	fi, err := in.Stat()
	if err != nil {
		t.Fatal(err)
	}
	out, err := os.Create(dst)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 1<<20)
	for off := int64(0); off < fi.Size(); off += int64(len(buf)) {
		n, err := in.ReadAt(buf, off)
		if err != nil && err != io.EOF {
			t.Fatal(err)
		}
		if strings.Count(string(buf[:n]), "\x00") == n {
			continue // a hole stays a hole
		}
		if _, err := out.WriteAt(buf[:n], off); err != nil {
			t.Fatal(err)
		}
	}
	if err := out.Truncate(fi.Size()); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
	return dst
}

func allocated(t *testing.T, path string) int64 {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		t.Fatal(err)
	}
	return st.Blocks * 512
}

func writeAt(path string, p []byte, off int64) error {
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	if _, err := f.WriteAt(p, off); err != nil {
		_ = f.Close() // the write's error is the one to report
		return err
	}
	return f.Close()
}
