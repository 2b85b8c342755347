package iso9660

import (
	"encoding/binary"
	"fmt"
	"time"
)

// putBoth16 writes v in both-byte orders, little-endian first (ECMA-119 7.2.3).
func putBoth16(b []byte, v uint16) {
	binary.LittleEndian.PutUint16(b, v)
	binary.BigEndian.PutUint16(b[2:], v)
}

// putBoth32 writes v in both-byte orders, little-endian first (7.3.3).
func putBoth32(b []byte, v uint32) {
	binary.LittleEndian.PutUint32(b, v)
	binary.BigEndian.PutUint32(b[4:], v)
}

// putRecordingDate writes the 7-byte date of a directory record (9.1.5) in
// UTC; t is already checked to lie in 1900-2155.
func putRecordingDate(b []byte, t time.Time) {
	b[0] = byte(t.Year() - 1900)
	b[1] = byte(t.Month())
	b[2] = byte(t.Day())
	b[3] = byte(t.Hour())
	b[4] = byte(t.Minute())
	b[5] = byte(t.Second())
	b[6] = 0 // offset from GMT in 15-minute units
}

// putVolumeDate writes the 17-byte date of a volume descriptor (8.4.26.1).
func putVolumeDate(b []byte, t time.Time) {
	copy(b, fmt.Sprintf("%04d%02d%02d%02d%02d%02d%02d",
		t.Year(), int(t.Month()), t.Day(), t.Hour(), t.Minute(), t.Second(), t.Nanosecond()/1e7))
	b[16] = 0
}

// putUnsetVolumeDate writes the "not specified" date: sixteen '0' digits and
// a zero offset (8.4.26.1).
func putUnsetVolumeDate(b []byte) {
	copy(b, "0000000000000000")
	b[16] = 0
}

// putPadded copies s into field b and pads with spaces (a- and d-character
// fields, 7.4).
func putPadded(b []byte, s string) {
	n := copy(b, s)
	for i := n; i < len(b); i++ {
		b[i] = ' '
	}
}

// putPaddedUCS2 copies the UCS-2BE string s into a Joliet field, truncated to
// whole characters, and pads with UCS-2 spaces; an odd-length field ends in
// a zero byte.
func putPaddedUCS2(b []byte, s []byte) {
	n := copy(b[:len(b)&^1], s[:min(len(s), len(b))&^1])
	for i := n; i+1 < len(b); i += 2 {
		b[i], b[i+1] = 0, ' '
	}
	if len(b)%2 == 1 {
		b[len(b)-1] = 0
	}
}
