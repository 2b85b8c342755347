package iso9660

import (
	"encoding/binary"
	"time"
)

// Volume descriptor types (ECMA-119 8.1.1).
const (
	typePrimary       = 1
	typeSupplementary = 2
	typeTerminator    = 255
)

// standardID marks every volume descriptor (8.1.2).
const standardID = "CD001"

// jolietEscape declares UCS-2 Level 3 in a supplementary descriptor's escape
// sequences field, the Joliet marker.
const jolietEscape = "%/E"

// encodeHead renders every sector before the first file extent.
func encodeHead(l *layout, label string, stamp time.Time) []byte {
	end := int64(l.sectors)
	if len(l.files) > 0 {
		end = int64(l.files[0].extent)
	}
	head := make([]byte, 0, end*SectorSize)
	head = append(head, make([]byte, 16*SectorSize)...) // system area (6.2.1)
	head = append(head, volumeDescriptor(l, primaryTree, label, stamp)...)
	head = append(head, volumeDescriptor(l, jolietTree, label, stamp)...)
	head = append(head, terminator()...)
	for t := range numTrees {
		head = append(head, encodePathTable(l, t, binary.LittleEndian)...)
		head = append(head, encodePathTable(l, t, binary.BigEndian)...)
	}
	for t := range numTrees {
		for _, d := range l.dirs {
			head = append(head, encodeDirectory(d, t, stamp)...)
		}
	}
	return head
}

// volumeDescriptor renders the primary (8.4) or, for the Joliet tree, the
// supplementary (8.5) volume descriptor. Both share one layout; the Joliet
// one records its identifiers in UCS-2.
func volumeDescriptor(l *layout, t tree, label string, stamp time.Time) []byte {
	b := make([]byte, SectorSize)
	text := putPadded
	b[0] = typePrimary
	if t == jolietTree {
		b[0] = typeSupplementary
		text = func(field []byte, s string) { putPaddedUCS2(field, jolietIdentifier(s)) }
		copy(b[88:120], jolietEscape)
	}
	copy(b[1:6], standardID)
	b[6] = 1 // volume descriptor version
	text(b[8:40], "")
	text(b[40:72], label)
	putBoth32(b[80:], l.sectors)
	putBoth16(b[120:], 1) // volume set size
	putBoth16(b[124:], 1) // volume sequence number
	putBoth16(b[128:], SectorSize)
	putBoth32(b[132:], l.pathTableSize[t])
	binary.LittleEndian.PutUint32(b[140:], l.lPathTable[t])
	binary.BigEndian.PutUint32(b[148:], l.mPathTable[t])
	root := l.dirs[0]
	putDirRecord(b[156:190], []byte{0}, root.extent[t], root.size[t], flagDirectory, stamp)
	text(b[190:318], "")          // volume set identifier
	text(b[318:446], "")          // publisher identifier
	text(b[446:574], "")          // data preparer identifier
	text(b[574:702], "")          // application identifier
	text(b[702:739], "")          // copyright file identifier
	text(b[739:776], "")          // abstract file identifier
	text(b[776:813], "")          // bibliographic file identifier
	putVolumeDate(b[813:], stamp) // creation
	putVolumeDate(b[830:], stamp) // modification
	putUnsetVolumeDate(b[847:])   // expiration
	putUnsetVolumeDate(b[864:])   // effective
	b[881] = 1                    // file structure version
	return b
}

// terminator renders the volume descriptor set terminator (8.3).
func terminator() []byte {
	b := make([]byte, SectorSize)
	b[0] = typeTerminator
	copy(b[1:6], standardID)
	b[6] = 1
	return b
}
