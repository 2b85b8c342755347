package libvirt

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"

	"banlieue.io/banlieue/pkg/libvirt/internal/wire"
	"banlieue.io/banlieue/pkg/libvirt/internal/xdr"
)

// ConsoleFlags are virDomainConsoleFlags.
type ConsoleFlags uint32

const (
	// ConsoleForce takes the console from a session that holds it (which then sees its end),
	// where libvirtd otherwise refuses a second one.
	ConsoleForce ConsoleFlags = 1 << 0
	// ConsoleSafe refuses the console unless the hypervisor can guarantee one session at a time.
	ConsoleSafe ConsoleFlags = 1 << 1
)

// ErrConsoleOverrun ends a console whose reader fell behind by more than consoleBacklog frames
// or consoleBacklogBytes bytes.
// The connection's router never waits for a console (that would stall every other call on
// the connection behind one slow terminal), so the console ends rather than lose bytes in
// the middle.
var ErrConsoleOverrun = errors.New("libvirt: console output arrived faster than it was read; console closed")

// consoleBacklog and consoleBacklogBytes bound the console output that may wait for the reader,
// in frames and in payload bytes. libvirtd sends what it read from the pty in one frame: a few
// hundred bytes for interactive output, but a guest printing at full speed under TCG reaches
// libvirtd a few bytes at a time, so a burst is thousands of tiny frames. 64 frames were
// overrun by a guest's two-second report while the reader waited for a busy machine's CPU
// (TestConsoleThroughTheAPIServer under load); the byte bound keeps a pathological peer's
// 256 KiB frames to 1 MiB in all. The channel of 4 096 frames costs about 200 KiB per open
// console.
const (
	consoleBacklog      = 4096
	consoleBacklogBytes = 1 << 20
)

// Console is a domain's character device (serial console) opened as a libvirt stream: Read
// returns what the guest writes, Write sends keystrokes. Read and Write may be called from two
// goroutines at once; Close unblocks both. When libvirtd ends the stream cleanly Read returns
// io.EOF; when another session takes the console with ConsoleForce, Read returns libvirtd's
// error (an *Error, "stream had I/O failure").
type Console struct {
	s *stream

	readMu  sync.Mutex
	rest    []byte // the unread part of the last data frame
	readErr error  // why Read stops; sticky
	eof     bool   // libvirtd ended the stream cleanly: Close confirms instead of aborting

	writeMu sync.Mutex
	ended   atomic.Bool // the stream is over for writes (read error, EOF or Close)

	closeOnce sync.Once
	closed    chan struct{}
}

var _ io.ReadWriteCloser = (*Console)(nil)

// OpenConsole opens dom's console, or the character device whose alias is dev (e.g.
// "serial0"; empty: the first console). ctx bounds the call; the console then stays open until
// Close or its end, however long that is. The domain must be running and its console a pty.
func (c *Client) OpenConsole(ctx context.Context, dom Domain, dev string, flags ConsoleFlags) (*Console, error) {
	serial, pc := c.registerNonBlocking(procDomainOpenConsole, consoleBacklog, consoleBacklogBytes)
	s, err := c.openRegistered(ctx, procDomainOpenConsole, serial, pc, func(e *xdr.Encoder) {
		encodeOpenConsoleArgs(e, dom, dev, flags)
	})
	if err != nil {
		return nil, err
	}
	return &Console{s: s, closed: make(chan struct{})}, nil
}

// encodeOpenConsoleArgs is remote_domain_open_console_args: the domain, an optional device
// name, the flags.
func encodeOpenConsoleArgs(e *xdr.Encoder, dom Domain, dev string, flags ConsoleFlags) {
	encodeDomain(e, dom)
	if dev == "" {
		e.OptString(nil)
	} else {
		e.OptString(&dev)
	}
	e.Uint32(uint32(flags))
}

// Read returns guest output as it arrives.
func (k *Console) Read(p []byte) (int, error) {
	k.readMu.Lock()
	defer k.readMu.Unlock()
	for len(k.rest) == 0 {
		if k.readErr != nil {
			return 0, k.readErr
		}
		f, err := k.next()
		if err == nil {
			k.rest, err = k.data(f)
		}
		if err != nil {
			k.readErr = err
			k.ended.Store(true)
		}
	}
	n := copy(p, k.rest)
	k.rest = k.rest[n:]
	return n, nil
}

// data interprets one frame of the stream: its bytes, or why the stream ended.
func (k *Console) data(f frame) ([]byte, error) {
	s := k.s
	switch {
	case f.h.Type == wire.Stream && f.h.Status == wire.Continue && len(f.payload) > 0:
		return f.payload, nil
	case f.h.Type == wire.Stream && (f.h.Status == wire.OK || f.h.Status == wire.Continue):
		// End of the guest side: an empty Continue, or OK.
		k.eof = true
		return nil, io.EOF
	case f.h.Status == wire.Error:
		s.ended = true
		return nil, s.c.remoteError(wire.ProgramRemote, s.proc, f.payload)
	default:
		s.ended = true
		return nil, s.c.violation(fmt.Sprintf("unexpected message (type %d, status %d) in %s stream", f.h.Type, f.h.Status, s.proc))
	}
}

// next waits for the stream's next frame with no deadline: a console is quiet for as long as
// the guest prints nothing. Frames already routed are delivered before an overrun or a hang-up
// is reported.
func (k *Console) next() (frame, error) {
	s := k.s
	if len(s.early) > 0 {
		f := s.early[0]
		s.early = s.early[1:]
		return f, nil
	}
	select {
	case f := <-s.pc.frames:
		return s.pc.took(f), nil
	default:
	}
	select {
	case f := <-s.pc.frames:
		return s.pc.took(f), nil
	case <-s.pc.overrun:
		return frame{}, ErrConsoleOverrun
	case <-s.c.done:
		return frame{}, s.c.err
	case <-k.closed:
		return frame{}, net.ErrClosed
	}
}

// Write sends p to the guest, in frames of at most wire.MaxStreamData bytes, each under the
// client's timeout.
func (k *Console) Write(p []byte) (int, error) {
	k.writeMu.Lock()
	defer k.writeMu.Unlock()
	written := 0
	for len(p) > 0 {
		if k.ended.Load() {
			return written, net.ErrClosed
		}
		n := min(len(p), wire.MaxStreamData)
		b := make([]byte, wire.MinFrame+n)
		copy(b[wire.MinFrame:], p[:n])
		if err := k.s.send(context.Background(), b, wire.Stream, wire.Continue); err != nil {
			return written, err
		}
		written += n
		p = p[n:]
	}
	return written, nil
}

// Close ends the console: it confirms a stream libvirtd ended (Stream/OK, as virStreamFinish
// does) and aborts one still open, so libvirtd frees the console for the next session either
// way. It unblocks a pending Read; the connection stays usable.
func (k *Console) Close() error {
	var err error
	k.closeOnce.Do(func() {
		k.ended.Store(true)
		close(k.closed)
		k.readMu.Lock()
		defer k.readMu.Unlock()
		k.writeMu.Lock()
		defer k.writeMu.Unlock()
		if k.eof && !k.s.ended {
			ctx, cancel := context.WithTimeout(context.Background(), k.s.c.timeout)
			err = k.s.finishConsole(ctx)
			cancel()
		}
		k.s.close()
	})
	return err
}

// finishConsole sends the client's end of stream and waits for libvirtd's answer, skipping
// console output that was already on its way.
func (s *stream) finishConsole(ctx context.Context) error {
	if err := s.send(ctx, make([]byte, wire.MinFrame), wire.Stream, wire.OK); err != nil {
		return err
	}
	for {
		var f frame
		err := s.do(ctx, func(ctx context.Context) error {
			select {
			case f = <-s.pc.frames:
				f = s.pc.took(f)
				return nil
			case <-s.pc.overrun:
				return ErrConsoleOverrun
			case <-ctx.Done():
				return ctx.Err()
			case <-s.c.done:
				return s.c.err
			}
		})
		if err != nil {
			return err
		}
		switch {
		case f.h.Type == wire.Stream && f.h.Status == wire.Continue:
			continue
		case f.h.Status == wire.OK:
			s.ended = true
			return nil
		case f.h.Status == wire.Error:
			s.ended = true
			return s.c.remoteError(wire.ProgramRemote, s.proc, f.payload)
		default:
			return s.c.violation(fmt.Sprintf("unexpected message type %d at end of %s stream", f.h.Type, s.proc))
		}
	}
}
