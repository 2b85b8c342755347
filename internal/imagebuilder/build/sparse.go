package build

import (
	"io"
	"os"
)

// sparseChunk is the granularity at which zeros are skipped: the filesystem block size of
// common filesystems times sixteen, so skipping saves real allocations.
const sparseChunk = 64 << 10

// sparseWriter appends to a file at off, seeking over all-zero chunks instead of writing them,
// so zeros in a raw image become holes. finish must run to extend the file over a trailing hole.
type sparseWriter struct {
	f   *os.File
	off int64
}

func (w *sparseWriter) Write(p []byte) (int, error) {
	written := 0
	for len(p) > 0 {
		// Align chunks to file offsets so a hole always covers whole blocks.
		n := min(len(p), int(sparseChunk-w.off%sparseChunk))
		if !allZero(p[:n]) {
			if _, err := w.f.WriteAt(p[:n], w.off); err != nil {
				return written, err
			}
		}
		w.off += int64(n)
		written += n
		p = p[n:]
	}
	return written, nil
}

func (w *sparseWriter) finish() error { return w.f.Truncate(w.off) }

// copySparse copies r into f from offset 0, holes for zeros, and returns the length.
func copySparse(f *os.File, r io.Reader) (int64, error) {
	w := &sparseWriter{f: f}
	if _, err := io.CopyBuffer(w, r, make([]byte, 1<<20)); err != nil {
		return w.off, err
	}
	return w.off, w.finish()
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}
