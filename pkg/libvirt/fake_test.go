package libvirt

import (
	"bufio"
	"crypto/tls"
	"net"
	"sync"
	"testing"
	"time"

	"banlieue.io/banlieue/pkg/libvirt/internal/wire"
	"banlieue.io/banlieue/pkg/libvirt/internal/xdr"
)

// fakeLibvirtd is an in-process TLS server speaking enough of libvirt's protocol to test
// the client's behaviour against misbehaving or scripted peers.
type fakeLibvirtd struct {
	pki       *testPKI
	creds     Credentials
	ln        net.Listener
	authTypes []int32
	serve     func(*fakeSession) // after AUTH_LIST and CONNECT_OPEN
}

type fakeSession struct {
	t    testing.TB
	conn net.Conn
	r    *bufio.Reader
	mu   sync.Mutex
}

func startFake(t testing.TB, serve func(*fakeSession)) *fakeLibvirtd {
	t.Helper()
	pki := newTestPKI(t)
	ln, err := tls.Listen("tcp", "127.0.0.1:0", pki.serverConfig())
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeLibvirtd{pki: pki, creds: pki.credentials(t), ln: ln, authTypes: []int32{0}, serve: serve}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go f.session(t, conn)
		}
	}()
	return f
}

func (f *fakeLibvirtd) session(t testing.TB, conn net.Conn) {
	defer conn.Close()
	if err := conn.(*tls.Conn).Handshake(); err != nil {
		return
	}
	if _, err := conn.Write([]byte{1}); err != nil {
		return
	}
	s := &fakeSession{t: t, conn: conn, r: bufio.NewReader(conn)}
	h, _, err := s.read()
	if err != nil || procedure(h.Procedure) != procAuthList {
		return
	}
	s.reply(h, wire.OK, func(e *xdr.Encoder) {
		e.Uint32(uint32(len(f.authTypes)))
		for _, a := range f.authTypes {
			e.Int32(a)
		}
	})
	if h, _, err = s.read(); err != nil || procedure(h.Procedure) != procConnectOpen {
		return
	}
	s.reply(h, wire.OK, nil)
	if f.serve != nil {
		f.serve(s)
	}
}

func (f *fakeLibvirtd) dialer() Dialer {
	addr := f.ln.Addr().(*net.TCPAddr)
	return Dialer{
		Endpoint:    Endpoint{Host: "127.0.0.1", Port: addr.Port},
		Credentials: f.creds,
		Timeout:     5 * time.Second,
	}
}

func (f *fakeLibvirtd) dial(t testing.TB) *Client {
	t.Helper()
	return f.dialTimeout(t, f.dialer().Timeout)
}

// dialTimeout is dial with the client's call timeout set to d.
func (f *fakeLibvirtd) dialTimeout(t testing.TB, d time.Duration) *Client {
	t.Helper()
	dialer := f.dialer()
	dialer.Timeout = d
	c, err := dialer.Dial(testContext(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.fail("close", ErrConnectionClosed) })
	return c
}

// read returns the next message that is not a keepalive.
func (s *fakeSession) read() (wire.Header, []byte, error) {
	for {
		h, p, err := wire.ReadFrame(s.r)
		if err != nil || h.Program != wire.ProgramKeepAlive {
			return h, p, err
		}
	}
}

func (s *fakeSession) write(b []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, _ = s.conn.Write(b)
}

// reply answers call with status and the payload ret encodes.
func (s *fakeSession) reply(call wire.Header, st wire.Status, ret func(*xdr.Encoder)) {
	b := newFrame(ret)
	call.Type, call.Status = wire.Reply, st
	wire.PutHeader(b, call)
	s.write(b)
}

// replyError answers call with a libvirt error.
func (s *fakeSession) replyError(call wire.Header, code int32, msg string) {
	s.reply(call, wire.Error, func(e *xdr.Encoder) {
		e.Int32(code)
		e.Int32(10) // VIR_FROM_QEMU
		e.OptString(&msg)
		e.Int32(2)       // level
		e.OptString(nil) // dom
		e.OptString(nil) // str1
		e.OptString(nil) // str2
		e.OptString(nil) // str3
		e.Int32(0)
		e.Int32(0)
		e.OptString(nil) // net
	})
}

func libVersionReply(v uint64) func(*xdr.Encoder) {
	return func(e *xdr.Encoder) { e.Uint64(v) }
}
