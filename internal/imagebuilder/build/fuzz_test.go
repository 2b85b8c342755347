package build

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// fuzzLimits are small, so a decoder that ran past them would show in the output's size or
// the process's memory at once.
var fuzzLimits = Limits{MaxDiskBytes: 1 << 20, MaxXZDictBytes: 1 << 20, MaxZstdWindowBytes: 1 << 20}

// FuzzDecompress: any gzip, xz or zstd input decompresses into at most --max-disk-size bytes
// or fails; a refusal leaves no output behind; nothing panics.
func FuzzDecompress(f *testing.F) {
	for _, seed := range [][]byte{
		gzipped([]byte("banlieue")),
		gzipped(make([]byte, 2<<20)),
		craftXZ(xzBlock{xzDict4K, []byte("one")}, xzBlock{xzDict4K, []byte("two")}),
		craftXZ(xzBlock{xzDict1G, []byte("banlieue")}),
		zstdFrame(3, []byte("banlieue")),
		append(zstdFrame(0, []byte("one")), zstdFrame(25, []byte("two"))...),
		{0x28, 0xb5, 0x2f, 0xfd, 0xe0, 0, 0, 0, 0, 0, 1, 0, 0, 1, 0, 0},
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		open, _ := decompressor(data, fuzzLimits)
		if open == nil {
			return
		}
		dir := t.TempDir()
		src, dst := filepath.Join(dir, "in"), filepath.Join(dir, "out")
		if err := os.WriteFile(src, data, 0o644); err != nil {
			t.Fatal(err)
		}
		err := decompress(src, dst, open, fuzzLimits.MaxDiskBytes)
		st, serr := os.Stat(dst)
		var refused *RefusedError
		switch {
		case err == nil && (serr != nil || st.Size() > fuzzLimits.MaxDiskBytes):
			t.Fatalf("decompressed into %v (%v), limit %d", st, serr, fuzzLimits.MaxDiskBytes)
		case errors.As(err, &refused) && serr == nil:
			t.Fatalf("refused (%v), yet %d bytes of output remain", err, st.Size())
		}
	})
}
