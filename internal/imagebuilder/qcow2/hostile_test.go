package qcow2

import (
	"bytes"
	"compress/flate"
	"context"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"banlieue.io/banlieue/internal/imagebuilder/qcow2/qcow2test"
)

// convertFile opens and converts the file at path with limits, into a file of t.TempDir().
func convertFile(t *testing.T, path string, limits Limits) ([]byte, error) {
	t.Helper()
	in, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = in.Close() }() // read only: closing it loses nothing
	fi, err := in.Stat()
	if err != nil {
		t.Fatal(err)
	}
	img, err := Open(in, fi.Size(), limits)
	if err != nil {
		return nil, err
	}
	out, err := os.Create(filepath.Join(t.TempDir(), "out.raw"))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = out.Close() }() // read back below, or discarded
	if err := img.ConvertTo(context.Background(), out); err != nil {
		return nil, err
	}
	return os.ReadFile(out.Name())
}

// deflated is data as a qcow2 compressed cluster holds it: raw deflate. Writing to a
// bytes.Buffer cannot fail, and BestCompression is a valid level.
func deflated(data []byte) []byte {
	var b bytes.Buffer
	w, _ := flate.NewWriter(&b, flate.BestCompression)
	_, _ = w.Write(data)
	_ = w.Close()
	return b.Bytes()
}

// zstdFrameDeclaring is a zstd frame whose window descriptor declares 1 << (10+exponent)
// bytes, holding one raw block of data.
func zstdFrameDeclaring(exponent byte, data []byte) []byte {
	h := uint32(len(data))<<3 | 1 // raw block, last
	f := []byte{0x28, 0xb5, 0x2f, 0xfd, 0x00, exponent << 3, byte(h), byte(h >> 8), byte(h >> 16)}
	return append(f, data...)
}

// The crafted images of docs/reliability.md ("Hostile image sources") and their neighbours: each is refused with a RefusedError of
// the rule it breaks and a message that says where. 512-byte clusters (cluster_bits 9) keep
// the files small: an L2 table maps 64 clusters, 32 KiB of disk.
func TestHostileImagesAreRefused(t *testing.T) {
	const cb = 9
	data := bytes.Repeat([]byte{0xa5}, 512)
	// The 9.7 KB file of the issue: 1024 L1 entries (32 MiB) sharing one L2 table whose 64
	// entries share one data cluster.
	bomb := qcow2test.Image{ClusterBits: cb, Size: 32 << 20, L1: map[int64]uint64{}, L2: map[int64]map[int64]uint64{9216: {}},
		Data: map[int64][]byte{9728: data}}
	for i := range int64(1024) {
		bomb.L1[i] = 9216
	}
	for j := range int64(64) {
		bomb.L2[9216][j] = qcow2test.L2Entry(9728)
	}
	text := bytes.Repeat([]byte("banlieue "), 57)[:512]
	cases := []struct {
		name string
		img  qcow2test.Image
		rule Rule
		want string
	}{
		{"virtual size over the limit", qcow2test.Image{Size: 300 << 30}, RuleVirtualSize,
			"qcow2: virtual size 322122547200 exceeds the limit of 274877906944 bytes"},
		{"L1 table sized by the file, not the disk (256 MiB sparse file)", qcow2test.Image{Size: 1 << 30, L1Size: 32 << 20, FileSize: 256 << 20},
			RuleStructure, "qcow2: L1 table of 33554432 entries, but virtual size 1073741824 needs 2"},
		{"L1 table beyond the file", qcow2test.Image{Size: 1 << 30, L1Offset: 1 << 20, FileSize: 4096}, RuleStructure,
			"qcow2: L1 table at 1048576 (16 bytes) extends beyond the 4096-byte file"},
		{"L1 table in the header's cluster", qcow2test.Image{Size: 1 << 30, L1Offset: 512}, RuleStructure,
			"qcow2: L1 table at 512 is not a cluster of its own"},
		{"the 9.7 KB file of 32 MiB of non-zero output", bomb, RuleStructure,
			"qcow2: data cluster at 9728 (guest offset 512) is referenced twice"},
		{"L1 entries sharing an L2 table", qcow2test.Image{ClusterBits: cb, Size: 64 << 10,
			L1: map[int64]uint64{0: 1024, 1: 1024}, L2: map[int64]map[int64]uint64{1024: {0: qcow2test.L2Entry(1536)}},
			Data: map[int64][]byte{1536: data}}, RuleStructure,
			"qcow2: L2 table at 1024 (L1 entry 1) is referenced twice"},
		{"data cluster over the L1 table", qcow2test.Image{ClusterBits: cb, Size: 32 << 10,
			L1: map[int64]uint64{0: 1024}, L2: map[int64]map[int64]uint64{1024: {3: qcow2test.L2Entry(512)}}}, RuleStructure,
			"qcow2: data cluster at 512 (guest offset 1536) is referenced twice"},
		{"L2 table beyond the file", qcow2test.Image{ClusterBits: cb, Size: 32 << 10, L1: map[int64]uint64{0: 1 << 20}}, RuleStructure,
			"qcow2: L2 table at 1048576 (L1 entry 0) lies beyond the 520-byte file"},
		{"L2 table not cluster aligned", qcow2test.Image{ClusterBits: 12, Size: 1 << 20, L1: map[int64]uint64{0: 8192 + 512},
			FileSize: 16384}, RuleStructure, "qcow2: L2 table at 8704 (L1 entry 0) is not cluster aligned"},
		{"data cluster beyond the file", qcow2test.Image{ClusterBits: cb, Size: 32 << 10, L1: map[int64]uint64{0: 1024},
			L2: map[int64]map[int64]uint64{1024: {0: qcow2test.L2Entry(1 << 30)}}}, RuleStructure,
			"qcow2: data cluster at 1073741824 (guest offset 0) lies beyond the 1536-byte file"},
		{"compressed clusters out of order", qcow2test.Image{ClusterBits: cb, Size: 32 << 10, L1: map[int64]uint64{0: 1024},
			L2:   map[int64]map[int64]uint64{1024: {0: qcow2test.CompressedEntry(1536+100, 1, cb), 1: qcow2test.CompressedEntry(1536, 1, cb)}},
			Data: map[int64][]byte{1536 + 100: deflated(text)}}, RuleStructure,
			"qcow2: compressed cluster at 1536 (guest offset 512) does not follow the previous one at 1636; compressed clusters must be stored in guest order, as qemu-img convert -c writes them"},
		{"compressed cluster inside the L2 table", qcow2test.Image{ClusterBits: cb, Size: 32 << 10, L1: map[int64]uint64{0: 1024},
			L2: map[int64]map[int64]uint64{1024: {0: qcow2test.CompressedEntry(1024+8, 1, cb)}}}, RuleStructure,
			"qcow2: compressed cluster at 1032 (guest offset 0) lies in a cluster the image uses for a table or a data cluster"},
		{"zstd cluster declaring a 1 GiB window", qcow2test.Image{Version: 3, Compression: compressionZstd, ClusterBits: cb, Size: 32 << 10,
			L1: map[int64]uint64{0: 1024}, L2: map[int64]map[int64]uint64{1024: {0: qcow2test.CompressedEntry(1536, 2, cb)}},
			Data: map[int64][]byte{1536: zstdFrameDeclaring(20, text)}}, RuleZstdWindow,
			"qcow2: a compressed cluster declares a zstd window of 1073741824 bytes, over the limit of 134217728"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "hostile.qcow2")
			if err := tc.img.WriteFile(path); err != nil {
				t.Fatal(err)
			}
			var before runtime.MemStats
			runtime.ReadMemStats(&before)
			_, err := convertFile(t, path, testLimits)
			var after runtime.MemStats
			runtime.ReadMemStats(&after)
			var refused *RefusedError
			if !errors.As(err, &refused) || refused.Rule != tc.rule || err.Error() != tc.want {
				t.Fatalf("err = %v (%#v)\nwant %s", err, refused, tc.want)
			}
			// Two clusters, an L2 table, a cluster of L1 entries and the bitmaps: far below
			// the 512 MiB the 256 MiB file made the reader allocate before.
			if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 4<<20 {
				t.Errorf("allocated %d bytes", alloc)
			}
		})
	}
}

// The same crafts, made honest, convert: the refusals above come from the hostile part alone.
func TestCraftedImagesConvert(t *testing.T) {
	const cb = 9
	data := bytes.Repeat([]byte{0xa5}, 512)
	text := bytes.Repeat([]byte("banlieue "), 57)[:512]
	img := qcow2test.Image{ClusterBits: cb, Size: 64<<10 + 100, L1: map[int64]uint64{0: 1024, 1: 1536},
		L2: map[int64]map[int64]uint64{
			1024: {0: qcow2test.L2Entry(2048), 1: qcow2test.CompressedEntry(2560, 1, cb), 2: qcow2test.CompressedEntry(2560+300, 2, cb), 5: 1},
			1536: {0: qcow2test.L2Entry(3584)},
		},
		Data: map[int64][]byte{2048: data, 2560: deflated(text), 2560 + 300: deflated(data), 3584: text[:100]},
	}
	path := filepath.Join(t.TempDir(), "honest.qcow2")
	if err := img.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	got, err := convertFile(t, path, testLimits)
	if err != nil {
		t.Fatal(err)
	}
	want := make([]byte, 64<<10+100)
	copy(want, data)
	copy(want[512:], text)
	copy(want[1024:], data)
	copy(want[32<<10:], text[:100])
	if !bytes.Equal(got, want) {
		t.Errorf("converted %d bytes, not the %d expected", len(got), len(want))
	}
}

// An L1 table a real image needs can be large (512-byte clusters map 32 KiB an entry: 8 MiB
// of L1 for 32 GiB); it is read a cluster at a time, never allocated whole.
func TestLargeL1IsReadInPieces(t *testing.T) {
	path := filepath.Join(t.TempDir(), "large-l1.qcow2")
	if err := (qcow2test.Image{ClusterBits: 9, Size: 32 << 30}).WriteFile(path); err != nil {
		t.Fatal(err)
	}
	in, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = in.Close() }() // read only: closing it loses nothing
	fi, _ := in.Stat()
	out, err := os.Create(filepath.Join(t.TempDir(), "out.raw"))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = out.Close() }() // only its size is read back
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	img, err := Open(in, fi.Size(), testLimits)
	if err == nil {
		err = img.ConvertTo(context.Background(), out)
	}
	runtime.ReadMemStats(&after)
	if err != nil {
		t.Fatal(err)
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 1<<20 {
		t.Errorf("allocated %d bytes for an L1 table of %d", alloc, fi.Size()-512)
	}
	if st, _ := out.Stat(); st.Size() != 32<<30 {
		t.Errorf("output of %d bytes", st.Size())
	}
}
