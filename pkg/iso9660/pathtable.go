package iso9660

import "encoding/binary"

// pathTableRecordLen is the length of the path table record of d in tree t
// (ECMA-119 9.4), padded to an even length.
func pathTableRecordLen(d *directory, t tree) int {
	n := len(d.ident[t])
	return 8 + n + n%2
}

// encodePathTable renders the path table of tree t in byte order o: type L
// is little-endian, type M big-endian (9.4.3, 9.4.4).
func encodePathTable(l *layout, t tree, o binary.ByteOrder) []byte {
	b := make([]byte, sectorsFor(int64(l.pathTableSize[t]))*SectorSize)
	off := 0
	for _, d := range l.dirs {
		ident := d.ident[t]
		b[off] = byte(len(ident))
		b[off+1] = 0 // extended attribute record length
		o.PutUint32(b[off+2:], d.extent[t])
		o.PutUint16(b[off+6:], d.parent.number)
		copy(b[off+8:], ident)
		off += pathTableRecordLen(d, t)
	}
	return b
}
