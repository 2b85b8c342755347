package libvirt

import (
	"errors"
	"os"
	"syscall"
)

// lseek whence values for sparse files (Linux <unistd.h>).
const (
	seekData = 3
	seekHole = 4
)

// walkExtents calls fn for each data and hole extent of f in [0, size), in order, using
// SEEK_DATA/SEEK_HOLE so holes are found without reading them.
func walkExtents(f *os.File, size int64, fn func(off, n int64, data bool) error) error {
	for off := int64(0); off < size; {
		start, err := f.Seek(off, seekData)
		if errors.Is(err, syscall.ENXIO) {
			start = size // only a hole remains
		} else if err != nil {
			return err
		}
		start = min(start, size)
		if start > off {
			if err := fn(off, start-off, false); err != nil {
				return err
			}
			off = start
			continue
		}
		end, err := f.Seek(off, seekHole)
		if err != nil {
			return err
		}
		end = min(end, size)
		if err := fn(off, end-off, true); err != nil {
			return err
		}
		off = end
	}
	return nil
}
