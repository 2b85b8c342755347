package libvirt

import (
	"bytes"
	"crypto/rand"
	"os"
	"path/filepath"
	"testing"

	"banlieue.io/banlieue/pkg/libvirt/internal/wire"
)

// recorder rebuilds the volume from what an UploadObserver is told, holes as zeros.
type recorder struct {
	image       []byte
	off         int64
	data, holes int64
	calls       []bool // true for Data, false for Hole, in order
}

func (r *recorder) Data(p []byte) {
	copy(r.image[r.off:], p) // a Data past the end panics: the test fails loudly
	r.off += int64(len(p))
	r.data += int64(len(p))
	r.calls = append(r.calls, true)
}

func (r *recorder) Hole(n int64) {
	clear(r.image[r.off : r.off+n])
	r.off += n
	r.holes += n
	r.calls = append(r.calls, false)
}

// What the observer of a sparse upload is told is, byte for byte, the file and the volume the
// host wrote: data where the file has data, holes (as zeros) where it has holes, in order.
func TestUploadObserverSeesWhatTheHostGets(t *testing.T) {
	l := needLab(t)
	c := l.dial(t, "qemu:///system")
	ctx := testContext(t)
	pool := testPool(t, l, c)

	const size = 64 << 20
	src := filepath.Join(t.TempDir(), "observed.raw")
	f, err := os.Create(src)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }() // the test reads its content back through another descriptor
	if err := f.Truncate(size); err != nil {
		t.Fatal(err)
	}
	// Extents that are no whole number of packets, and data up to the last byte.
	for _, e := range []struct{ off, n int64 }{{0, 4*wire.MaxStreamData + 12345}, {20 << 20, 3 << 20}, {size - 100<<10, 100 << 10}} {
		chunk := make([]byte, e.n)
		_, _ = rand.Read(chunk)
		if _, err := f.WriteAt(chunk, e.off); err != nil {
			t.Fatal(err)
		}
	}
	if a := allocated(t, src); a > 8<<20 {
		t.Skipf("the temp filesystem does not keep files sparse (%d bytes allocated)", a)
	}

	vol := createVol(t, c, pool, "observed.raw", size)
	r := &recorder{image: make([]byte, size)}
	if err := c.StorageVolUploadSparseObserved(ctx, vol, f, nil, r); err != nil {
		t.Fatal(err)
	}
	if r.off != size || r.data+r.holes != size {
		t.Fatalf("observed %d bytes (%d data, %d holes), want %d", r.off, r.data, r.holes, size)
	}
	if r.holes == 0 || r.data > 8<<20 {
		t.Fatalf("observed %d data bytes and %d hole bytes: the holes were not sent as holes", r.data, r.holes)
	}
	for i := 1; i < len(r.calls); i++ {
		if !r.calls[i] && !r.calls[i-1] {
			t.Fatalf("two holes in a row at call %d: %v", i, r.calls)
		}
	}
	file, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(r.image, file) {
		t.Fatal("the observed bytes differ from the file's")
	}
	onHost, err := os.ReadFile(vol.Key)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(r.image, onHost) {
		t.Fatal("the observed bytes differ from the volume's on the host")
	}
}
