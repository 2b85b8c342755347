package libvirt

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"banlieue.io/banlieue/pkg/libvirt/internal/wire"
	"banlieue.io/banlieue/pkg/libvirt/internal/xdr"
)

// A fuzzed libvirtd peer: it completes TLS and sends the confirmation byte like libvirtd,
// then answers the client's calls as a script decides. The script is the fuzz input:
//
//	byte 0      flags: bit 0 fuzz the session opening too (AUTH_LIST, CONNECT_OPEN),
//	            bit 1 aggressive keepalive (100 ms × 3), bits 2-3 number of calls - 1
//	byte 1..    operations, one opcode byte each followed by its arguments
//
// Whatever the script, the client must not panic, every call must end with a typed error (or
// succeed with the value of a reply that was really sent for it, never one meant for another
// call) within a bounded time, and nothing may be left running afterwards.

// When the script runs out the peer hangs up at once, so a call whose last packet the peer
// sent just before may still see the hang-up first; seeds that expect success end with a
// stall.
//
// Peer operations. Each consumes its opcode and the argument bytes listed.
const (
	opValid       = iota // answer the oldest unanswered call correctly
	opWrongSerial        // 1 arg: a valid answer under serial + arg (arg 0: serial 0xffffffff)
	opWrongProc          // 1 arg: a valid answer naming procedure arg
	opWrongType          // 1 arg: a valid answer of type arg%8 (Reply becomes Message)
	opWrongStatus        // 1 arg: a valid answer with status 2+arg
	opWrongProg          // 1 arg: a valid answer for another program or version
	opOversized          // 1 arg: a length prefix above 32 MiB
	opUndersized         // 1 arg: a length prefix below 28
	opTruncated          // 1 arg: a valid answer cut after arg bytes, then hang up
	opGarbage            // 1 arg n, n bytes: raw bytes on the wire
	opErrorReply         // 1 arg: a libvirt error (odd arg: an undecodable one)
	opRandomBody         // 1 arg n, n bytes: the right header with payload n bytes
	opHangUp             // close the connection
	opKeepAlive          // 1 arg: keepalive PING (even) or PONG (odd), or a keepalive with a body
	opEvent              // 1 arg: an event message (type Message) with serial arg
	opStall              // 1 arg: sleep arg%40 ms
	opStreamData         // 1 arg n, n bytes: Stream/Continue data for the open stream
	opStreamEnd          // Stream/Continue empty (end of data) for the open stream
	opStreamOK           // Stream/OK for the open stream (confirms the client's end)
	opSilent             // stop answering, keep the connection open: calls must time out
	opDuplicate          // resend the last frame sent
	opCount
)

// peerTimeout is the client's call timeout against the fuzzed peer; a call may wait for it a
// few times (stream open, data, finish) and the script itself is short.
const peerTimeout = 400 * time.Millisecond

// callBound is how long any call may take, whatever the peer does.
const callBound = 5 * time.Second

type fuzzPeer struct {
	ln     net.Listener
	script []byte
	wg     sync.WaitGroup
	stop   chan struct{}

	mu    sync.Mutex
	conns []net.Conn
}

func startFuzzPeer(t testing.TB, pki *testPKI, script []byte) *fuzzPeer {
	t.Helper()
	ln, err := tls.Listen("tcp", "127.0.0.1:0", pki.serverConfig())
	if err != nil {
		t.Fatal(err)
	}
	p := &fuzzPeer{ln: ln, script: script, stop: make(chan struct{})}
	p.wg.Go(func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			p.mu.Lock()
			p.conns = append(p.conns, conn)
			p.mu.Unlock()
			p.wg.Go(func() { p.session(conn) })
		}
	})
	return p
}

// close stops the peer and waits for every goroutine it started.
func (p *fuzzPeer) close() {
	close(p.stop)
	p.ln.Close()
	p.mu.Lock()
	for _, c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

type peerSession struct {
	p       *fuzzPeer
	conn    net.Conn
	calls   chan wire.Header
	pending []wire.Header
	last    []byte
	stream  *wire.Header // the download whose reply was sent
	counter uint64
	in      []byte
}

func (p *fuzzPeer) session(conn net.Conn) {
	defer conn.Close()
	if err := conn.(*tls.Conn).Handshake(); err != nil {
		return
	}
	if _, err := conn.Write([]byte{1}); err != nil {
		return
	}
	s := &peerSession{p: p, conn: conn, calls: make(chan wire.Header, 256), in: p.script}
	readerDone := make(chan struct{})
	go func() { // every frame the client sends, keepalives excepted
		defer close(readerDone)
		defer close(s.calls)
		r := bufio.NewReader(conn)
		for {
			h, _, err := wire.ReadFrame(r)
			if err != nil {
				return
			}
			if h.Program == wire.ProgramKeepAlive || h.Type != wire.Call {
				continue // keepalives and the client's stream packets
			}
			select {
			case s.calls <- h:
			case <-p.stop:
				return
			}
		}
	}()
	defer func() { conn.Close(); <-readerDone }()

	flags := s.byte()
	if flags&1 == 0 { // open the session properly; the script starts with the first real call
		for range 2 {
			if !s.answerValid() {
				return
			}
		}
	}
	for len(s.in) > 0 {
		if !s.op(s.byte() % opCount) {
			return
		}
	}
}

func (s *peerSession) byte() byte {
	if len(s.in) == 0 {
		return 0
	}
	b := s.in[0]
	s.in = s.in[1:]
	return b
}

func (s *peerSession) bytes(n int) []byte {
	n = min(n, len(s.in))
	b := s.in[:n]
	s.in = s.in[n:]
	return b
}

// next returns the oldest unanswered call, waiting briefly for one.
func (s *peerSession) next() (wire.Header, bool) {
	if len(s.pending) == 0 {
		select {
		case h, ok := <-s.calls:
			if !ok {
				return wire.Header{}, false
			}
			s.pending = append(s.pending, h)
		case <-time.After(100 * time.Millisecond):
			return wire.Header{}, false
		case <-s.p.stop:
			return wire.Header{}, false
		}
	}
	for more := true; more; { // collect whatever else has arrived
		select {
		case h, ok := <-s.calls:
			if ok {
				s.pending = append(s.pending, h)
			} else {
				more = false
			}
		default:
			more = false
		}
	}
	h := s.pending[0]
	s.pending = s.pending[1:]
	return h, true
}

func (s *peerSession) send(b []byte) bool {
	s.last = b
	_ = s.conn.SetWriteDeadline(time.Now().Add(2 * time.Second))
	_, err := s.conn.Write(b)
	return err == nil
}

func (s *peerSession) frame(h wire.Header, payload []byte) []byte {
	b := append(make([]byte, wire.MinFrame), payload...)
	wire.PutHeader(b, h)
	return b
}

// validPayload is a correct result for call's procedure; every one carries a fresh value so
// the test can tell which reply each caller received.
func (s *peerSession) validPayload(call wire.Header) []byte {
	s.counter++
	e := xdr.NewEncoder(nil)
	switch procedure(call.Procedure) {
	case procAuthList:
		e.Uint32(1)
		e.Int32(0)
	case procConnectGetLibVersion:
		e.Uint64(1000 + s.counter)
	case procDomainLookupByName:
		encodeDomain(e, Domain{Name: fmt.Sprintf("dom-%d", s.counter), ID: -1})
	case procConnectListAllDomains:
		e.Uint32(1)
		encodeDomain(e, Domain{Name: fmt.Sprintf("list-%d", s.counter), ID: -1})
		e.Uint32(1)
	}
	return e.Bytes()
}

func reply(call wire.Header) wire.Header {
	call.Type, call.Status = wire.Reply, wire.OK
	return call
}

func (s *peerSession) answerValid() bool {
	call, ok := s.next()
	if !ok {
		return true
	}
	if procedure(call.Procedure) == procStorageVolDownload {
		s.stream = &call
	}
	return s.send(s.frame(reply(call), s.validPayload(call)))
}

// op performs one operation; false ends the session (the connection is closed).
func (s *peerSession) op(op byte) bool {
	switch op {
	case opValid:
		return s.answerValid()
	case opWrongSerial, opWrongProc, opWrongType, opWrongStatus, opWrongProg:
		arg := s.byte()
		call, ok := s.next()
		if !ok {
			return true
		}
		h := reply(call)
		switch op {
		case opWrongSerial:
			if arg == 0 {
				h.Serial = 0xffffffff
			} else {
				h.Serial += uint32(arg)
			}
		case opWrongProc:
			h.Procedure = int32(arg)
		case opWrongType:
			h.Type = wire.Type(arg % 8)
			if h.Type == wire.Reply {
				h.Type = wire.Message
			}
		case opWrongStatus:
			h.Status = wire.Status(2 + uint32(arg))
		case opWrongProg:
			switch arg % 4 {
			case 0:
				h.Program = wire.ProgramQEMU
			case 1:
				h.Program = wire.ProgramKeepAlive
			case 2:
				h.Program = 0xdeadbeef
			default:
				h.Version = 2 + uint32(arg)
			}
		}
		return s.send(s.frame(h, s.validPayload(call)))
	case opOversized:
		lengths := []uint32{wire.MaxFrame + 1, 1 << 30, 0xffffffff, 0x80000000}
		b := binary.BigEndian.AppendUint32(nil, lengths[int(s.byte())%len(lengths)])
		return s.send(append(b, make([]byte, 64)...))
	case opUndersized:
		b := binary.BigEndian.AppendUint32(nil, uint32(s.byte())%wire.MinFrame)
		return s.send(append(b, make([]byte, 64)...))
	case opTruncated:
		cut := int(s.byte())
		call, ok := s.next()
		if !ok {
			return true
		}
		b := s.frame(reply(call), s.validPayload(call))
		s.send(b[:min(cut, len(b)-1)])
		return false
	case opGarbage:
		return s.send(s.bytes(int(s.byte())))
	case opErrorReply:
		arg := s.byte()
		call, ok := s.next()
		if !ok {
			return true
		}
		h := reply(call)
		h.Status = wire.Error
		e := xdr.NewEncoder(nil)
		if arg%2 == 0 {
			msg := "fuzzed failure"
			e.Int32(int32(arg))
			e.Int32(10)
			e.OptString(&msg)
		} else {
			e.Uint32(uint32(arg)) // a code and then nothing
		}
		return s.send(s.frame(h, e.Bytes()))
	case opRandomBody:
		n := int(s.byte())
		body := s.bytes(n)
		call, ok := s.next()
		if !ok {
			return true
		}
		return s.send(s.frame(reply(call), body))
	case opHangUp:
		return false
	case opKeepAlive:
		arg := s.byte()
		h := wire.Header{Program: wire.ProgramKeepAlive, Version: keepAliveProtocolVersion, Procedure: int32(keepAliveProcPing) + int32(arg%2), Type: wire.Message}
		var body []byte
		if arg >= 128 {
			body = []byte{0, 0, 0, arg}
		}
		return s.send(s.frame(h, body))
	case opEvent:
		h := wire.Header{Program: wire.ProgramRemote, Version: protocolVersion, Procedure: 107, Type: wire.Message, Serial: uint32(s.byte())}
		return s.send(s.frame(h, []byte{0, 0, 0, 1}))
	case opStall:
		select {
		case <-time.After(time.Duration(s.byte()%40) * time.Millisecond):
		case <-s.p.stop:
			return false
		}
		return true
	case opStreamData, opStreamEnd, opStreamOK:
		var body []byte
		if op == opStreamData {
			body = s.bytes(int(s.byte()))
		}
		if s.stream == nil {
			return true
		}
		h := *s.stream
		h.Type, h.Status = wire.Stream, wire.Continue
		if op == opStreamOK {
			h.Status = wire.OK
		}
		return s.send(s.frame(h, body))
	case opSilent:
		<-s.p.stop
		return false
	case opDuplicate:
		if s.last == nil {
			return true
		}
		return s.send(s.last)
	}
	return true
}

// typedPeerError reports whether err is one of the errors the client promises for a
// misbehaving or failing peer.
func typedPeerError(err error) bool {
	var (
		pe *ProtocolError
		ce *ConnError
		le *Error
		te *TimeoutError
	)
	return errors.As(err, &pe) || errors.As(err, &ce) || errors.As(err, &le) || errors.As(err, &te)
}

// connFatal reports whether err means the connection is gone.
func connFatal(err error) bool {
	var (
		pe *ProtocolError
		ce *ConnError
	)
	return errors.As(err, &pe) || errors.As(err, &ce)
}

type peerResult struct {
	dialErr error
	errs    []error
	values  []string // what the successful calls returned
}

// runPeer dials the scripted peer, makes the calls the script asks for at once, and checks
// every promise. It returns what happened for the table test to inspect.
func runPeer(t testing.TB, pki *testPKI, creds Credentials, script []byte) peerResult {
	t.Helper()
	before := runtime.NumGoroutine()
	var res peerResult
	func() {
		p := startFuzzPeer(t, pki, script)
		defer p.close()

		var flags byte
		if len(script) > 0 {
			flags = script[0]
		}
		d := Dialer{
			Endpoint:    Endpoint{Host: "127.0.0.1", Port: p.ln.Addr().(*net.TCPAddr).Port},
			Credentials: creds,
			Timeout:     peerTimeout,
		}
		if flags&2 != 0 {
			d.KeepAliveInterval, d.KeepAliveCount = 100*time.Millisecond, 3
		}
		ctx, cancel := context.WithTimeout(context.Background(), callBound)
		defer cancel()
		start := time.Now()
		c, err := d.Dial(ctx)
		if el := time.Since(start); el > callBound {
			t.Fatalf("Dial took %s", el)
		}
		if err != nil {
			res.dialErr = err
			if !typedPeerError(err) {
				t.Fatalf("Dial: untyped error %T: %v", err, err)
			}
			return
		}

		n := 1 + int(flags>>2&3)
		res.errs = make([]error, n)
		res.values = make([]string, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				// No caller deadline: only the client's own timeout and failure detection
				// may end the call.
				bg := context.Background()
				var v string
				var err error
				switch i % 4 {
				case 0:
					var n uint64
					n, err = c.LibVersion(bg)
					v = fmt.Sprint("version-", n)
				case 1:
					var d Domain
					d, err = c.DomainLookupByName(bg, "vm")
					v = d.Name
				case 2:
					var ds []Domain
					ds, err = c.ListAllDomains(bg)
					if len(ds) == 1 {
						v = ds[0].Name
					} else {
						v = fmt.Sprint(len(ds), " domains")
					}
				case 3:
					var n int64
					n, err = c.StorageVolDownload(bg, StorageVol{Pool: "p", Name: "v", Key: "/k"}, io.Discard, nil)
					v = fmt.Sprint("download-", i, "-", n) // nothing to compare across calls
				}
				res.errs[i], res.values[i] = err, v
			})
		}
		finished := make(chan struct{})
		go func() { wg.Wait(); close(finished) }()
		select {
		case <-finished:
		case <-time.After(callBound):
			buf := make([]byte, 1<<20)
			t.Fatalf("calls still running after %s\n%s", callBound, buf[:runtime.Stack(buf, true)])
		}
		seen := map[string]int{}
		for i, err := range res.errs {
			if err == nil {
				if prev, dup := seen[res.values[i]]; dup {
					t.Fatalf("calls %d and %d both received %q: a reply was delivered twice", prev, i, res.values[i])
				}
				seen[res.values[i]] = i
				continue
			}
			if !typedPeerError(err) {
				t.Fatalf("call %d: untyped error %T: %v", i, err, err)
			}
			if connFatal(err) {
				select {
				case <-c.Done():
				case <-time.After(time.Second):
					t.Fatalf("call %d failed with %v but the connection is still open", i, err)
				}
			}
		}
		c.Close()
	}()
	// Everything the client and the peer started must have ended.
	deadline := time.Now().Add(2 * time.Second)
	for runtime.NumGoroutine() > before+1 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if after := runtime.NumGoroutine(); after > before+1 {
		buf := make([]byte, 1<<20)
		t.Fatalf("goroutines: %d before, %d after\n%s", before, after, buf[:runtime.Stack(buf, true)])
	}
	return res
}

// peerSeeds are the scripts of the table test and the seeds of FuzzPeer.
var peerSeeds = []struct {
	name   string
	script []byte
	want   string // substring of the first failing call's (or Dial's) error; "" = all succeed
}{
	{"valid", []byte{0x0c, opValid, opValid, opValid, opValid, opStreamEnd, opStreamOK, opStall, 39}, ""},
	{"unknown serial", []byte{0x00, opWrongSerial, 0}, "serial 4294967295 was never sent"},
	{"future serial", []byte{0x00, opWrongSerial, 200}, "was never sent"},
	{"wrong procedure", []byte{0x00, opWrongProc, 99}, "stream desynchronised"},
	{"message instead of reply", []byte{0x00, opWrongType, 1, opSilent}, "timed out after 400ms"}, // an event: ignored
	// A non-stream call answered with stream data.
	{"stream before the reply", []byte{0x00, opWrongType, 3}, "unexpected message type 3"},
	{"call instead of reply", []byte{0x00, opWrongType, 0}, "unexpected message type 0"},
	{"unknown status", []byte{0x00, opWrongStatus, 5}, "unexpected status 7"},
	{"other program", []byte{0x00, opWrongProg, 2}, "unknown program"},
	{"qemu program", []byte{0x00, opWrongProg, 0}, "stream desynchronised"},
	{"other version", []byte{0x00, opWrongProg, 3}, "stream desynchronised"},
	{"length 33554433", []byte{0x00, opOversized, 0}, "frame length 33554433"},
	{"length 1 GiB", []byte{0x00, opOversized, 1}, "frame length 1073741824"},
	{"length 4 GiB-1", []byte{0x00, opOversized, 2}, "frame length 4294967295"},
	{"length 0", []byte{0x00, opUndersized, 0}, "frame length 0"},
	{"length 27", []byte{0x00, opUndersized, 27}, "frame length 27"},
	{"truncated header", []byte{0x00, opTruncated, 10}, "unexpected EOF"},
	{"truncated payload", []byte{0x00, opTruncated, 30}, "unexpected EOF"},
	{"garbage", []byte{0x00, opGarbage, 8, 'g', 'a', 'r', 'b', 'a', 'g', 'e', '!'}, "protocol violation"},
	{"libvirt error", []byte{0x00, opErrorReply, 42}, "fuzzed failure"},
	{"undecodable error", []byte{0x00, opErrorReply, 1}, "undecodable error reply"},
	{"undecodable error, then silence", []byte{0x00, opErrorReply, 1, opSilent}, "undecodable error reply"},
	{"short body", []byte{0x00, opRandomBody, 3, 1, 2, 3}, "decoding CONNECT_GET_LIB_VERSION reply"},
	{"long body", []byte{0x00, opRandomBody, 12, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0}, "decoding CONNECT_GET_LIB_VERSION reply"},
	{"hang up", []byte{0x00, opHangUp}, "connection closed by libvirtd"},
	{"silent", []byte{0x00, opSilent}, "timed out after 400ms"},
	{"silent with keepalive", []byte{0x02, opSilent}, "libvirtd sent nothing"},
	{"duplicate reply", []byte{0x04, opValid, opDuplicate, opValid}, ""},
	{"ping then valid", []byte{0x00, opKeepAlive, 0, opValid}, ""},
	{"keepalive with body", []byte{0x00, opKeepAlive, 200, opValid}, ""},
	{"event then valid", []byte{0x00, opEvent, 7, opValid}, ""},
	{"stall then valid", []byte{0x00, opStall, 30, opValid}, ""},
	{"auth list garbage", []byte{0x01, opRandomBody, 4, 0xff, 0xff, 0xff, 0xff}, "decoding AUTH_LIST reply"},
	{"auth list wrong serial", []byte{0x01, opWrongSerial, 9}, "was never sent"},
	{"auth list silent", []byte{0x01, opSilent}, "timed out"},
	{"auth list sasl only", []byte{0x01, opRandomBody, 8, 0, 0, 0, 1, 0, 0, 0, 1}, "requires authentication"},
	{"download: data then end", []byte{0x0c, opValid, opValid, opValid, opValid, opStreamData, 3, 'a', 'b', 'c', opStreamEnd, opStreamOK, opStall, 39}, ""},
	{"download: data after end", []byte{0x0c, opValid, opValid, opValid, opValid, opStreamEnd, opStreamData, 1, 'x', opStall, 39}, "data after end of stream"},
	{"download: hang up mid-stream", []byte{0x0c, opValid, opValid, opValid, opValid, opStreamData, 2, 'a', 'b', opHangUp}, "connection closed by libvirtd"},
}

// TestPeerMisbehaviour runs the seed scripts deterministically: every fault class once, with
// the error the client must report for it.
func TestPeerMisbehaviour(t *testing.T) {
	pki := newTestPKI(t)
	creds := pki.credentials(t)
	for _, tt := range peerSeeds {
		t.Run(tt.name, func(t *testing.T) {
			res := runPeer(t, pki, creds, tt.script)
			first := res.dialErr
			for _, err := range res.errs {
				if first == nil {
					first = err
				}
			}
			switch {
			case tt.want == "" && first != nil:
				t.Fatalf("want success, got %v (all: %v)", first, res.errs)
			case tt.want != "" && (first == nil || !strings.Contains(first.Error(), tt.want)):
				t.Fatalf("err = %v, want %q", first, tt.want)
			}
		})
	}
}

// FuzzPeer drives the fake peer from the fuzz input; see the top of this file.
//
//	go test ./pkg/libvirt -run '^$' -fuzz FuzzPeer -fuzztime 60s
func FuzzPeer(f *testing.F) {
	for _, s := range peerSeeds {
		f.Add(s.script)
	}
	pki := newTestPKI(f)
	creds := pki.credentials(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 512 {
			data = data[:512] // keeps one run short; longer scripts add nothing new
		}
		runPeer(t, pki, creds, data)
	})
}

// A frame claiming a huge length is refused from its prefix: the client allocates nothing
// near the size it claims.
func TestPeerOversizedFrameRejectedBeforeAllocation(t *testing.T) {
	pki := newTestPKI(t)
	creds := pki.credentials(t)
	for _, n := range []uint32{wire.MaxFrame + 1, 1 << 30, 0xffffffff} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			ln, err := tls.Listen("tcp", "127.0.0.1:0", pki.serverConfig())
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			send := make(chan struct{})
			done := make(chan struct{})
			go func() {
				defer close(done)
				conn, err := ln.Accept()
				if err != nil {
					return
				}
				defer conn.Close()
				s := &fakeSession{t: t, conn: conn, r: bufio.NewReader(conn)}
				if conn.(*tls.Conn).Handshake() != nil {
					return
				}
				s.write([]byte{1})
				for range 2 { // AUTH_LIST, CONNECT_OPEN
					h, _, err := s.read()
					if err != nil {
						return
					}
					s.reply(h, wire.OK, func(e *xdr.Encoder) {
						if procedure(h.Procedure) == procAuthList {
							e.Uint32(1)
							e.Int32(0)
						}
					})
				}
				if _, _, err := s.read(); err != nil {
					return
				}
				<-send
				// The length, a plausible header, and then a stream of bytes the client
				// would have to buffer if it believed the length.
				b := binary.BigEndian.AppendUint32(nil, n)
				b = append(b, make([]byte, 1<<20)...)
				s.write(b)
			}()
			d := Dialer{Endpoint: Endpoint{Host: "127.0.0.1", Port: ln.Addr().(*net.TCPAddr).Port}, Credentials: creds, Timeout: 2 * time.Second}
			c, err := d.Dial(testContext(t))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			runtime.GC()
			var m0, m1 runtime.MemStats
			runtime.ReadMemStats(&m0)
			errc := make(chan error, 1)
			go func() { _, err := c.LibVersion(context.Background()); errc <- err }()
			close(send)
			err = <-errc
			runtime.ReadMemStats(&m1)
			<-done
			if !errors.As(err, new(*ConnError)) || !strings.Contains(err.Error(), fmt.Sprintf("frame length %d", n)) {
				t.Fatalf("err = %v, want a ConnError naming the frame length", err)
			}
			if delta := m1.TotalAlloc - m0.TotalAlloc; delta > 8<<20 {
				t.Fatalf("allocated %d bytes for a frame claiming %d", delta, n)
			}
		})
	}
}

// A peer that streams data before answering a download call may make the client hold at most
// maxEarlyFrames frames. libvirtd never sends more than wire.MaxStreamData per data packet,
// so what is held should stay within maxEarlyFrames × MaxStreamData (16 MiB), not
// maxEarlyFrames × MaxFrame (2 GiB).
func TestPeerEarlyStreamFramesBounded(t *testing.T) {
	const frames = 6
	var once sync.Once
	release := make(chan struct{})
	// One buffer for every frame: this peer outlives the test, and fresh 32 MiB buffers
	// allocated after the client hung up would count in a later test's TotalAlloc. Allocated
	// before the baseline is read, so the peer's own buffer is not taken for the client's.
	b := make([]byte, wire.MaxFrame)
	f := startFake(t, func(s *fakeSession) {
		h, _, err := s.read()
		if err != nil {
			return
		}
		h.Type, h.Status = wire.Stream, wire.Continue
		wire.PutHeader(b, h)
		for range frames {
			s.write(b)
		}
		<-release
	})
	t.Cleanup(func() { once.Do(func() { close(release) }) })
	c := f.dial(t)
	runtime.GC()
	var m0 runtime.MemStats
	runtime.ReadMemStats(&m0)
	errc := make(chan error, 1)
	go func() {
		_, err := c.StorageVolDownload(context.Background(), StorageVol{Pool: "p", Name: "v"}, io.Discard, nil)
		errc <- err
	}()
	var peak uint64
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		peak = max(peak, m.HeapInuse)
		select {
		case err := <-errc:
			t.Logf("download: %v", err)
			deadline = time.Now()
		case <-time.After(50 * time.Millisecond):
		}
	}
	once.Do(func() { close(release) })
	held := int64(peak) - int64(m0.HeapInuse)
	t.Logf("peak heap held above the start: %d KiB", held>>10)
	if held > 24<<20 {
		t.Fatalf("client held %d MiB of stream data sent before the reply (%d frames of 32 MiB)", held>>20, frames)
	}
}

// A frame that announces the maximum length and then delivers a few bytes costs the client
// what arrived, not what was announced, whether the peer then hangs up or stalls.
func TestPeerAnnouncedFrameAllocatedAsReceived(t *testing.T) {
	for _, tt := range []struct {
		name   string
		hangUp bool
	}{{"hang up", true}, {"stall", false}} {
		t.Run(tt.name, func(t *testing.T) {
			release := make(chan struct{})
			defer close(release)
			f := startFake(t, func(s *fakeSession) {
				h, _, err := s.read()
				if err != nil {
					return
				}
				h.Type, h.Status = wire.Reply, wire.OK
				b := make([]byte, wire.MinFrame+100)
				wire.PutHeader(b, h)
				binary.BigEndian.PutUint32(b, wire.MaxFrame)
				s.write(b)
				if !tt.hangUp {
					<-release
				}
			})
			d := f.dialer()
			d.Timeout = 500 * time.Millisecond
			c, err := d.Dial(testContext(t))
			if err != nil {
				t.Fatal(err)
			}
			defer c.fail("close", ErrConnectionClosed)
			runtime.GC()
			var m0, m1 runtime.MemStats
			runtime.ReadMemStats(&m0)
			_, err = c.LibVersion(context.Background())
			runtime.ReadMemStats(&m1)
			delta := m1.TotalAlloc - m0.TotalAlloc
			t.Logf("err = %v; allocated %d KiB during the call", err, delta>>10)
			if tt.hangUp {
				if !errors.As(err, new(*ConnError)) || !errors.Is(err, io.ErrUnexpectedEOF) {
					t.Fatalf("err = %v, want a ConnError for the truncated frame", err)
				}
			} else if !errors.As(err, new(*TimeoutError)) {
				t.Fatalf("err = %v, want a TimeoutError", err)
			}
			if delta > 2<<20 {
				t.Fatalf("allocated %d bytes for a frame announcing %d and carrying 100", delta, wire.MaxFrame)
			}
		})
	}
}
