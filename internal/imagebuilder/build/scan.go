package build

import (
	"errors"
	"fmt"
	"io"
)

// scanner walks a compressed container's framing in a file, reading the few header bytes it
// needs and skipping over compressed data, so a declared dictionary or window is seen before
// any decoder allocates it (xzscan.go, zstdscan.go). It reads through ReaderAt, leaving the
// file's offset for the decoder, a page at a time: a chunk header is a few bytes every 64 KiB
// or so, and a file of tiny chunks is still read in pages rather than a syscall per header.
type scanner struct {
	r      io.ReaderAt
	off    int64  // where the walk is
	buf    []byte // the file from bufOff
	bufOff int64
	page   [4096]byte
}

// errTruncated is the end of the file where the framing needs more.
var errTruncated = errors.New("the stream ends in the middle of its framing")

// read returns the next n (at most a page) bytes; io.EOF when the file ends exactly here.
func (s *scanner) read(n int) ([]byte, error) {
	if s.off < s.bufOff || s.off+int64(n) > s.bufOff+int64(len(s.buf)) {
		m, err := s.r.ReadAt(s.page[:], s.off)
		if err != nil && !errors.Is(err, io.EOF) {
			return nil, err
		}
		s.buf, s.bufOff = s.page[:m], s.off
	}
	switch avail := s.bufOff + int64(len(s.buf)) - s.off; {
	case avail >= int64(n):
		b := s.buf[s.off-s.bufOff:][:n]
		s.off += int64(n)
		return b, nil
	case avail == 0:
		return nil, io.EOF
	default:
		return nil, fmt.Errorf("at byte %d: %w", s.off, errTruncated)
	}
}

// must is read where the end of the file is no place for the stream to end.
func (s *scanner) must(n int) ([]byte, error) {
	b, err := s.read(n)
	if errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("at byte %d: %w", s.off, errTruncated)
	}
	return b, err
}

// skip passes over n bytes of data; a stream cut short is found by the next read.
func (s *scanner) skip(n int64) { s.off += n }
