package libvirt

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"banlieue.io/banlieue/pkg/libvirt/internal/wire"
	"banlieue.io/banlieue/pkg/libvirt/internal/xdr"
)

// DefaultTimeout bounds the connect path and every call that has no earlier deadline.
const DefaultTimeout = 30 * time.Second

// Client is an open libvirt session over one TLS connection. It is safe for concurrent use:
// calls are multiplexed by serial number and a single reader goroutine routes replies, so a
// slow call never blocks another.
//
// A Client does not reconnect. When the connection ends, Done is closed, Err says why, and
// every pending and later call fails with an error matching ErrConnectionClosed; the owner
// dials a new Client (see Dialer).
type Client struct {
	conn     net.Conn
	addr     string
	timeout  time.Duration
	observer CallObserver  // nil: nobody watches
	uploads  UploadLimiter // nil: uploads are not bounded (limit.go)

	// sendSem admits one frame writer at a time; a channel rather than a mutex so that
	// waiting for it honours the caller's context.
	sendSem chan struct{}

	mu      sync.Mutex
	issued  uint64 // serials handed out; the next call's serial is uint32(issued)
	pending map[uint32]*pendingCall

	lastRecv atomic.Int64   // UnixNano of the last frame received, for keepalive
	kaOut    chan procedure // keepalive messages (PING, PONG) waiting to be sent

	// subs routes event messages by libvirtd's callback ID (events.go); subsEnded is set once
	// the connection has ended and every subscription was closed.
	subsMu    sync.Mutex
	subs      map[int32]*DomainEventSubscription
	subsEnded bool

	done      chan struct{}
	closeOnce sync.Once
	err       error // why done was closed; written once, before close(done)
}

// pendingCall is a call waiting for frames with its serial.
type pendingCall struct {
	prog   uint32
	proc   procedure
	frames chan frame
	stream bool
	// gone is closed when the caller stops reading, so the router never blocks on a
	// stream nobody consumes.
	gone chan struct{}
	// overrun, when not nil, makes the stream lossy-intolerant but never blocking: a frame
	// that finds frames full, or would hold more than maxQueued bytes waiting, closes overrun
	// and it and every later frame are dropped, so a console nobody reads fast enough ends
	// instead of stalling every call of the connection (console.go). overran is set once
	// overrun is closed; only the router touches either. queued counts the payload bytes
	// routed and not yet taken (took).
	overrun   chan struct{}
	overran   bool
	maxQueued int64
	queued    atomic.Int64
}

// took returns f, a frame the caller received from pc.frames, and releases its bytes from the
// lossless stream's backlog.
func (pc *pendingCall) took(f frame) frame {
	if pc.overrun != nil {
		pc.queued.Add(-int64(len(f.payload)))
	}
	return f
}

type frame struct {
	h       wire.Header
	payload []byte
}

// streamBacklog is how many stream frames (≤256 KiB each) may wait for a slow consumer
// before the router stops reading the socket, leaving TCP to slow the server down.
const streamBacklog = 4

func newClient(conn net.Conn, addr string, timeout, kaInterval time.Duration, kaCount int, observer CallObserver) *Client {
	c := &Client{
		conn:     conn,
		addr:     addr,
		timeout:  timeout,
		observer: observer,
		sendSem:  make(chan struct{}, 1),
		pending:  make(map[uint32]*pendingCall),
		kaOut:    make(chan procedure, 4),
		done:     make(chan struct{}),
	}
	c.lastRecv.Store(time.Now().UnixNano())
	go c.readLoop()
	go c.keepAliveSender()
	if kaInterval > 0 && kaCount > 0 {
		go c.keepAlive(kaInterval, kaCount)
	}
	return c
}

// Done is closed when the connection has ended.
func (c *Client) Done() <-chan struct{} { return c.done }

// Err returns nil while the connection is usable, then the reason it ended: a *ConnError
// (which matches ErrConnectionClosed).
func (c *Client) Err() error {
	select {
	case <-c.done:
		return c.err
	default:
		return nil
	}
}

// Close tells libvirtd the session is over (CONNECT_CLOSE, best effort, at most 2 s) and
// closes the connection. Pending calls fail with ErrConnectionClosed.
func (c *Client) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	_ = c.call(ctx, wire.ProgramRemote, procConnectClose, nil, nil)
	cancel()
	c.fail("close", ErrConnectionClosed)
	return nil
}

// fail ends the connection once; the first cause wins.
func (c *Client) fail(op string, err error) {
	c.closeOnce.Do(func() {
		c.err = &ConnError{Op: op, Addr: c.addr, Err: err}
		close(c.done)
		c.conn.Close()
		c.endSubscriptions()
	})
}

func (c *Client) readLoop() {
	r := bufio.NewReaderSize(c.conn, 64<<10)
	for {
		h, payload, err := wire.ReadFrame(r)
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = errors.New("connection closed by libvirtd (EOF)")
			}
			c.fail("read", err)
			return
		}
		c.lastRecv.Store(time.Now().UnixNano())
		if err := c.route(frame{h: h, payload: payload}); err != nil {
			c.fail("read", err)
			return
		}
	}
}

// route hands a frame to the call waiting for it. Frames for calls that were abandoned
// (cancelled or timed out) are dropped, which is what keeps the session in sync.
func (c *Client) route(f frame) error {
	switch f.h.Program {
	case wire.ProgramKeepAlive:
		if procedure(f.h.Procedure) == keepAliveProcPing {
			c.queueKeepAlive(keepAliveProcPong)
		}
		return nil
	case wire.ProgramRemote, wire.ProgramQEMU:
	default:
		return &ProtocolError{Msg: fmt.Sprintf("message for unknown program %#x", f.h.Program)}
	}
	if f.h.Type == wire.Message {
		// Events carry no serial of ours: they go to subscriptions, never to calls or streams.
		return c.routeEvent(f)
	}
	c.mu.Lock()
	pc := c.pending[f.h.Serial]
	if pc != nil && !pc.stream {
		delete(c.pending, f.h.Serial)
	}
	issued := uint64(f.h.Serial) < c.issued
	c.mu.Unlock()
	if pc == nil {
		if !issued {
			return &ProtocolError{Msg: fmt.Sprintf("reply serial mismatch: serial %d was never sent", f.h.Serial)}
		}
		return nil // the caller gave up; its late answer is dropped
	}
	if f.h.Program != pc.prog || f.h.Version != protocolVersion || f.h.Procedure != int32(pc.proc) {
		return &ProtocolError{Msg: fmt.Sprintf("stream desynchronised: serial %d answered by program %#x v%d procedure %d, want %#x v%d %s",
			f.h.Serial, f.h.Program, f.h.Version, f.h.Procedure, pc.prog, protocolVersion, opName(pc.prog, pc.proc))}
	}
	if pc.overrun != nil {
		c.routeLossless(pc, f)
		return nil
	}
	select {
	case pc.frames <- f:
	case <-pc.gone:
	case <-c.done:
	}
	return nil
}

// routeLossless hands f to a stream that must never block the router: the first frame that
// does not fit ends the stream's delivery, so the reader sees an overrun, never a gap.
func (c *Client) routeLossless(pc *pendingCall, f frame) {
	if pc.overran {
		return
	}
	if pc.queued.Add(int64(len(f.payload))) <= pc.maxQueued {
		select {
		case pc.frames <- f:
			return
		case <-pc.gone:
			return
		default:
		}
	}
	pc.overran = true
	close(pc.overrun)
}

func (c *Client) register(prog uint32, proc procedure, stream bool) (uint32, *pendingCall) {
	pc := &pendingCall{prog: prog, proc: proc, stream: stream, gone: make(chan struct{})}
	if stream {
		pc.frames = make(chan frame, streamBacklog)
	} else {
		pc.frames = make(chan frame, 1)
	}
	return c.insert(pc), pc
}

// registerNonBlocking registers a stream whose frames the router never waits for: up to
// backlog frames holding up to maxQueued payload bytes are held, then the stream overruns
// (routeLossless).
func (c *Client) registerNonBlocking(proc procedure, backlog int, maxQueued int64) (uint32, *pendingCall) {
	pc := &pendingCall{prog: wire.ProgramRemote, proc: proc, stream: true, gone: make(chan struct{}),
		frames: make(chan frame, backlog), overrun: make(chan struct{}), maxQueued: maxQueued}
	return c.insert(pc), pc
}

// insert gives pc the next serial.
func (c *Client) insert(pc *pendingCall) uint32 {
	c.mu.Lock()
	serial := uint32(c.issued)
	c.issued++
	c.pending[serial] = pc
	c.mu.Unlock()
	return serial
}

func (c *Client) unregister(serial uint32, pc *pendingCall) {
	c.mu.Lock()
	if c.pending[serial] == pc {
		delete(c.pending, serial)
	}
	c.mu.Unlock()
	close(pc.gone)
}

// send writes one whole frame. The write deadline is the client timeout, never the caller's
// context: a frame abandoned half-written would desynchronise the session for everyone, so
// only a peer that stops reading for that long aborts a write, and that kills the connection.
func (c *Client) send(ctx context.Context, b []byte) error {
	select {
	case c.sendSem <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	case <-c.done:
		return c.err
	}
	defer func() { <-c.sendSem }()
	if err := c.conn.SetWriteDeadline(time.Now().Add(c.timeout)); err != nil {
		c.fail("write", err)
		return c.err
	}
	if _, err := c.conn.Write(b); err != nil {
		c.fail("write", err)
		return c.err
	}
	return nil
}

// newFrame starts a frame: room for the length and header, then the XDR-encoded payload.
func newFrame(args func(*xdr.Encoder)) []byte {
	e := xdr.NewEncoder(make([]byte, wire.MinFrame, 256))
	if args != nil {
		args(e)
	}
	return e.Bytes()
}

// errCallTimeout marks a context that expired because of the client's own timeout rather
// than the caller's deadline.
var errCallTimeout = errors.New("libvirt call timeout")

type callTimeoutKey struct{}

// WithCallTimeout returns ctx for calls that wait up to d for their reply instead of the
// client's own timeout (Dialer.Timeout): for a call libvirtd may hold as long as that timeout
// or longer, such as a state change it queues behind another job of the domain and gives up on
// after its own 30 s, whose refusal the caller needs to read. A deadline of ctx still applies.
func WithCallTimeout(ctx context.Context, d time.Duration) context.Context {
	return context.WithValue(ctx, callTimeoutKey{}, d)
}

// callTimeout is the timeout of a call made with ctx.
func (c *Client) callTimeout(ctx context.Context) time.Duration {
	if d, ok := ctx.Value(callTimeoutKey{}).(time.Duration); ok && d > 0 {
		return d
	}
	return c.timeout
}

// call performs one RPC: args encodes the arguments, ret (if not nil) decodes the result.
func (c *Client) call(ctx context.Context, prog uint32, proc procedure, args func(*xdr.Encoder), ret func(*xdr.Decoder)) error {
	start := time.Now()
	err := c.roundTrip(ctx, prog, proc, args, ret)
	c.observe(prog, proc, start, err)
	return err
}

// roundTrip is call without its observation.
func (c *Client) roundTrip(ctx context.Context, prog uint32, proc procedure, args func(*xdr.Encoder), ret func(*xdr.Decoder)) error {
	ctx, cancel := context.WithTimeoutCause(ctx, c.callTimeout(ctx), errCallTimeout)
	defer cancel()
	serial, pc := c.register(prog, proc, false)
	defer c.unregister(serial, pc)

	b := newFrame(args)
	wire.PutHeader(b, wire.Header{Program: prog, Version: protocolVersion, Procedure: int32(proc), Type: wire.Call, Serial: serial})
	if err := c.send(ctx, b); err != nil {
		return c.callError(ctx, prog, proc, err)
	}
	f, err := c.await(ctx, pc)
	if err != nil {
		return c.callError(ctx, prog, proc, err)
	}
	if f.h.Type != wire.Reply {
		return c.violation(fmt.Sprintf("unexpected message type %d for %s (want Reply)", f.h.Type, opName(prog, proc)))
	}
	return c.decodeResult(f, ret)
}

// await waits for the next frame of pc.
func (c *Client) await(ctx context.Context, pc *pendingCall) (frame, error) {
	select {
	case f := <-pc.frames:
		return pc.took(f), nil
	case <-ctx.Done():
		return frame{}, ctx.Err()
	case <-c.done:
		// A frame routed just before the connection broke is still the answer: prefer it, so
		// the caller sees what the peer said rather than the hang-up that followed.
		select {
		case f := <-pc.frames:
			return pc.took(f), nil
		default:
			return frame{}, c.err
		}
	}
}

// callError turns a context expiry into a TimeoutError or a wrapped context error; transport
// errors pass through unchanged.
func (c *Client) callError(ctx context.Context, prog uint32, proc procedure, err error) error {
	if ctx.Err() == nil || !errors.Is(err, ctx.Err()) {
		return err
	}
	if context.Cause(ctx) == errCallTimeout {
		return &TimeoutError{Op: opName(prog, proc), After: c.callTimeout(ctx)}
	}
	return fmt.Errorf("libvirt %s: %w", opName(prog, proc), err)
}

// violation ends the connection: after a protocol violation no later frame can be trusted.
func (c *Client) violation(msg string) error {
	err := &ProtocolError{Msg: msg}
	c.fail("read", err)
	return err
}

// decodeResult decodes a Reply or a final Stream message: an error payload, or ret's result.
func (c *Client) decodeResult(f frame, ret func(*xdr.Decoder)) error {
	d := xdr.NewDecoder(f.payload)
	switch f.h.Status {
	case wire.OK:
		if ret != nil {
			ret(d)
		}
		if err := d.Finish(); err != nil {
			return c.violation(fmt.Sprintf("decoding %s reply: %v", opName(f.h.Program, procedure(f.h.Procedure)), err))
		}
		return nil
	case wire.Error:
		return c.remoteError(f.h.Program, procedure(f.h.Procedure), f.payload)
	default:
		return c.violation(fmt.Sprintf("unexpected status %d in %s reply", f.h.Status, opName(f.h.Program, procedure(f.h.Procedure))))
	}
}

// remoteError decodes the error a Reply or Stream message of prog and proc carries, and names
// the procedure in it so that the error says which call libvirtd refused. One that cannot be
// decoded ends the connection like any other protocol violation.
func (c *Client) remoteError(prog uint32, proc procedure, payload []byte) error {
	err := decodeError(xdr.NewDecoder(payload))
	switch e := err.(type) {
	case *ProtocolError:
		c.fail("read", e)
	case *Error:
		e.Procedure = opName(prog, proc)
	}
	return err
}

// decodeError reads remote_error's leading fields; the rest (level, dom, str1..3, int1..2,
// net) carries nothing callers use.
func decodeError(d *xdr.Decoder) error {
	code, domain := d.Int32(), d.Int32()
	msg := d.OptString(maxString)
	if d.Err() != nil {
		return &ProtocolError{Msg: "undecodable error reply: " + d.Err().Error()}
	}
	return &Error{Code: code, Domain: domain, Message: deref(msg)}
}

func opName(prog uint32, proc procedure) string {
	if prog == wire.ProgramQEMU && proc == qemuProcAgentCommand {
		return "QEMU_DOMAIN_AGENT_COMMAND"
	}
	return proc.String()
}
