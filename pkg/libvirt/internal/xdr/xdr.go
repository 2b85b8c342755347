// Package xdr implements the subset of XDR (RFC 4506) that libvirt's RPC protocol uses.
//
// Decoding is defensive: every length and array count is checked against both its protocol
// maximum and the bytes actually left in the message before anything is allocated, so a
// hostile or corrupt peer cannot make the client allocate more than the message it already
// holds.
package xdr

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// UUIDSize is the length of libvirt's fixed-size UUID opaque.
const UUIDSize = 16

// ErrShort reports a message that ends before the value being decoded.
var ErrShort = errors.New("xdr: message too short")

// pad returns the number of zero bytes that follow n bytes of opaque data.
func pad(n int) int { return (4 - n%4) % 4 }

// Encoder appends XDR values to a byte slice.
type Encoder struct {
	buf []byte
}

// NewEncoder returns an encoder that appends to buf, which may already hold a frame header.
func NewEncoder(buf []byte) *Encoder { return &Encoder{buf: buf} }

// Bytes returns the encoded data, including whatever the initial buffer held.
func (e *Encoder) Bytes() []byte { return e.buf }

func (e *Encoder) Uint32(v uint32) { e.buf = binary.BigEndian.AppendUint32(e.buf, v) }
func (e *Encoder) Int32(v int32)   { e.Uint32(uint32(v)) }
func (e *Encoder) Uint64(v uint64) { e.buf = binary.BigEndian.AppendUint64(e.buf, v) }
func (e *Encoder) Int64(v int64)   { e.Uint64(uint64(v)) }

// Bool encodes b as the XDR boolean (a u32 holding 0 or 1).
func (e *Encoder) Bool(b bool) {
	if b {
		e.Uint32(1)
	} else {
		e.Uint32(0)
	}
}

// String encodes a variable-length string: length, bytes, zero padding.
func (e *Encoder) String(s string) {
	e.Uint32(uint32(len(s)))
	e.buf = append(e.buf, s...)
	e.buf = append(e.buf, make([]byte, pad(len(s)))...)
}

// OptString encodes libvirt's nullable string: a presence flag, then the string when present.
func (e *Encoder) OptString(s *string) {
	e.Bool(s != nil)
	if s != nil {
		e.String(*s)
	}
}

// FixedOpaque encodes opaque data whose length both sides know (a UUID), padded to 4 bytes.
func (e *Encoder) FixedOpaque(b []byte) {
	e.buf = append(e.buf, b...)
	e.buf = append(e.buf, make([]byte, pad(len(b)))...)
}

// Decoder reads XDR values from a message. The first error sticks: later reads return zero
// values, so a caller decodes a whole struct and checks Err once.
type Decoder struct {
	buf []byte
	off int
	err error
}

// NewDecoder returns a decoder over b.
func NewDecoder(b []byte) *Decoder { return &Decoder{buf: b} }

// Err returns the first decoding error.
func (d *Decoder) Err() error { return d.err }

// Finish returns the first decoding error, or an error if bytes are left over: a reply longer
// than its declared type means client and server disagree on the layout.
func (d *Decoder) Finish() error {
	if d.err == nil && d.off != len(d.buf) {
		d.err = fmt.Errorf("xdr: %d unexpected trailing bytes", len(d.buf)-d.off)
	}
	return d.err
}

func (d *Decoder) fail(err error) {
	if d.err == nil {
		d.err = err
	}
}

// Fail records err as the decoding error unless one is already recorded: for a value the
// caller finds invalid, such as a union discriminant without an arm, after which nothing more
// can be read.
func (d *Decoder) Fail(err error) { d.fail(err) }

// Remaining is the number of undecoded bytes.
func (d *Decoder) Remaining() int { return len(d.buf) - d.off }

func (d *Decoder) take(n int) []byte {
	if d.err != nil {
		return nil
	}
	if n < 0 || n > d.Remaining() {
		d.fail(ErrShort)
		return nil
	}
	b := d.buf[d.off : d.off+n]
	d.off += n
	return b
}

func (d *Decoder) Uint32() uint32 {
	b := d.take(4)
	if b == nil {
		return 0
	}
	return binary.BigEndian.Uint32(b)
}

func (d *Decoder) Int32() int32 { return int32(d.Uint32()) }

func (d *Decoder) Uint64() uint64 {
	b := d.take(8)
	if b == nil {
		return 0
	}
	return binary.BigEndian.Uint64(b)
}

func (d *Decoder) Int64() int64 { return int64(d.Uint64()) }

// Bool decodes an XDR boolean; any value other than 0 or 1 is an error.
func (d *Decoder) Bool() bool {
	switch v := d.Uint32(); v {
	case 0:
		return false
	case 1:
		return true
	default:
		d.fail(fmt.Errorf("xdr: invalid boolean %d", v))
		return false
	}
}

// String decodes a string of at most max bytes.
func (d *Decoder) String(max int) string {
	n := d.Uint32()
	if d.err != nil {
		return ""
	}
	if uint64(n) > uint64(max) {
		d.fail(fmt.Errorf("xdr: string length %d exceeds maximum %d", n, max))
		return ""
	}
	b := d.take(int(n) + pad(int(n)))
	if b == nil {
		return ""
	}
	return string(b[:n])
}

// OptString decodes a nullable string; nil means absent.
func (d *Decoder) OptString(max int) *string {
	if !d.Bool() {
		return nil
	}
	s := d.String(max)
	if d.err != nil {
		return nil
	}
	return &s
}

// FixedOpaque fills dst with len(dst) bytes of opaque data and skips its padding.
func (d *Decoder) FixedOpaque(dst []byte) {
	b := d.take(len(dst) + pad(len(dst)))
	if b != nil {
		copy(dst, b)
	}
}

// ArrayLen decodes a variable array's element count. It rejects counts above max, and counts
// that could not fit in the rest of the message given that each element takes at least
// minElem bytes, so callers may size a slice with the result.
func (d *Decoder) ArrayLen(max, minElem int) int {
	n := d.Uint32()
	if d.err != nil {
		return 0
	}
	if uint64(n) > uint64(max) {
		d.fail(fmt.Errorf("xdr: array length %d exceeds maximum %d", n, max))
		return 0
	}
	if minElem > 0 && uint64(n)*uint64(minElem) > uint64(d.Remaining()) {
		d.fail(ErrShort)
		return 0
	}
	return int(n)
}
