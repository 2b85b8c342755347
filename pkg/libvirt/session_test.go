package libvirt

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"banlieue.io/banlieue/pkg/libvirt/internal/wire"
	"banlieue.io/banlieue/pkg/libvirt/internal/xdr"
)

// Replies come back in the reverse order of the calls; each caller must get its own.
func TestRepliesRoutedBySerial(t *testing.T) {
	const n = 8
	f := startFake(t, func(s *fakeSession) {
		var calls []wire.Header
		for range n {
			h, _, err := s.read()
			if err != nil {
				return
			}
			calls = append(calls, h)
		}
		for i := len(calls) - 1; i >= 0; i-- {
			s.reply(calls[i], wire.OK, libVersionReply(uint64(calls[i].Serial)))
		}
		select {} // keep the connection open
	})
	c := f.dial(t)
	var wg sync.WaitGroup
	var mu sync.Mutex
	seen := map[uint64]bool{}
	for range n {
		wg.Go(func() {
			v, err := c.LibVersion(testContext(t))
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			seen[v] = true
			mu.Unlock()
		})
	}
	wg.Wait()
	// Serials 0 and 1 went to AUTH_LIST and CONNECT_OPEN.
	for serial := uint64(2); serial < 2+n; serial++ {
		if !seen[serial] {
			t.Fatalf("no caller received the reply for serial %d; got %v", serial, seen)
		}
	}
}

// A cancelled call's reply arrives later and must be dropped, not handed to the next call.
func TestCancelledCallLateReplyIsDiscarded(t *testing.T) {
	f := startFake(t, func(s *fakeSession) {
		slow, _, err := s.read()
		if err != nil {
			return
		}
		next, _, err := s.read()
		if err != nil {
			return
		}
		s.reply(slow, wire.OK, libVersionReply(111))
		s.reply(next, wire.OK, libVersionReply(222))
		select {}
	})
	c := f.dial(t)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if _, err := c.LibVersion(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("cancelled call: err = %v, want DeadlineExceeded", err)
	}
	v, err := c.LibVersion(testContext(t))
	if err != nil || v != 222 {
		t.Fatalf("next call = %d, %v; want 222 (the late 111 belongs to the cancelled call)", v, err)
	}
	if c.Err() != nil {
		t.Fatalf("connection broken after a cancellation: %v", c.Err())
	}
}

func TestDefaultTimeout(t *testing.T) {
	f := startFake(t, func(s *fakeSession) {
		if _, _, err := s.read(); err != nil { // never answered
			return
		}
		h, _, err := s.read()
		if err != nil {
			return
		}
		s.reply(h, wire.OK, libVersionReply(9000000))
		select {}
	})
	c := f.dialTimeout(t, 200*time.Millisecond)
	_, err := c.LibVersion(context.Background())
	var te *TimeoutError
	if !errors.As(err, &te) || err.Error() != "CONNECT_GET_LIB_VERSION timed out after 200ms" || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want CONNECT_GET_LIB_VERSION timed out after 200ms", err)
	}
	if v, err := c.LibVersion(context.Background()); err != nil || v != 9000000 {
		t.Fatalf("after a timeout: %d, %v", v, err)
	}
}

// A call made WithCallTimeout waits its own timeout, longer or shorter than the client's, and
// says so when it expires.
func TestWithCallTimeout(t *testing.T) {
	f := startFake(t, func(s *fakeSession) {
		h, _, err := s.read()
		if err != nil {
			return
		}
		time.Sleep(400 * time.Millisecond) // past the client's timeout, within the call's
		s.reply(h, wire.OK, libVersionReply(9000000))
		select {}
	})
	c := f.dialTimeout(t, 200*time.Millisecond)
	if v, err := c.LibVersion(WithCallTimeout(context.Background(), 2*time.Second)); err != nil || v != 9000000 {
		t.Fatalf("a reply after 400 ms within a 2 s call timeout: %d, %v", v, err)
	}
	_, err := c.LibVersion(WithCallTimeout(context.Background(), 50*time.Millisecond))
	if err == nil || err.Error() != "CONNECT_GET_LIB_VERSION timed out after 50ms" {
		t.Fatalf("err = %v, want CONNECT_GET_LIB_VERSION timed out after 50ms", err)
	}
}

func TestErrorReply(t *testing.T) {
	f := startFake(t, func(s *fakeSession) {
		for {
			h, _, err := s.read()
			if err != nil {
				return
			}
			s.replyError(h, ErrNoStoragePool, "Storage pool not found: no storage pool with matching name 'x'")
		}
	})
	c := f.dial(t)
	_, err := c.StoragePoolLookupByName(testContext(t), "x")
	var le *Error
	if !errors.As(err, &le) || le.Code != 49 || le.Domain != 10 || le.Procedure != "STORAGE_POOL_LOOKUP_BY_NAME" {
		t.Fatalf("err = %#v", err)
	}
	// The error names the procedure libvirtd refused, so a caller's message says which call failed.
	if err.Error() != "libvirt STORAGE_POOL_LOOKUP_BY_NAME: error (code 49): Storage pool not found: no storage pool with matching name 'x'" {
		t.Fatalf("Error() = %q", err)
	}
	if !IsNotFound(err) || IsNotFound(&Error{Code: 38}) || IsNotFound(errors.New("x")) {
		t.Fatal("IsNotFound misclassifies")
	}
}

// Without "none" among AUTH_LIST's types the session needs SASL or polkit, which this client
// does not speak: Dial refuses with ErrAuthRequired, naming what was offered.
func TestAuthListWithoutNone(t *testing.T) {
	for _, tt := range []struct {
		types   []int32
		offered string // "" = Dial succeeds
	}{
		{[]int32{1, 2}, "offered [sasl polkit]"},
		{[]int32{1}, "offered [sasl]"},
		{[]int32{99}, "offered [99]"},
		{nil, "offered []"},
		{[]int32{1, 0}, ""},
	} {
		t.Run(fmt.Sprint(tt.types), func(t *testing.T) {
			f := startFake(t, nil)
			f.authTypes = tt.types
			c, err := f.dialer().Dial(testContext(t))
			if tt.offered == "" {
				if err != nil {
					t.Fatal(err)
				}
				c.Close()
				return
			}
			var ce *ConnError
			if !errors.Is(err, ErrAuthRequired) || !errors.As(err, &ce) || ce.Op != "session" {
				t.Fatalf("err = %#v, want a session ConnError wrapping ErrAuthRequired", err)
			}
			if !strings.Contains(err.Error(), "requires authentication this client does not implement ("+tt.offered+";") {
				t.Fatalf("err = %v, want it to say %q", err, tt.offered)
			}
		})
	}
}

// A reply whose procedure differs from the call's means the peers disagree about the
// session; the connection must die rather than hand out wrong data.
func TestReplyForOtherProcedureIsFatal(t *testing.T) {
	f := startFake(t, func(s *fakeSession) {
		h, _, err := s.read()
		if err != nil {
			return
		}
		h.Procedure = int32(procDomainLookupByName)
		s.reply(h, wire.OK, libVersionReply(1))
		select {}
	})
	c := f.dial(t)
	_, err := c.LibVersion(testContext(t))
	var pe *ProtocolError
	if !errors.As(err, &pe) || !strings.Contains(err.Error(), "stream desynchronised") || !errors.Is(err, ErrConnectionClosed) {
		t.Fatalf("err = %v", err)
	}
	<-c.Done()
}

func TestOversizedFrameIsRejected(t *testing.T) {
	f := startFake(t, func(s *fakeSession) {
		if _, _, err := s.read(); err != nil {
			return
		}
		s.write([]byte{0xff, 0xff, 0xff, 0xff})
		select {}
	})
	c := f.dial(t)
	_, err := c.LibVersion(testContext(t))
	if err == nil || !strings.Contains(err.Error(), "protocol violation: frame length 4294967295") {
		t.Fatalf("err = %v", err)
	}
}

func TestUndecodableReplyIsFatal(t *testing.T) {
	f := startFake(t, func(s *fakeSession) {
		h, _, err := s.read()
		if err != nil {
			return
		}
		s.reply(h, wire.OK, func(e *xdr.Encoder) { e.Uint32(1 << 30) }) // pool count far above the limit
		select {}
	})
	c := f.dial(t)
	_, err := c.ListAllStoragePools(testContext(t))
	if err == nil || !strings.Contains(err.Error(), "exceeds maximum 16384") {
		t.Fatalf("err = %v", err)
	}
	<-c.Done()
}

// A peer that stops answering (host gone, no FIN) is declared dead by keepalive, and every
// pending call fails at once instead of waiting out its own timeout.
func TestKeepAliveDeclaresSilentPeerDead(t *testing.T) {
	f := startFake(t, func(s *fakeSession) { select {} }) // reads nothing, answers nothing
	d := f.dialer()
	d.Timeout = time.Minute
	d.KeepAliveInterval, d.KeepAliveCount = 100*time.Millisecond, 3
	c, err := d.Dial(testContext(t))
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			_, err := c.LibVersion(context.Background())
			var ce *ConnError
			if !errors.As(err, &ce) || ce.Op != "keepalive" || !errors.Is(err, ErrConnectionClosed) {
				t.Errorf("err = %v, want a keepalive ConnError", err)
			}
		})
	}
	wg.Wait()
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("pending calls failed after %s; keepalive window is 300ms", d)
	}
	if c.Err() == nil {
		t.Fatal("Err() = nil after keepalive failure")
	}
}

// The client answers libvirtd's pings and pings an idle peer itself.
func TestKeepAlivePingPong(t *testing.T) {
	gotPing, gotPong := make(chan struct{}), make(chan struct{})
	f := startFake(t, func(s *fakeSession) {
		s.write(keepAliveFrame(keepAliveProcPing))
		var pinged, ponged bool
		for {
			h, _, err := wire.ReadFrame(s.r)
			if err != nil {
				return
			}
			if h.Program != wire.ProgramKeepAlive || h.Type != wire.Message {
				continue
			}
			switch procedure(h.Procedure) {
			case keepAliveProcPing:
				if !pinged {
					pinged = true
					close(gotPing)
				}
				s.write(keepAliveFrame(keepAliveProcPong))
			case keepAliveProcPong:
				if !ponged {
					ponged = true
					close(gotPong)
				}
			}
		}
	})
	d := f.dialer()
	d.KeepAliveInterval, d.KeepAliveCount = 50*time.Millisecond, 5
	c, err := d.Dial(testContext(t))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for name, ch := range map[string]chan struct{}{"ping": gotPing, "pong": gotPong} {
		select {
		case <-ch:
		case <-time.After(2 * time.Second):
			t.Fatalf("server never received a %s", name)
		}
	}
	time.Sleep(400 * time.Millisecond) // several keepalive windows, answered by pongs
	if err := c.Err(); err != nil {
		t.Fatalf("healthy connection closed: %v", err)
	}
}

func TestCallsAfterCloseFail(t *testing.T) {
	f := startFake(t, func(s *fakeSession) {
		for {
			h, _, err := s.read()
			if err != nil {
				return
			}
			s.reply(h, wire.OK, nil)
		}
	})
	c := f.dial(t)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	<-c.Done()
	if _, err := c.LibVersion(testContext(t)); !errors.Is(err, ErrConnectionClosed) {
		t.Fatalf("err = %v, want ErrConnectionClosed", err)
	}
}

func TestReplyWithUnsentSerialIsFatal(t *testing.T) {
	f := startFake(t, func(s *fakeSession) {
		h, _, err := s.read()
		if err != nil {
			return
		}
		h.Serial += 1000
		s.reply(h, wire.OK, libVersionReply(1))
		select {}
	})
	c := f.dial(t)
	_, err := c.LibVersion(testContext(t))
	if err == nil || !strings.Contains(err.Error(), "reply serial mismatch") || !errors.Is(err, ErrConnectionClosed) {
		t.Fatalf("err = %v", err)
	}
}
