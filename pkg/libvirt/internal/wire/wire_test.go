package wire

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

func frameBytes(h Header, payload []byte) []byte {
	b := append(make([]byte, MinFrame), payload...)
	PutHeader(b, h)
	return b
}

func TestFrameRoundTrip(t *testing.T) {
	h := Header{Program: ProgramRemote, Version: 1, Procedure: 66, Type: Reply, Serial: 7, Status: Error}
	b := frameBytes(h, []byte("payload!"))
	if got := binary.BigEndian.Uint32(b); got != uint32(len(b)) {
		t.Fatalf("length prefix %d, want %d (it counts itself)", got, len(b))
	}
	gh, p, err := ReadFrame(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	if gh != h || string(p) != "payload!" {
		t.Fatalf("got %+v %q", gh, p)
	}
}

// Payloads above MaxStreamPayload are read into a growing buffer; it must end up holding
// exactly the frame, however the reader splits it.
func TestReadFrameLargePayloads(t *testing.T) {
	for _, size := range []int{0, 1, MaxStreamPayload, MaxStreamPayload + 1, 2*MaxStreamPayload + 7, 3<<20 + 5, MaxFrame - MinFrame} {
		t.Run(fmt.Sprint(size), func(t *testing.T) {
			payload := make([]byte, size)
			for i := range payload {
				payload[i] = byte(i * 7)
			}
			h := Header{Program: ProgramRemote, Version: 1, Procedure: 2, Type: Reply, Serial: 3}
			gh, p, err := ReadFrame(iotest.HalfReader(bytes.NewReader(frameBytes(h, payload))))
			if err != nil {
				t.Fatal(err)
			}
			if gh != h || !bytes.Equal(p, payload) {
				t.Fatalf("payload of %d bytes differs from the %d sent", len(p), size)
			}
			if cap(p) != size {
				t.Fatalf("buffer capacity %d for a %d-byte payload", cap(p), size)
			}
		})
	}
}

func TestReadFrameRejects(t *testing.T) {
	withLen := func(n uint32, rest int) []byte {
		b := binary.BigEndian.AppendUint32(nil, n)
		return append(b, make([]byte, rest)...)
	}
	tests := []struct {
		name string
		in   []byte
		want string
	}{
		{"length 0", withLen(0, 100), "frame length 0"},
		{"length 27", withLen(27, 100), "frame length 27"},
		{"length above 32 MiB", withLen(MaxFrame+1, 100), "frame length 33554433"},
		{"length max uint32", withLen(0xffffffff, 100), "outside"},
		{"truncated header", withLen(28, 10), io.ErrUnexpectedEOF.Error()},
		{"truncated payload", withLen(40, 24+3), io.ErrUnexpectedEOF.Error()},
		{"maximum length, 100 bytes sent", withLen(MaxFrame, 24+100), io.ErrUnexpectedEOF.Error()},
		{"truncated after the buffer grew", withLen(MinFrame+1<<20, 24+600<<10), io.ErrUnexpectedEOF.Error()},
		{"truncated length", []byte{0, 0}, io.ErrUnexpectedEOF.Error()},
		{"empty", nil, io.EOF.Error()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := ReadFrame(bytes.NewReader(tt.in))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want %q", err, tt.want)
			}
		})
	}
}

func TestReadFrameIsProtocolViolation(t *testing.T) {
	_, _, err := ReadFrame(bytes.NewReader([]byte{0, 0, 0, 4}))
	var fe *FrameError
	if !errors.As(err, &fe) || !strings.HasPrefix(err.Error(), "protocol violation: ") {
		t.Fatalf("err = %v, want a FrameError", err)
	}
}

// FuzzReadFrame feeds arbitrary bytes to the frame reader: it must not panic, must not
// allocate a payload larger than the input, and must round-trip what it accepts.
func FuzzReadFrame(f *testing.F) {
	f.Add(frameBytes(Header{Program: ProgramRemote, Version: 1, Procedure: 1, Type: Reply}, nil))
	f.Add(frameBytes(Header{Program: ProgramKeepAlive, Version: 1, Procedure: 1, Type: Message}, nil))
	f.Add(frameBytes(Header{Program: ProgramRemote, Version: 1, Procedure: 208, Type: Stream, Status: Continue}, []byte("data")))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff})
	f.Add([]byte{0, 0, 0, 27})
	f.Fuzz(func(t *testing.T, in []byte) {
		h, p, err := ReadFrame(bytes.NewReader(in))
		if err != nil {
			return
		}
		if len(p)+MinFrame > len(in) {
			t.Fatalf("payload of %d bytes from %d-byte input", len(p), len(in))
		}
		again := frameBytes(h, p)
		if !bytes.Equal(again, in[:len(again)]) {
			t.Fatalf("re-encoded frame differs from input")
		}
	})
}

// BenchmarkReadFrame reads a full stream packet, the download hot path, and a large reply.
func BenchmarkReadFrame(b *testing.B) {
	for _, tt := range []struct {
		typ  Type
		size int
	}{{Stream, MaxStreamData}, {Reply, 4 << 20}} {
		b.Run(fmt.Sprint(tt.size), func(b *testing.B) {
			in := frameBytes(Header{Program: ProgramRemote, Version: 1, Procedure: 209, Type: tt.typ}, make([]byte, tt.size))
			r := bytes.NewReader(in)
			b.SetBytes(int64(len(in)))
			for b.Loop() {
				r.Reset(in)
				if _, _, err := ReadFrame(r); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
