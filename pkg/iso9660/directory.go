package iso9660

import "time"

const (
	// dirRecordFixedLen is the directory record length before the file
	// identifier (ECMA-119 9.1).
	dirRecordFixedLen = 33
	flagDirectory     = 0x02 // file flags bit 1 (9.1.6)
)

// dirRecordLen is the length of a record with an identifier of n bytes,
// padded to an even length (9.1.12).
func dirRecordLen(n int) int {
	return dirRecordFixedLen + n + (n+1)%2
}

// directoryRecordLens lists the record lengths of d in tree t: ".", "..",
// then the entries.
func directoryRecordLens(d *directory, t tree) []int {
	lens := []int{dirRecordLen(1), dirRecordLen(1)}
	for _, f := range d.entries[t] {
		lens = append(lens, dirRecordLen(len(f.ident[t])))
	}
	return lens
}

// packRecords places records of the given lengths so that none crosses a
// sector boundary (6.8.1.1), and returns their offsets and the directory
// size, a whole number of sectors.
func packRecords(lens []int) (offsets []int, size int64) {
	off := 0
	for _, n := range lens {
		if off%SectorSize+n > SectorSize {
			off += SectorSize - off%SectorSize
		}
		offsets = append(offsets, off)
		off += n
	}
	return offsets, sectorsFor(int64(off)) * SectorSize
}

// encodeDirectory renders the extent of d in tree t.
func encodeDirectory(d *directory, t tree, stamp time.Time) []byte {
	offsets, size := packRecords(directoryRecordLens(d, t))
	b := make([]byte, size)
	// "." and ".." are identified by the bytes 0x00 and 0x01 (6.8.2.2).
	putDirRecord(b[offsets[0]:], []byte{0}, d.extent[t], d.size[t], flagDirectory, stamp)
	putDirRecord(b[offsets[1]:], []byte{1}, d.parent.extent[t], d.parent.size[t], flagDirectory, stamp)
	for i, f := range d.entries[t] {
		putDirRecord(b[offsets[i+2]:], f.ident[t], f.extent, uint32(len(f.data)), 0, stamp)
	}
	return b
}

// putDirRecord writes one directory record (9.1) at the start of b.
func putDirRecord(b []byte, ident []byte, extent, length uint32, flags byte, stamp time.Time) {
	n := dirRecordLen(len(ident))
	b[0] = byte(n)
	b[1] = 0 // extended attribute record length
	putBoth32(b[2:], extent)
	putBoth32(b[10:], length)
	putRecordingDate(b[18:], stamp)
	b[25] = flags
	b[26] = 0 // file unit size: not interleaved
	b[27] = 0 // interleave gap size
	putBoth16(b[28:], 1)
	b[32] = byte(len(ident))
	copy(b[33:], ident)
}
