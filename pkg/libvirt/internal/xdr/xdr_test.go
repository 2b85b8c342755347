package xdr

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

func TestRoundTrip(t *testing.T) {
	s := "héllo"
	e := NewEncoder(nil)
	e.Uint32(0xdeadbeef)
	e.Int32(-2)
	e.Uint64(1 << 40)
	e.Int64(-1)
	e.Bool(true)
	e.String(s)
	e.OptString(nil)
	e.OptString(&s)
	e.FixedOpaque([]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16})
	e.String("")

	d := NewDecoder(e.Bytes())
	if got := d.Uint32(); got != 0xdeadbeef {
		t.Errorf("Uint32 = %#x", got)
	}
	if got := d.Int32(); got != -2 {
		t.Errorf("Int32 = %d", got)
	}
	if got := d.Uint64(); got != 1<<40 {
		t.Errorf("Uint64 = %d", got)
	}
	if got := d.Int64(); got != -1 {
		t.Errorf("Int64 = %d", got)
	}
	if !d.Bool() {
		t.Error("Bool = false")
	}
	if got := d.String(100); got != s {
		t.Errorf("String = %q", got)
	}
	if got := d.OptString(100); got != nil {
		t.Errorf("OptString(absent) = %q", *got)
	}
	if got := d.OptString(100); got == nil || *got != s {
		t.Errorf("OptString = %v", got)
	}
	var u [16]byte
	d.FixedOpaque(u[:])
	if u[0] != 1 || u[15] != 16 {
		t.Errorf("FixedOpaque = %v", u)
	}
	if got := d.String(0); got != "" {
		t.Errorf("empty String = %q", got)
	}
	if err := d.Finish(); err != nil {
		t.Fatal(err)
	}
}

func TestStringPadding(t *testing.T) {
	for n, want := range map[int]int{0: 4, 1: 8, 3: 8, 4: 8, 5: 12} {
		e := NewEncoder(nil)
		e.String(strings.Repeat("x", n))
		if len(e.Bytes()) != want {
			t.Errorf("String of %d bytes encodes to %d bytes, want %d", n, len(e.Bytes()), want)
		}
		if !bytes.Equal(e.Bytes()[4+n:], make([]byte, want-4-n)) {
			t.Errorf("padding of %d-byte string is not zero", n)
		}
	}
}

func TestDecodeErrors(t *testing.T) {
	u32 := func(vs ...uint32) []byte {
		e := NewEncoder(nil)
		for _, v := range vs {
			e.Uint32(v)
		}
		return e.Bytes()
	}
	tests := []struct {
		name string
		in   []byte
		dec  func(*Decoder)
		want string
	}{
		{"short u32", []byte{0, 0, 1}, func(d *Decoder) { d.Uint32() }, "too short"},
		{"short u64", u32(1), func(d *Decoder) { d.Uint64() }, "too short"},
		{"bad bool", u32(2), func(d *Decoder) { d.Bool() }, "invalid boolean 2"},
		{"string over max", u32(9), func(d *Decoder) { d.String(8) }, "exceeds maximum 8"},
		{"string past end", u32(5, 0), func(d *Decoder) { d.String(100) }, "too short"},
		{"huge string", u32(0xffffffff), func(d *Decoder) { d.String(1 << 30) }, "exceeds maximum"},
		{"array over max", u32(21), func(d *Decoder) { d.ArrayLen(20, 4) }, "exceeds maximum 20"},
		{"array past end", u32(3, 0, 0), func(d *Decoder) { d.ArrayLen(20, 4) }, "too short"},
		{"trailing", u32(1, 2), func(d *Decoder) { d.Uint32() }, "trailing"},
		{"missing padding", []byte{0, 0, 0, 1, 'a'}, func(d *Decoder) { d.String(10) }, "too short"},
		{"short opaque", []byte{1, 2}, func(d *Decoder) { d.FixedOpaque(make([]byte, 16)) }, "too short"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := NewDecoder(tt.in)
			tt.dec(d)
			err := d.Finish()
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want %q", err, tt.want)
			}
		})
	}
}

func TestErrorSticks(t *testing.T) {
	d := NewDecoder([]byte{0, 0})
	d.Uint32()
	if d.Uint32() != 0 || d.String(10) != "" || d.OptString(10) != nil || d.ArrayLen(10, 4) != 0 {
		t.Fatal("reads after an error must return zero values")
	}
	if !errors.Is(d.Err(), ErrShort) {
		t.Fatalf("Err = %v, want ErrShort", d.Err())
	}
}

// FuzzDecoder drives the decoder with arbitrary bytes and an arbitrary sequence of reads: it
// must never panic, never return more than it was given, and never read past the end.
func FuzzDecoder(f *testing.F) {
	e := NewEncoder(nil)
	e.String("domain")
	e.FixedOpaque(make([]byte, UUIDSize))
	e.Int32(-1)
	f.Add([]byte{0, 1, 2, 3, 4, 5}, e.Bytes())
	f.Add([]byte{5, 6}, []byte{0, 0, 0, 1, 0, 0, 0, 3, 'a', 'b', 'c', 0})
	f.Add([]byte{4}, []byte{0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, ops []byte, in []byte) {
		d := NewDecoder(in)
		for _, op := range ops {
			switch op % 8 {
			case 0:
				d.Uint32()
			case 1:
				d.Uint64()
			case 2:
				d.Bool()
			case 3:
				if s := d.String(1 << 20); len(s) > len(in) {
					t.Fatalf("string of %d bytes from %d-byte input", len(s), len(in))
				}
			case 4:
				if n := d.ArrayLen(1<<20, 4); n*4 > len(in) {
					t.Fatalf("array count %d from %d-byte input", n, len(in))
				}
			case 5:
				if s := d.OptString(1 << 20); s != nil && len(*s) > len(in) {
					t.Fatalf("string of %d bytes from %d-byte input", len(*s), len(in))
				}
			case 6:
				d.FixedOpaque(make([]byte, UUIDSize))
			case 7:
				d.Int64()
			}
			if d.Remaining() < 0 || d.Remaining() > len(in) {
				t.Fatalf("Remaining = %d for %d-byte input", d.Remaining(), len(in))
			}
		}
		_ = d.Finish()
	})
}
