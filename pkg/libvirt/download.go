package libvirt

import (
	"context"
	"fmt"
	"io"
	"os"

	"banlieue.io/banlieue/pkg/libvirt/internal/wire"
	"banlieue.io/banlieue/pkg/libvirt/internal/xdr"
)

// storageVolDownloadSparseStream is VIR_STORAGE_VOL_DOWNLOAD_SPARSE_STREAM.
const storageVolDownloadSparseStream = 1 << 0

// maxHole bounds one hole message; a larger one cannot describe a real volume.
const maxHole = 1 << 62

// StorageVolDownload copies the whole volume into w, starting at w's current position, and
// returns the number of bytes covered. When w is an *os.File the download is sparse: libvirtd
// sends holes as holes and they are recreated by seeking, so they are never allocated.
// Other writers receive every byte, zeros included. progress may be nil.
func (c *Client) StorageVolDownload(ctx context.Context, v StorageVol, w io.Writer, progress Progress) (int64, error) {
	return c.StorageVolDownloadObserved(ctx, v, w, DownloadOptions{Progress: progress})
}

// StorageVolDownloadObserved is StorageVolDownload bounded by o.Limit and telling o.Observer
// what arrives (downloadopts.go).
func (c *Client) StorageVolDownloadObserved(ctx context.Context, v StorageVol, w io.Writer, o DownloadOptions) (int64, error) {
	progress := o.Progress
	file, sparse := w.(*os.File)
	var flags uint32
	if sparse {
		flags = storageVolDownloadSparseStream
	}
	s, err := c.openStream(ctx, procStorageVolDownload, func(e *xdr.Encoder) {
		encodeVol(e, v)
		e.Uint64(0) // offset
		e.Uint64(0) // length: to the end
		e.Uint32(flags)
	})
	if err != nil {
		return 0, err
	}
	defer s.close()

	var done int64
	trailingHole := false
	for {
		f, err := s.recv(ctx)
		if err != nil {
			return done, err
		}
		// libvirtd marks the end of data with an empty Stream/Continue (and would with
		// Stream/OK); the client then confirms with its own Stream/OK.
		eof := f.h.Type == wire.Stream && (f.h.Status == wire.OK || f.h.Status == wire.Continue && len(f.payload) == 0)
		switch {
		case eof:
			if trailingHole {
				// Seeking past the end does not extend a file; truncating does, sparsely.
				end, err := file.Seek(0, io.SeekCurrent)
				if err == nil {
					err = file.Truncate(end)
				}
				if err != nil {
					return done, fmt.Errorf("libvirt: download of volume %s: %w", v.Name, err)
				}
			}
			return done, s.finish(ctx)
		case f.h.Type == wire.Stream && f.h.Status == wire.Continue:
			if err := o.admit(done, int64(len(f.payload))); err != nil {
				return done, fmt.Errorf("libvirt: download of volume %s: %w", v.Name, err)
			}
			if _, err := w.Write(f.payload); err != nil {
				return done, fmt.Errorf("libvirt: download of volume %s: %w", v.Name, err)
			}
			if o.Observer != nil {
				o.Observer.Data(f.payload)
			}
			done += int64(len(f.payload))
			trailingHole = false
		case f.h.Type == wire.StreamHole && f.h.Status == wire.Continue && sparse:
			n, err := decodeHole(f.payload)
			if err != nil {
				return done, s.c.violation(err.Error())
			}
			if err := o.admit(done, n); err != nil {
				return done, fmt.Errorf("libvirt: download of volume %s: %w", v.Name, err)
			}
			if _, err := file.Seek(n, io.SeekCurrent); err != nil {
				return done, fmt.Errorf("libvirt: download of volume %s: %w", v.Name, err)
			}
			if o.Observer != nil {
				o.Observer.Hole(n)
			}
			done += n
			trailingHole = true
		case f.h.Status == wire.Error:
			s.ended = true
			return done, s.c.remoteError(wire.ProgramRemote, s.proc, f.payload)
		default:
			return done, s.c.violation(fmt.Sprintf("unexpected message (type %d, status %d) in %s stream", f.h.Type, f.h.Status, s.proc))
		}
		if progress != nil {
			progress(done)
		}
	}
}

func decodeHole(p []byte) (int64, error) {
	d := xdr.NewDecoder(p)
	n := d.Int64()
	d.Uint32() // flags
	if err := d.Finish(); err != nil {
		return 0, fmt.Errorf("stream hole: %v", err)
	}
	if n < 0 || n > maxHole {
		return 0, fmt.Errorf("stream hole length %d out of range", n)
	}
	return n, nil
}
