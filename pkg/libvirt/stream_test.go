package libvirt

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"banlieue.io/banlieue/pkg/libvirt/internal/wire"
)

func TestUploadDownloadDense(t *testing.T) {
	l := needLab(t)
	c := l.dial(t, "qemu:///system")
	ctx := testContext(t)
	pool := testPool(t, l, c)
	const size = 5*wire.MaxStreamData + 12345 // not a whole number of packets
	data := make([]byte, size)
	_, _ = rand.Read(data)
	vol := createVol(t, c, pool, "dense.raw", size)

	var progress []int64
	if err := c.StorageVolUpload(ctx, vol, bytes.NewReader(data), size, func(n int64) { progress = append(progress, n) }); err != nil {
		t.Fatal(err)
	}
	if len(progress) != 6 || progress[5] != size {
		t.Fatalf("progress = %v", progress)
	}
	onHost, err := os.ReadFile(vol.Key)
	if err != nil || !bytes.Equal(onHost, data) {
		t.Fatalf("volume on the host differs from the upload (%v)", err)
	}
	var buf bytes.Buffer // not a file: a dense download
	n, err := c.StorageVolDownload(ctx, vol, &buf, nil)
	if err != nil || n != size || !bytes.Equal(buf.Bytes(), data) {
		t.Fatalf("download: %d bytes, %v; identical %v", n, err, bytes.Equal(buf.Bytes(), data))
	}
}

// A source shorter than announced aborts the upload with a clear error and leaves the
// session usable.
func TestUploadShortSourceAborts(t *testing.T) {
	l := needLab(t)
	c := l.dial(t, "qemu:///system")
	ctx := testContext(t)
	pool := testPool(t, l, c)
	vol := createVol(t, c, pool, "short.raw", 1<<20)
	err := c.StorageVolUpload(ctx, vol, strings.NewReader("only a few bytes"), 1<<20, nil)
	if err == nil || !errors.Is(err, io.ErrUnexpectedEOF) || !strings.Contains(err.Error(), "reading source") {
		t.Fatalf("err = %v", err)
	}
	if _, err := c.LibVersion(ctx); err != nil {
		t.Fatalf("session unusable after an aborted upload: %v", err)
	}
	// A cancelled upload is aborted the same way.
	cctx, cancel := context.WithCancel(ctx)
	err = c.StorageVolUpload(cctx, vol, io.MultiReader(strings.NewReader("x"), cancelOnRead{cancel}), 1<<20, nil)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled upload: %v", err)
	}
	if _, err := c.LibVersion(ctx); err != nil {
		t.Fatalf("session unusable after a cancelled upload: %v", err)
	}
}

// cancelOnRead cancels a context when read, then supplies zeros.
type cancelOnRead struct{ cancel context.CancelFunc }

func (r cancelOnRead) Read(p []byte) (int, error) {
	r.cancel()
	clear(p)
	return len(p), nil
}

func allocated(t *testing.T, path string) int64 {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		t.Fatal(err)
	}
	return st.Blocks * 512
}

func fileHash(t *testing.T, path string) [32]byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }() // read only: closing it loses nothing
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		t.Fatal(err)
	}
	return [32]byte(h.Sum(nil))
}

// A 256 MiB file holding 3 MiB of data moves as data plus hole messages, stays sparse on the
// host, and downloads back into a sparse, identical file.
func TestUploadDownloadSparse(t *testing.T) {
	l := needLab(t)
	c := l.dial(t, "qemu:///system")
	ctx := testContext(t)
	pool := testPool(t, l, c)

	const size = 256 << 20
	src := filepath.Join(t.TempDir(), "sparse.raw")
	f, err := os.Create(src)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }() // the test reads its content back through another descriptor
	chunk := make([]byte, 1<<20)
	for _, off := range []int64{0, 100 << 20, size - 1<<20} { // data at start, middle, end
		_, _ = rand.Read(chunk)
		if _, err := f.WriteAt(chunk, off); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Truncate(size); err != nil {
		t.Fatal(err)
	}
	const dataBytes = 3 << 20
	if a := allocated(t, src); a > dataBytes+(1<<20) {
		t.Skipf("the temp filesystem does not keep files sparse (%d bytes allocated)", a)
	}

	vol := createVol(t, c, pool, "sparse.raw", size)
	var last int64
	if err := c.StorageVolUploadSparse(ctx, vol, f, func(n int64) { last = n }); err != nil {
		t.Fatal(err)
	}
	if last != size {
		t.Fatalf("progress ended at %d, want %d", last, size)
	}
	if a := allocated(t, vol.Key); a > dataBytes+(1<<20) {
		t.Fatalf("volume allocates %d bytes on the host; holes were written as data", a)
	}
	if fileHash(t, vol.Key) != fileHash(t, src) {
		t.Fatal("volume content differs from the source")
	}
	if info, err := c.StorageVolGetInfo(ctx, vol); err != nil || info.Capacity != size {
		t.Fatalf("storageVolInfo = %+v, %v", info, err)
	}

	dst, err := os.Create(filepath.Join(t.TempDir(), "download.raw"))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = dst.Close() }() // the test reads its content back through another descriptor
	n, err := c.StorageVolDownload(ctx, vol, dst, nil)
	if err != nil || n != size {
		t.Fatalf("download = %d, %v", n, err)
	}
	if fileHash(t, dst.Name()) != fileHash(t, src) {
		t.Fatal("downloaded content differs")
	}
	if a := allocated(t, dst.Name()); a > dataBytes+(1<<20) {
		t.Fatalf("download allocates %d bytes; holes were written as data", a)
	}
}
