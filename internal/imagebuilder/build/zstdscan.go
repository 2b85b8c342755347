package build

import (
	"encoding/binary"
	"fmt"
	"io"
)

// checkZstd refuses a zstd file with a frame that declares a window over maxWindow, naming
// the frame and its window. The decoder is also given the limit (WithDecoderMaxWindow), which
// is what bounds its memory; this walk is what tells the user the value the source declared.
// It follows RFC 8878's framing as the decoder does: frames and skippable frames back to
// back, each frame a header, blocks up to the last one, and an optional checksum.
func checkZstd(r io.ReaderAt, maxWindow int64) error {
	s := &scanner{r: r}
	for frame := 1; ; frame++ {
		m, err := s.read(4)
		if err == io.EOF && s.off > 0 {
			return nil
		}
		if err != nil {
			return fmt.Errorf("zstd frame %d: %w", frame, err)
		}
		switch magic := binary.LittleEndian.Uint32(m); {
		case magic&0xfffffff0 == 0x184d2a50: // a skippable frame: size, then data
			n, err := s.must(4)
			if err != nil {
				return fmt.Errorf("zstd frame %d: %w", frame, err)
			}
			s.skip(int64(binary.LittleEndian.Uint32(n)))
			continue
		case magic != 0xfd2fb528:
			return fmt.Errorf("zstd frame %d: no frame magic at byte %d", frame, s.off-4)
		}
		window, checksum, err := zstdFrameHeader(s)
		if err != nil {
			return fmt.Errorf("zstd frame %d header: %w", frame, err)
		}
		if window > maxWindow {
			return refusedBy(FlagMaxZstdWindow, maxWindow, fmt.Sprintf("zstd frame %d declares a window of %s", frame, quantityString(window)))
		}
		if err := skipZstdBlocks(s); err != nil {
			return fmt.Errorf("zstd frame %d: %w", frame, err)
		}
		if checksum {
			s.skip(4)
		}
	}
}

// zstdFrameHeader reads a frame header after its magic number and returns the window the
// decoder needs: the window descriptor's, or for a single-segment frame its content size.
func zstdFrameHeader(s *scanner) (window int64, checksum bool, err error) {
	d, err := s.must(1)
	if err != nil {
		return 0, false, err
	}
	fhd := d[0]
	if fhd&0x08 != 0 {
		return 0, false, fmt.Errorf("reserved bit set in frame header descriptor %#x", fhd)
	}
	single := fhd&0x20 != 0
	if !single {
		wd, err := s.must(1)
		if err != nil {
			return 0, false, err
		}
		base := int64(1) << (10 + wd[0]>>3)
		window = base + base/8*int64(wd[0]&7)
	}
	s.skip([]int64{0, 1, 2, 4}[fhd&3]) // dictionary ID
	fcsSize := []int{0, 2, 4, 8}[fhd>>6]
	if fcsSize == 0 && single {
		fcsSize = 1
	}
	if single {
		b, err := s.must(fcsSize)
		if err != nil {
			return 0, false, err
		}
		var fcs uint64
		switch fcsSize {
		case 1:
			fcs = uint64(b[0])
		case 2:
			fcs = uint64(binary.LittleEndian.Uint16(b)) + 256
		case 4:
			fcs = uint64(binary.LittleEndian.Uint32(b))
		default:
			fcs = binary.LittleEndian.Uint64(b)
		}
		window = int64(min(fcs, 1<<62))
	} else {
		s.skip(int64(fcsSize))
	}
	return window, fhd&0x04 != 0, nil
}

// skipZstdBlocks passes over a frame's blocks: a three-byte header (last-block bit, type,
// size), then size bytes of raw or compressed data, or one byte repeated size times (RLE).
func skipZstdBlocks(s *scanner) error {
	for {
		b, err := s.must(3)
		if err != nil {
			return err
		}
		h := uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16
		size := int64(h >> 3)
		switch h >> 1 & 3 {
		case 0, 2: // raw, compressed
			s.skip(size)
		case 1: // RLE
			s.skip(1)
		default:
			return fmt.Errorf("reserved block type at byte %d", s.off-3)
		}
		if h&1 != 0 {
			return nil
		}
	}
}
