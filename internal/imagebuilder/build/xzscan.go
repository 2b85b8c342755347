package build

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
)

// checkXZ refuses an xz file that declares, in any block of any of its streams, an LZMA2
// dictionary over maxDict. The decoder (github.com/ulikunitz/xz) allocates each block's
// dictionary as the block header declares it, and its ReaderConfig.DictCap is only a minimum,
// so nothing else stops a 64-byte file from making it allocate 4 GiB. The walk follows the
// .xz format: stream header, blocks (header, LZMA2 chunks, padding, check), index, footer,
// stream padding, and again for each concatenated stream. It skips the compressed data, so it
// costs a few bytes read per 64 KiB chunk.
func checkXZ(r io.ReaderAt, maxDict int64) error {
	s := &scanner{r: r}
	block := 0
	for {
		streamBlocks := 0
		hdr, err := s.read(12)
		if err == io.EOF && s.off > 0 {
			return nil // the end, after a stream and its padding
		}
		if err != nil {
			return fmt.Errorf("xz stream header: %w", err)
		}
		if !bytes.Equal(hdr[:6], magicXZ) || hdr[6] != 0 || hdr[7]&0xf0 != 0 {
			return fmt.Errorf("xz: no stream header at byte %d", s.off-12)
		}
		checkSize := xzCheckSize(hdr[7] & 0x0f)
		for {
			b, err := s.must(1)
			if err != nil {
				return fmt.Errorf("xz block header: %w", err)
			}
			if b[0] == 0 { // the index indicator: the stream's blocks are done
				break
			}
			block++
			streamBlocks++
			start := s.off - 1
			if err := checkXZBlockHeader(s, int(b[0]), block, maxDict); err != nil {
				return err
			}
			if err := skipLZMA2(s); err != nil {
				return fmt.Errorf("xz block %d: %w", block, err)
			}
			s.skip((4-(s.off-start)%4)%4 + checkSize) // block padding, then the check
		}
		if err := skipXZIndexAndFooter(s, streamBlocks); err != nil {
			return err
		}
		// Stream padding: groups of four zero bytes, then the end or another stream.
		for {
			p, err := s.read(4)
			if err == io.EOF {
				return nil
			}
			if err != nil {
				return fmt.Errorf("xz stream padding: %w", err)
			}
			if !bytes.Equal(p, []byte{0, 0, 0, 0}) {
				s.off -= 4
				break
			}
		}
	}
}

// xzCheckSize is the length of a block's check for the stream's check type.
func xzCheckSize(t byte) int64 {
	switch {
	case t == 0:
		return 0
	case t <= 3:
		return 4
	case t <= 6:
		return 8
	case t <= 9:
		return 16
	case t <= 12:
		return 32
	default:
		return 64
	}
}

// checkXZBlockHeader reads the block header whose first byte, sizeByte, was read, and refuses
// an LZMA2 dictionary over maxDict.
func checkXZBlockHeader(s *scanner, sizeByte, block int, maxDict int64) error {
	size := (sizeByte + 1) * 4 // at most 1024, within a scanner page
	rest, err := s.must(size - 1)
	if err != nil {
		return fmt.Errorf("xz block %d header: %w", block, err)
	}
	h := append([]byte{byte(sizeByte)}, rest...)
	flags := h[1]
	if flags&0x3c != 0 {
		return fmt.Errorf("xz block %d header: reserved flags %#x", block, flags)
	}
	p := bytes.NewReader(h[2 : size-4])
	for _, present := range []bool{flags&0x40 != 0, flags&0x80 != 0} { // compressed, uncompressed size
		if present {
			if _, err := binary.ReadUvarint(p); err != nil {
				return fmt.Errorf("xz block %d header: size field: %w", block, err)
			}
		}
	}
	lzma2 := false
	for range int(flags&3) + 1 {
		id, err := binary.ReadUvarint(p)
		if err != nil {
			return fmt.Errorf("xz block %d header: filter id: %w", block, err)
		}
		n, err := binary.ReadUvarint(p)
		if err != nil || n > uint64(p.Len()) {
			return fmt.Errorf("xz block %d header: filter properties overrun the header", block)
		}
		props := make([]byte, n)
		_, _ = p.Read(props) // n <= p.Len(), checked above
		if id != xzFilterLZMA2 {
			continue
		}
		if n != 1 {
			return fmt.Errorf("xz block %d header: LZMA2 properties of %d bytes", block, n)
		}
		dict, ok := lzma2DictSize(props[0])
		if !ok {
			return fmt.Errorf("xz block %d header: invalid LZMA2 dictionary size %#x", block, props[0])
		}
		if dict > maxDict {
			return refusedBy(FlagMaxXZDict, maxDict, fmt.Sprintf("xz block %d declares a dictionary of %s", block, quantityString(dict)))
		}
		lzma2 = true
	}
	if !lzma2 {
		return fmt.Errorf("xz block %d has no LZMA2 filter", block)
	}
	return nil
}

const xzFilterLZMA2 = 0x21

// lzma2DictSize decodes the LZMA2 dictionary size property: 2 or 3 times a power of two from
// 4 KiB, and 40 for 4 GiB - 1.
func lzma2DictSize(b byte) (int64, bool) {
	switch {
	case b > 40:
		return 0, false
	case b == 40:
		return 1<<32 - 1, true
	default:
		return int64(2|b&1) << (b/2 + 11), true
	}
}

// skipLZMA2 passes over the LZMA2 chunks of a block up to its end marker. A control byte of
// 1 or 2 opens an uncompressed chunk (two bytes of size - 1), one of 0x80 and above an LZMA
// chunk (three bytes of unpacked size, two of packed size - 1, and a properties byte from
// 0xc0); 0 ends the data.
func skipLZMA2(s *scanner) error {
	for {
		c, err := s.must(1)
		if err != nil {
			return err
		}
		switch ctl := c[0]; {
		case ctl == 0:
			return nil
		case ctl == 1 || ctl == 2:
			n, err := s.must(2)
			if err != nil {
				return err
			}
			s.skip(int64(binary.BigEndian.Uint16(n)) + 1)
		case ctl >= 0x80:
			hl := 4
			if ctl >= 0xc0 {
				hl = 5
			}
			h, err := s.must(hl)
			if err != nil {
				return err
			}
			s.skip(int64(binary.BigEndian.Uint16(h[2:4])) + 1)
		default:
			return fmt.Errorf("invalid LZMA2 chunk control byte %#x at byte %d", ctl, s.off-1)
		}
	}
}

// skipXZIndexAndFooter passes over the index, whose indicator byte was read, of a stream of
// blocks blocks, and the stream footer.
func skipXZIndexAndFooter(s *scanner, blocks int) error {
	start := s.off - 1
	uvarint := func() (uint64, error) {
		var x uint64
		for i := range 9 {
			b, err := s.must(1)
			if err != nil {
				return 0, err
			}
			x |= uint64(b[0]&0x7f) << (7 * i)
			if b[0] < 0x80 {
				return x, nil
			}
		}
		return 0, fmt.Errorf("xz index: varint too long at byte %d", s.off)
	}
	records, err := uvarint()
	if err != nil {
		return fmt.Errorf("xz index: %w", err)
	}
	if records != uint64(blocks) { // the decoder refuses it too, after reading all the records
		return fmt.Errorf("xz index: %d records for %d blocks", records, blocks)
	}
	for range 2 * records {
		if _, err := uvarint(); err != nil {
			return fmt.Errorf("xz index: %w", err)
		}
	}
	s.skip((4-(s.off-start)%4)%4 + 4) // index padding, CRC32
	f, err := s.must(12)
	if err != nil {
		return fmt.Errorf("xz stream footer: %w", err)
	}
	if !bytes.Equal(f[10:], []byte("YZ")) {
		return fmt.Errorf("xz: no stream footer at byte %d", s.off-12)
	}
	return nil
}
