package libvirt

import (
	"context"
	"fmt"
	"io"
	"os"

	"banlieue.io/banlieue/pkg/libvirt/internal/wire"
	"banlieue.io/banlieue/pkg/libvirt/internal/xdr"
)

// storageVolUploadSparseStream is VIR_STORAGE_VOL_UPLOAD_SPARSE_STREAM.
const storageVolUploadSparseStream = 1 << 0

func uploadArgs(v StorageVol, length int64, flags uint32) func(*xdr.Encoder) {
	return func(e *xdr.Encoder) {
		encodeVol(e, v)
		e.Uint64(0) // offset
		e.Uint64(uint64(length))
		e.Uint32(flags)
	}
}

// StorageVolUpload writes exactly length bytes from src into the volume from offset 0.
// Memory use is one packet buffer whatever the length. A source that ends early aborts the
// upload (libvirtd discards it) and returns an error. progress may be nil.
func (c *Client) StorageVolUpload(ctx context.Context, v StorageVol, src io.Reader, length int64, progress Progress) error {
	release, err := c.acquireUpload(ctx)
	if err != nil {
		return fmt.Errorf("libvirt: upload to volume %s: %w", v.Name, err)
	}
	defer release()
	s, err := c.openStream(ctx, procStorageVolUpload, uploadArgs(v, length, 0))
	if err != nil {
		return err
	}
	defer s.close()
	u := uploader{s: s, buf: make([]byte, wire.MinFrame+wire.MaxStreamData), progress: progress}
	if err := u.data(ctx, src, length); err != nil {
		return fmt.Errorf("libvirt: upload to volume %s: %w", v.Name, err)
	}
	return s.finish(ctx)
}

// StorageVolUploadSparse uploads the whole of f, sending the file's holes as stream holes
// (VIR_STORAGE_VOL_UPLOAD_SPARSE_STREAM) so they are neither read, transferred nor
// allocated on the host. Create the volume with allocation 0 to keep it sparse.
func (c *Client) StorageVolUploadSparse(ctx context.Context, v StorageVol, f *os.File, progress Progress) error {
	return c.StorageVolUploadSparseObserved(ctx, v, f, progress, nil)
}

// UploadObserver is told everything a sparse upload sends, in stream order: together its calls
// describe every byte of the volume exactly as the host received it, whatever happens to the
// file meanwhile. That makes it the place to checksum an upload without a second read, which
// would see the file as it is then, not the bytes that were sent.
type UploadObserver interface {
	// Data is called with each chunk of data after it was sent; p is reused once Data returns.
	Data(p []byte)
	// Hole is called with the length of each hole after it was sent: that many zero bytes.
	Hole(n int64)
}

// StorageVolUploadSparseObserved is StorageVolUploadSparse telling obs (which may be nil) what
// it sends. obs runs on the uploading goroutine, so a slow observer slows the upload.
func (c *Client) StorageVolUploadSparseObserved(ctx context.Context, v StorageVol, f *os.File, progress Progress, obs UploadObserver) error {
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	release, err := c.acquireUpload(ctx)
	if err != nil {
		return fmt.Errorf("libvirt: upload to volume %s: %w", v.Name, err)
	}
	defer release()
	size := fi.Size()
	s, err := c.openStream(ctx, procStorageVolUpload, uploadArgs(v, size, storageVolUploadSparseStream))
	if err != nil {
		return err
	}
	defer s.close()
	u := uploader{s: s, buf: make([]byte, wire.MinFrame+wire.MaxStreamData), progress: progress, observer: obs}
	err = walkExtents(f, size, func(off, n int64, data bool) error {
		if !data {
			return u.hole(ctx, n)
		}
		return u.data(ctx, io.NewSectionReader(f, off, n), n)
	})
	if err != nil {
		return fmt.Errorf("libvirt: sparse upload to volume %s: %w", v.Name, err)
	}
	return s.finish(ctx)
}

type uploader struct {
	s        *stream
	buf      []byte
	done     int64
	progress Progress
	observer UploadObserver // nil: nobody watches
}

// data streams n bytes of src as Stream/Continue packets.
func (u *uploader) data(ctx context.Context, src io.Reader, n int64) error {
	for n > 0 {
		if err := u.check(ctx); err != nil {
			return err
		}
		k := min(n, wire.MaxStreamData)
		if _, err := io.ReadFull(src, u.buf[wire.MinFrame:wire.MinFrame+k]); err != nil {
			return fmt.Errorf("reading source at byte %d: %w", u.done, err)
		}
		if err := u.s.send(ctx, u.buf[:wire.MinFrame+k], wire.Stream, wire.Continue); err != nil {
			return err
		}
		if u.observer != nil {
			u.observer.Data(u.buf[wire.MinFrame : wire.MinFrame+k])
		}
		n -= k
		u.advance(k)
	}
	return nil
}

func (u *uploader) hole(ctx context.Context, n int64) error {
	if err := u.check(ctx); err != nil {
		return err
	}
	if err := u.s.sendHole(ctx, n); err != nil {
		return err
	}
	if u.observer != nil {
		u.observer.Hole(n)
	}
	u.advance(n)
	return nil
}

func (u *uploader) check(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return u.s.pollError()
}

func (u *uploader) advance(n int64) {
	u.done += n
	if u.progress != nil {
		u.progress(u.done)
	}
}
