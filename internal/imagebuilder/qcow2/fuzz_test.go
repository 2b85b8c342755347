package qcow2

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"banlieue.io/banlieue/internal/imagebuilder/qcow2/qcow2test"
)

// fuzzLimits are small, so a run that breaks them shows in the output size at once.
var fuzzLimits = Limits{MaxVirtualSize: 1 << 20, MaxZstdWindow: 64 << 10}

func addSeeds(f *testing.F) {
	const cb = 9
	text := bytes.Repeat([]byte("banlieue "), 57)[:512]
	for _, img := range []qcow2test.Image{
		{ClusterBits: cb, Size: 64 << 10, L1: map[int64]uint64{0: 1024, 1: 1536},
			L2:   map[int64]map[int64]uint64{1024: {0: qcow2test.L2Entry(2048), 1: qcow2test.CompressedEntry(2560, 2, cb), 7: 1}, 1536: {3: qcow2test.L2Entry(3072)}},
			Data: map[int64][]byte{2048: text, 2560: deflated(text), 3072: text}},
		{Version: 3, Compression: compressionZstd, ClusterBits: cb, Size: 32 << 10, L1: map[int64]uint64{0: 1024},
			L2:   map[int64]map[int64]uint64{1024: {0: qcow2test.CompressedEntry(1536, 2, cb)}},
			Data: map[int64][]byte{1536: zstdFrameDeclaring(0, text)}},
		{ClusterBits: cb, Size: 64 << 10, L1: map[int64]uint64{0: 1024, 1: 1024}, L2: map[int64]map[int64]uint64{1024: {0: qcow2test.L2Entry(1536), 1: qcow2test.L2Entry(1536)}}},
		{Size: 300 << 30},
		{ClusterBits: 12, Size: 1 << 20, L1Size: 4096},
	} {
		f.Add(img.Bytes())
	}
}

// FuzzQCOW2Open: any header either opens, with a virtual size within the limit, or fails with
// an error; it never panics or allocates from what it claims.
func FuzzQCOW2Open(f *testing.F) {
	addSeeds(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		img, err := Open(bytes.NewReader(data), int64(len(data)), fuzzLimits)
		if err == nil && (img.Size() < 0 || img.Size() > fuzzLimits.MaxVirtualSize) {
			t.Fatalf("opened with virtual size %d over the limit %d", img.Size(), fuzzLimits.MaxVirtualSize)
		}
	})
}

// FuzzQCOW2Convert: any file converts into exactly its virtual size, within the limit, or
// fails; a RefusedError names a rule.
func FuzzQCOW2Convert(f *testing.F) {
	addSeeds(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		img, err := Open(bytes.NewReader(data), int64(len(data)), fuzzLimits)
		if err != nil {
			return
		}
		out, err := os.Create(filepath.Join(t.TempDir(), "out.raw"))
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = out.Close() }() // only its size is read back
		err = img.ConvertTo(context.Background(), out)
		var refused *RefusedError
		if errors.As(err, &refused) && (refused.Rule < RuleVirtualSize || refused.Rule > RuleStructure) {
			t.Fatalf("refused by no rule: %v", err)
		}
		st, serr := out.Stat()
		if serr != nil {
			t.Fatal(serr)
		}
		if st.Size() > fuzzLimits.MaxVirtualSize || (err == nil && st.Size() != img.Size()) {
			t.Fatalf("output of %d bytes for a virtual size of %d (limit %d), err %v", st.Size(), img.Size(), fuzzLimits.MaxVirtualSize, err)
		}
	})
}
