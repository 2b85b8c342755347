package libvirt

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"banlieue.io/banlieue/pkg/libvirt/internal/wire"
	"banlieue.io/banlieue/pkg/libvirt/internal/xdr"
)

// streamFrame is a Stream message of call's procedure and serial, as libvirtd sends one.
func streamFrame(call wire.Header, st wire.Status, payload []byte) []byte {
	h := call
	h.Type, h.Status = wire.Stream, st
	b := make([]byte, wire.MinFrame+len(payload))
	copy(b[wire.MinFrame:], payload)
	wire.PutHeader(b, h)
	return b
}

// The call's arguments, byte for byte: remote_nonnull_domain, an optional string, the flags.
func TestEncodeOpenConsoleArgs(t *testing.T) {
	dom := Domain{Name: "vm", UUID: UUID{1, 2, 3}, ID: 7}
	head := []byte{0, 0, 0, 2, 'v', 'm', 0, 0, 1, 2, 3, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 7}
	for _, c := range []struct {
		dev   string
		flags ConsoleFlags
		tail  []byte
	}{
		{"", 0, []byte{0, 0, 0, 0, 0, 0, 0, 0}},
		{"serial0", ConsoleForce, []byte{0, 0, 0, 1, 0, 0, 0, 7, 's', 'e', 'r', 'i', 'a', 'l', '0', 0, 0, 0, 0, 1}},
		{"", ConsoleForce | ConsoleSafe, []byte{0, 0, 0, 0, 0, 0, 0, 3}},
	} {
		e := xdr.NewEncoder(nil)
		encodeOpenConsoleArgs(e, dom, c.dev, c.flags)
		if want := append(append([]byte{}, head...), c.tail...); !bytes.Equal(e.Bytes(), want) {
			t.Errorf("dev %q flags %d: % x, want % x", c.dev, c.flags, e.Bytes(), want)
		}
	}
}

// A whole session against scripted packets: output before and after the reply is read in
// order, keystrokes go out as Stream/Continue of the call's serial (a long write split at
// MaxStreamData), libvirtd's end of stream is io.EOF, and Close confirms it with Stream/OK.
func TestConsoleSession(t *testing.T) {
	typed := make(chan []byte, 16)
	confirmed := make(chan wire.Header, 1)
	f := startFake(t, func(s *fakeSession) {
		call, args, err := s.read()
		if err != nil || procedure(call.Procedure) != procDomainOpenConsole {
			return
		}
		e := xdr.NewEncoder(nil)
		encodeOpenConsoleArgs(e, Domain{Name: "vm"}, "", ConsoleForce)
		if !bytes.Equal(args, e.Bytes()) {
			s.replyError(call, 1, "bad arguments")
			return
		}
		s.write(streamFrame(call, wire.Continue, []byte("login: ")))
		s.reply(call, wire.OK, nil)
		for {
			h, p, err := s.read()
			if err != nil {
				return
			}
			switch {
			case h.Type == wire.Stream && h.Status == wire.Continue && h.Serial == call.Serial:
				typed <- p
				if bytes.HasSuffix(p, []byte("\n")) {
					s.write(streamFrame(call, wire.Continue, []byte("echo:")))
					s.write(streamFrame(call, wire.Continue, p))
					s.write(streamFrame(call, wire.Continue, nil)) // end of the guest side
				}
			case h.Type == wire.Stream && h.Status == wire.OK:
				confirmed <- h
				s.write(streamFrame(call, wire.OK, nil))
			case h.Type == wire.Call:
				s.reply(h, wire.OK, libVersionReply(1))
			}
		}
	})
	c := f.dial(t)
	con, err := c.OpenConsole(testContext(t), Domain{Name: "vm"}, "", ConsoleForce)
	if err != nil {
		t.Fatal(err)
	}
	long := append(bytes.Repeat([]byte("x"), wire.MaxStreamData+10), '\n')
	if n, err := con.Write(long); err != nil || n != len(long) {
		t.Fatalf("Write = %d, %v", n, err)
	}
	if p := <-typed; len(p) != wire.MaxStreamData {
		t.Fatalf("first keystroke frame carried %d bytes, want %d", len(p), wire.MaxStreamData)
	}
	if p := <-typed; len(p) != 11 {
		t.Fatalf("second keystroke frame carried %d bytes, want 11", len(p))
	}
	out, err := io.ReadAll(con)
	if err != nil {
		t.Fatalf("ReadAll: %v", err)
	}
	if want := "login: echo:" + string(long[wire.MaxStreamData:]); string(out) != want {
		t.Fatalf("read %d bytes %.20q…, want %d", len(out), out, len(want))
	}
	if _, err := con.Write([]byte("late")); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Write after the end = %v, want net.ErrClosed", err)
	}
	if err := con.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	select {
	case <-confirmed:
	case <-time.After(time.Second):
		t.Fatal("Close did not confirm the end of the stream")
	}
	if v, err := c.LibVersion(testContext(t)); err != nil || v != 1 {
		t.Fatalf("after the console: %d, %v", v, err)
	}
}

// A refused console (the domain is not running, say) is the server's error, and no stream.
func TestConsoleRefused(t *testing.T) {
	f := startFake(t, func(s *fakeSession) {
		call, _, err := s.read()
		if err != nil {
			return
		}
		s.replyError(call, 55, "Requested operation is not valid: domain is not running")
		for {
			h, _, err := s.read()
			if err != nil {
				return
			}
			if h.Type == wire.Stream {
				s.replyError(h, 1, "no stream expected")
				continue
			}
			s.reply(h, wire.OK, libVersionReply(1))
		}
	})
	c := f.dial(t)
	_, err := c.OpenConsole(testContext(t), Domain{Name: "vm"}, "", 0)
	var le *Error
	if !errors.As(err, &le) || le.Code != 55 || le.Procedure != "DOMAIN_OPEN_CONSOLE" {
		t.Fatalf("err = %v, want the server's error naming DOMAIN_OPEN_CONSOLE", err)
	}
	if v, err := c.LibVersion(testContext(t)); err != nil || v != 1 {
		t.Fatalf("after a refused console: %d, %v", v, err)
	}
}

// Close while a Read waits unblocks it, aborts the stream (Stream/Error, as virStreamAbort),
// and leaves the connection usable.
func TestConsoleCloseAborts(t *testing.T) {
	aborted := make(chan struct{})
	f := startFake(t, func(s *fakeSession) {
		call, _, err := s.read()
		if err != nil {
			return
		}
		s.reply(call, wire.OK, nil)
		for {
			h, _, err := s.read()
			if err != nil {
				return
			}
			switch {
			case h.Type == wire.Stream && h.Status == wire.Error:
				close(aborted)
			case h.Type == wire.Call:
				s.reply(h, wire.OK, libVersionReply(1))
			}
		}
	})
	c := f.dial(t)
	con, err := c.OpenConsole(testContext(t), Domain{Name: "vm"}, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	read := make(chan error, 1)
	go func() {
		_, err := con.Read(make([]byte, 10))
		read <- err
	}()
	time.Sleep(50 * time.Millisecond) // let Read block
	if err := con.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-read:
		if !errors.Is(err, net.ErrClosed) {
			t.Fatalf("Read after Close = %v", err)
		}
	case <-time.After(time.Second):
		t.Fatal("Close did not unblock Read")
	}
	select {
	case <-aborted:
	case <-time.After(time.Second):
		t.Fatal("Close did not abort the stream")
	}
	if v, err := c.LibVersion(testContext(t)); err != nil || v != 1 {
		t.Fatalf("after Close: %d, %v", v, err)
	}
}

// A console nobody reads never stalls the connection: other calls are answered while its
// output piles up, and past the backlog (in frames, or in bytes) the console ends with
// ErrConsoleOverrun after delivering, intact, what it held.
func TestConsoleOverrunNeverBlocksTheConnection(t *testing.T) {
	for _, tc := range []struct {
		name      string
		frameSize int // bytes per frame, each frame numbered in its first two bytes
		frames    int // sent before anything is read
		held      int // frames delivered before the overrun
	}{
		{"past the frames the backlog holds", 2, consoleBacklog + 10, consoleBacklog},
		{"past the bytes the backlog holds", 64 << 10, consoleBacklogBytes/(64<<10) + 4, consoleBacklogBytes / (64 << 10)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := floodConsole(t, tc.frameSize, tc.frames)
			if !errors.Is(err, ErrConsoleOverrun) {
				t.Fatalf("ReadAll = %d bytes, %v; want ErrConsoleOverrun", len(got), err)
			}
			if len(got) != tc.held*tc.frameSize {
				t.Fatalf("read %d bytes before the overrun, want the %d frames of %d bytes held", len(got), tc.held, tc.frameSize)
			}
			for i := range tc.held {
				if n := int(binary.BigEndian.Uint16(got[i*tc.frameSize:])); n != i {
					t.Fatalf("frame %d is frame %d: output out of order", i, n)
				}
			}
		})
	}
}

// floodConsole opens a console on a fake libvirtd that sends frames frames of frameSize bytes
// (the first two bytes the frame's number) before answering the next call, checks that the
// call is answered, then reads the console to its end.
func floodConsole(t *testing.T, frameSize, frames int) ([]byte, error) {
	f := startFake(t, func(s *fakeSession) {
		call, _, err := s.read()
		if err != nil {
			return
		}
		s.reply(call, wire.OK, nil)
		flooded := false
		for {
			h, _, err := s.read()
			if err != nil {
				return
			}
			if h.Type != wire.Call {
				continue
			}
			// The output goes out ahead of the first call's reply, so that reply proves
			// the router has handled all of it.
			for i := 0; !flooded && i < frames; i++ {
				data := make([]byte, frameSize)
				binary.BigEndian.PutUint16(data, uint16(i))
				s.write(streamFrame(call, wire.Continue, data))
			}
			flooded = true
			s.reply(h, wire.OK, libVersionReply(1))
		}
	})
	c := f.dial(t)
	con, err := c.OpenConsole(testContext(t), Domain{Name: "vm"}, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = con.Close() }() // the test's result is read before
	if v, err := c.LibVersion(testContext(t)); err != nil || v != 1 {
		t.Fatalf("a call behind an unread console: %d, %v", v, err)
	}
	return io.ReadAll(con)
}

// Output that is read frees the backlog: a session reading eight times the byte bound, half a
// backlog at a time, never overruns.
func TestConsoleBacklogFreedAsRead(t *testing.T) {
	const frameSize, perBatch, batches = 64 << 10, consoleBacklogBytes / (64 << 10) / 2, 16
	f := startFake(t, func(s *fakeSession) {
		call, _, err := s.read()
		if err != nil {
			return
		}
		s.reply(call, wire.OK, nil)
		for b := range batches {
			for range perBatch {
				s.write(streamFrame(call, wire.Continue, make([]byte, frameSize)))
			}
			if b == batches-1 {
				s.write(streamFrame(call, wire.Continue, nil)) // end of the guest side
				return
			}
			// The next batch only once the reader has taken this one and says so.
			if h, _, err := s.read(); err != nil || h.Type != wire.Stream {
				return
			}
		}
	})
	c := f.dial(t)
	con, err := c.OpenConsole(testContext(t), Domain{Name: "vm"}, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = con.Close() }()
	batch := make([]byte, perBatch*frameSize)
	for b := range batches {
		if _, err := io.ReadFull(con, batch); err != nil {
			t.Fatalf("batch %d of %d: %v", b+1, batches, err)
		}
		if b < batches-1 {
			if _, err := con.Write([]byte{'\n'}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if n, err := io.Copy(io.Discard, con); err != nil || n != 0 {
		t.Fatalf("after %d bytes: %d more, %v; want the end", batches*perBatch*frameSize, n, err)
	}
}
