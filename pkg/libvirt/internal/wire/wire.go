// Package wire frames libvirt RPC messages: a u32 length that counts itself, a 24-byte
// header, then the payload. It knows nothing about procedures or connections, in the way
// pgproto3 keeps PostgreSQL's message layer apart from pgconn.
package wire

import (
	"encoding/binary"
	"fmt"
	"io"
)

const (
	// LenSize is the size of the length prefix.
	LenSize = 4
	// HeaderSize is the size of the serialised header.
	HeaderSize = 24
	// MinFrame is the smallest valid frame: a length and a header with no payload.
	MinFrame = LenSize + HeaderSize
	// MaxFrame is the largest frame either side accepts (32 MiB, libvirt ≥ 6.3's limit).
	MaxFrame = 32 << 20
	// MaxStreamData is the most raw stream data one frame carries; libvirt's own clients use
	// the legacy payload limit minus the header so any server version accepts the packet.
	MaxStreamData = 262120
)

// Programs multiplexed on one connection.
const (
	ProgramRemote    uint32 = 0x20008086
	ProgramQEMU      uint32 = 0x20008087
	ProgramKeepAlive uint32 = 0x6b656570
)

// Type is the kind of a message.
type Type int32

const (
	Call         Type = 0
	Reply        Type = 1
	Message      Type = 2
	Stream       Type = 3
	CallWithFDs  Type = 4
	ReplyWithFDs Type = 5
	StreamHole   Type = 6
)

// Status is a message's outcome.
type Status int32

const (
	OK       Status = 0
	Error    Status = 1
	Continue Status = 2
)

// Header is virNetMessageHeader.
type Header struct {
	Program   uint32
	Version   uint32
	Procedure int32
	Type      Type
	Serial    uint32
	Status    Status
}

// FrameError reports a frame that violates the framing rules; the stream cannot be trusted
// after one.
type FrameError struct{ Msg string }

func (e *FrameError) Error() string { return "protocol violation: " + e.Msg }

// PutHeader writes the length prefix (len(frame)) and h into the first MinFrame bytes of
// frame, whose payload the caller has already placed at frame[MinFrame:]. Building the
// frame in place lets stream data be read straight into the buffer that is sent.
func PutHeader(frame []byte, h Header) {
	binary.BigEndian.PutUint32(frame[0:], uint32(len(frame)))
	binary.BigEndian.PutUint32(frame[4:], h.Program)
	binary.BigEndian.PutUint32(frame[8:], h.Version)
	binary.BigEndian.PutUint32(frame[12:], uint32(h.Procedure))
	binary.BigEndian.PutUint32(frame[16:], uint32(h.Type))
	binary.BigEndian.PutUint32(frame[20:], h.Serial)
	binary.BigEndian.PutUint32(frame[24:], uint32(h.Status))
}

// MaxStreamPayload is libvirt's VIR_NET_MESSAGE_LEGACY_PAYLOAD_MAX, the most a stream packet
// carries.
const MaxStreamPayload = 256 << 10

// ReadFrame reads one frame and returns its header and a freshly allocated payload. The
// length is validated before anything is allocated, and memory beyond MaxStreamPayload is
// committed only as the payload's bytes arrive.
func ReadFrame(r io.Reader) (Header, []byte, error) {
	var pre [MinFrame]byte
	if _, err := io.ReadFull(r, pre[:LenSize]); err != nil {
		return Header{}, nil, err
	}
	n := binary.BigEndian.Uint32(pre[:LenSize])
	if n < MinFrame || n > MaxFrame {
		return Header{}, nil, &FrameError{Msg: fmt.Sprintf("frame length %d outside [%d, %d]", n, MinFrame, MaxFrame)}
	}
	if _, err := io.ReadFull(r, pre[LenSize:]); err != nil {
		return Header{}, nil, unexpectedEOF(err)
	}
	h := Header{
		Program:   binary.BigEndian.Uint32(pre[4:]),
		Version:   binary.BigEndian.Uint32(pre[8:]),
		Procedure: int32(binary.BigEndian.Uint32(pre[12:])),
		Type:      Type(binary.BigEndian.Uint32(pre[16:])),
		Serial:    binary.BigEndian.Uint32(pre[20:]),
		Status:    Status(binary.BigEndian.Uint32(pre[24:])),
	}
	if (h.Type == Stream || h.Type == StreamHole) && n-MinFrame > MaxStreamPayload {
		// libvirtd never sends stream packets this large; refusing them before allocating keeps
		// a stream's memory to a few packets whatever the peer claims.
		return Header{}, nil, &FrameError{Msg: fmt.Sprintf("stream packet of %d bytes exceeds %d", n-MinFrame, MaxStreamPayload)}
	}
	payload, err := readPayload(r, int(n-MinFrame))
	if err != nil {
		return Header{}, nil, err
	}
	return h, payload, nil
}

// readPayload reads exactly n bytes. Up to MaxStreamPayload, which covers every stream
// packet, the buffer is allocated at once; beyond, it doubles only when full, so a peer that
// announces 32 MiB and sends 100 bytes costs MaxStreamPayload, not 32 MiB. Any peer can
// already cost MaxStreamPayload with a frame of that size, so starting there adds no exposure.
func readPayload(r io.Reader, n int) ([]byte, error) {
	buf := make([]byte, 0, min(n, MaxStreamPayload))
	for {
		got, err := io.ReadFull(r, buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+got]
		if err != nil {
			return nil, unexpectedEOF(err)
		}
		if len(buf) == n {
			return buf, nil
		}
		grown := make([]byte, len(buf), len(buf)+min(len(buf), n-len(buf)))
		copy(grown, buf)
		buf = grown
	}
}

// unexpectedEOF turns a clean EOF inside a frame into io.ErrUnexpectedEOF: the peer went
// away mid-message, which is not the same as closing between messages.
func unexpectedEOF(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}
