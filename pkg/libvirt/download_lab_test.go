package libvirt

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"hash"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// digestObserver hashes a download as it arrives, holes as the zeros they stand for.
type digestObserver struct {
	h            hash.Hash
	data, holes  int64
	zero         [64 << 10]byte
	holeMessages int
	dataMessages int
}

func (d *digestObserver) Data(p []byte) {
	d.h.Write(p)
	d.data += int64(len(p))
	d.dataMessages++
}

func (d *digestObserver) Hole(n int64) {
	d.holes += n
	d.holeMessages++
	for n > 0 {
		k := min(n, int64(len(d.zero)))
		d.h.Write(d.zero[:k])
		n -= k
	}
}

// TestDownloadObservedDigestLab downloads a sparse volume from a real libvirtd (host a of
// hack/migration-lab.sh) bounded by its capacity: the observer's digest of the stream is the
// source's sha256 without reading the destination again, holes arrive as holes and stay
// unallocated; a limit one byte short of the capacity stops the download with
// ErrDownloadOverLimit and leaves the connection usable.
func TestDownloadObservedDigestLab(t *testing.T) {
	l := needMigrationLab(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	name := labName("export-")
	h := &migrationHost{name: "a", c: l.dial(t, l.a), dir: "/var/lib/libvirt/images/" + name}
	pool, err := h.c.StoragePoolCreateXML(ctx, fmt.Sprintf(`<pool type='dir'><name>%s</name><target><path>%s</path></target></pool>`, name, h.dir), 1) // VIR_STORAGE_POOL_CREATE_WITH_BUILD
	if err != nil {
		t.Fatal(err)
	}
	h.pool = pool
	t.Cleanup(func() { cleanupMigrationHost(t, l, h, name) })

	const size = 64 << 20
	src, err := os.Create(filepath.Join(t.TempDir(), "disk.raw"))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = src.Close() }()
	chunk := make([]byte, 1<<20)
	for _, off := range []int64{0, 20 << 20, size - 1<<20} {
		_, _ = rand.Read(chunk)
		if _, err := src.WriteAt(chunk, off); err != nil {
			t.Fatal(err)
		}
	}
	if err := src.Truncate(size); err != nil {
		t.Fatal(err)
	}
	vol := createVol(t, h.c, pool, "disk.raw", size)
	if err := h.c.StorageVolUploadSparse(ctx, vol, src, nil); err != nil {
		t.Fatal(err)
	}
	info, err := h.c.StorageVolGetInfo(ctx, vol)
	if err != nil || info.Capacity != size {
		t.Fatalf("volume info %+v, %v", info, err)
	}

	dst, err := os.Create(filepath.Join(t.TempDir(), "export.raw"))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = dst.Close() }()
	obs := &digestObserver{h: sha256.New()}
	n, err := h.c.StorageVolDownloadObserved(ctx, vol, dst, DownloadOptions{Limit: int64(info.Capacity), Observer: obs})
	if err != nil || n != size {
		t.Fatalf("download = %d, %v; want %d bytes", n, err, size)
	}
	if got, want := [32]byte(obs.h.Sum(nil)), fileHash(t, src.Name()); got != want {
		t.Fatalf("observed digest %x, source %x", got, want)
	}
	if got := fileHash(t, dst.Name()); got != fileHash(t, src.Name()) {
		t.Fatal("the destination differs from the source")
	}
	if obs.data+obs.holes != size || obs.holeMessages == 0 || obs.data > 3<<20+1<<20 {
		t.Fatalf("observer saw %d data bytes in %d messages and %d hole bytes in %d messages; want holes for the unwritten %d MiB",
			obs.data, obs.dataMessages, obs.holes, obs.holeMessages, (size-3<<20)>>20)
	}
	if a := allocated(t, dst.Name()); a > 4<<20 {
		t.Fatalf("the destination allocates %d bytes: holes were written as data", a)
	}

	short, err := os.Create(filepath.Join(t.TempDir(), "short.raw"))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = short.Close() }()
	n, err = h.c.StorageVolDownloadObserved(ctx, vol, short, DownloadOptions{Limit: size - 1})
	if !errors.Is(err, ErrDownloadOverLimit) || n >= size {
		t.Fatalf("download with a short limit = %d, %v; want ErrDownloadOverLimit", n, err)
	}
	// The aborted stream ended on both sides: the same connection answers at once.
	if _, err := h.c.StorageVolGetInfo(ctx, vol); err != nil {
		t.Fatalf("the connection after an aborted download: %v", err)
	}
}
