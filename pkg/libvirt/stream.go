package libvirt

import (
	"context"
	"fmt"
	"time"

	"banlieue.io/banlieue/pkg/libvirt/internal/wire"
	"banlieue.io/banlieue/pkg/libvirt/internal/xdr"
)

// Progress is called after each stream packet with the bytes covered so far (holes count).
type Progress func(done int64)

// stream is a call whose reply is followed by Stream packets in both directions, all with
// the call's procedure and serial.
type stream struct {
	c      *Client
	proc   procedure
	serial uint32
	pc     *pendingCall
	ended  bool // the server has finished or failed the stream
	// early holds data libvirtd streamed before its reply to the call (a download can start
	// before the reply is sent); recv returns it first.
	early []frame
}

// maxEarlyFrames bounds what is held while the reply is awaited: libvirtd stops sending once
// its window fills, so a few frames is all a well-behaved server sends.
const maxEarlyFrames = 64

// openStream sends the call and waits for its reply; only then may data flow. The observer is
// told of the call, not of the data that follows.
func (c *Client) openStream(ctx context.Context, proc procedure, args func(*xdr.Encoder)) (*stream, error) {
	serial, pc := c.register(wire.ProgramRemote, proc, true)
	return c.openRegistered(ctx, proc, serial, pc, args)
}

// openRegistered is openStream for a call already registered (a console registers its own
// kind of stream, console.go).
func (c *Client) openRegistered(ctx context.Context, proc procedure, serial uint32, pc *pendingCall, args func(*xdr.Encoder)) (*stream, error) {
	start := time.Now()
	s, err := c.startStream(ctx, proc, serial, pc, args)
	c.observe(wire.ProgramRemote, proc, start, err)
	return s, err
}

// startStream is openRegistered without its observation.
func (c *Client) startStream(ctx context.Context, proc procedure, serial uint32, pc *pendingCall, args func(*xdr.Encoder)) (*stream, error) {
	s := &stream{c: c, proc: proc, serial: serial, pc: pc}
	b := newFrame(args)
	wire.PutHeader(b, s.header(wire.Call, wire.OK))
	if err := s.do(ctx, func(ctx context.Context) error { return c.send(ctx, b) }); err != nil {
		s.ended = true // libvirtd never saw the call
		s.close()
		return nil, err
	}
	f, err := s.recvWire(ctx)
	for err == nil && (f.h.Type == wire.Stream || f.h.Type == wire.StreamHole) && f.h.Status == wire.Continue &&
		len(s.early) < maxEarlyFrames {
		s.early = append(s.early, f)
		f, err = s.recvWire(ctx)
	}
	switch {
	case err != nil:
		// No reply: libvirtd may hold the stream open, and close aborts it.
	case f.h.Type != wire.Reply:
		s.ended = true // the connection is gone
		err = c.violation(fmt.Sprintf("unexpected message type %d before the %s reply", f.h.Type, proc))
	default:
		if err = c.decodeResult(f, nil); err != nil {
			s.ended = true // libvirtd refused the call: there is no stream to abort
		}
	}
	if err != nil {
		s.close()
		return nil, err
	}
	return s, nil
}

func (s *stream) header(t wire.Type, st wire.Status) wire.Header {
	return wire.Header{Program: wire.ProgramRemote, Version: protocolVersion, Procedure: int32(s.proc), Type: t, Serial: s.serial, Status: st}
}

// do runs one step of the stream under the client timeout.
func (s *stream) do(ctx context.Context, step func(context.Context) error) error {
	ctx, cancel := context.WithTimeoutCause(ctx, s.c.timeout, errCallTimeout)
	defer cancel()
	return s.c.callError(ctx, wire.ProgramRemote, s.proc, step(ctx))
}

// recv waits, under the client timeout, for the next frame of the stream.
func (s *stream) recv(ctx context.Context) (frame, error) {
	if len(s.early) > 0 {
		f := s.early[0]
		s.early = s.early[1:]
		return f, nil
	}
	return s.recvWire(ctx)
}

// recvWire waits for the next frame from the connection itself.
func (s *stream) recvWire(ctx context.Context) (frame, error) {
	var f frame
	err := s.do(ctx, func(ctx context.Context) (err error) {
		f, err = s.c.await(ctx, s.pc)
		return err
	})
	return f, err
}

// send writes a frame whose payload the caller placed at b[wire.MinFrame:].
func (s *stream) send(ctx context.Context, b []byte, t wire.Type, st wire.Status) error {
	wire.PutHeader(b, s.header(t, st))
	return s.do(ctx, func(ctx context.Context) error { return s.c.send(ctx, b) })
}

// sendHole announces length bytes of hole (virNetStreamHole {hyper length; unsigned flags}).
func (s *stream) sendHole(ctx context.Context, length int64) error {
	b := newFrame(func(e *xdr.Encoder) {
		e.Int64(length)
		e.Uint32(0)
	})
	return s.send(ctx, b, wire.StreamHole, wire.Continue)
}

// pollError returns the server's error if it has already failed the stream, without
// waiting, so an upload stops at the first packet the server refused.
func (s *stream) pollError() error {
	select {
	case f := <-s.pc.frames:
		s.ended = true
		if f.h.Status == wire.Error {
			return s.c.remoteError(wire.ProgramRemote, s.proc, f.payload)
		}
		return s.c.violation(fmt.Sprintf("unexpected %s stream message (type %d, status %d) during upload", s.proc, f.h.Type, f.h.Status))
	default:
		return nil
	}
}

// finish sends the client's end of stream (Stream/OK, empty) and waits for the server to
// confirm that everything was written.
func (s *stream) finish(ctx context.Context) error {
	if err := s.send(ctx, make([]byte, wire.MinFrame), wire.Stream, wire.OK); err != nil {
		return err
	}
	for {
		f, err := s.recv(ctx)
		if err != nil {
			return err
		}
		switch {
		case f.h.Status == wire.OK:
			s.ended = true
			return nil
		case f.h.Status == wire.Error:
			s.ended = true
			return s.c.remoteError(wire.ProgramRemote, s.proc, f.payload)
		case f.h.Type == wire.Stream || f.h.Type == wire.StreamHole:
			// Data after our end of stream: the server disagrees about where the stream is.
			return s.c.violation(fmt.Sprintf("%s: stream desynchronised: data after end of stream", s.proc))
		default:
			return s.c.violation(fmt.Sprintf("unexpected message type %d at end of %s stream", f.h.Type, s.proc))
		}
	}
}

// close releases the serial. A stream still open on the server is aborted (Stream/Error with
// an empty payload) so libvirtd discards the partial transfer; its answer is dropped by the
// router like any late reply.
func (s *stream) close() {
	if !s.ended {
		ctx, cancel := context.WithTimeout(context.Background(), s.c.timeout)
		// A failed send has already failed the connection, which reports it to everyone.
		_ = s.send(ctx, make([]byte, wire.MinFrame), wire.Stream, wire.Error)
		cancel()
	}
	s.c.unregister(s.serial, s.pc)
}
