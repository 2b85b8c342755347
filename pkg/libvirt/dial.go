package libvirt

import (
	"cmp"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"time"

	"banlieue.io/banlieue/pkg/libvirt/internal/wire"
	"banlieue.io/banlieue/pkg/libvirt/internal/xdr"
)

// DefaultURI is the driver URI opened when Dialer.URI is empty.
const DefaultURI = "qemu:///system"

// Dialer opens libvirt sessions. The zero value of every field but Endpoint and Credentials
// selects a default. A Dialer is a value: one per host, reused to redial after Client.Done.
type Dialer struct {
	Endpoint    Endpoint
	Credentials Credentials

	// URI is the hypervisor driver URI sent in CONNECT_OPEN (qemu:///system,
	// test:///default, …). It is not the transport URI.
	URI string

	// Timeout bounds the whole connect path (TCP, TLS, confirmation byte) and then each
	// call and each stream packet. Default DefaultTimeout.
	Timeout time.Duration

	// KeepAliveInterval is how long the connection may be silent before the client pings;
	// after KeepAliveCount silent intervals libvirtd is declared dead. Defaults 5 s and 5
	// (libvirt's own client defaults); a negative interval disables keepalive.
	KeepAliveInterval time.Duration
	KeepAliveCount    int

	// Observer, if set, is told the outcome of every call the Client makes, the session's own
	// AUTH_LIST and CONNECT_OPEN included.
	Observer CallObserver

	// UploadLimiter, if set, bounds the volume uploads of every Client this Dialer dials.
	UploadLimiter UploadLimiter
}

// Dial connects, completes mutual TLS, reads libvirtd's confirmation byte, checks that no
// authentication beyond the client certificate is required (AUTH_LIST; if some is, the error
// wraps ErrAuthRequired) and opens the driver URI (CONNECT_OPEN).
func (d Dialer) Dial(ctx context.Context) (*Client, error) {
	if d.Credentials.IsZero() {
		return nil, errors.New("libvirt: Dialer has no Credentials")
	}
	if d.Endpoint.Host == "" {
		return nil, errors.New("libvirt: Dialer has no Endpoint")
	}
	timeout := cmp.Or(d.Timeout, DefaultTimeout)
	ep := d.Endpoint
	if ep.Port == 0 {
		ep.Port = DefaultPort
	}
	addr := ep.Address()

	conn, err := d.connect(ctx, ep, addr, timeout)
	if err != nil {
		return nil, err
	}
	interval, count := cmp.Or(d.KeepAliveInterval, 5*time.Second), cmp.Or(d.KeepAliveCount, 5)
	c := newClient(conn, addr, timeout, interval, count, d.Observer)
	c.uploads = d.UploadLimiter
	if err := c.openSession(ctx, cmp.Or(d.URI, DefaultURI)); err != nil {
		c.fail("session", err)
		return nil, err
	}
	return c, nil
}

// connect performs TCP, TLS and the confirmation byte under one deadline.
func (d Dialer) connect(ctx context.Context, ep Endpoint, addr string, timeout time.Duration) (*tls.Conn, error) {
	ctx, cancel := context.WithTimeoutCause(ctx, timeout, &TimeoutError{Op: "connect to " + addr, After: timeout})
	defer cancel()
	connErr := func(op string, err error) error {
		if errors.Is(err, os.ErrDeadlineExceeded) {
			<-ctx.Done() // the read deadline is the context's, which is about to expire too
		}
		if ctx.Err() != nil {
			err = context.Cause(ctx)
		}
		return &ConnError{Op: op, Addr: addr, Err: err}
	}

	var nd net.Dialer
	raw, err := nd.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, connErr("dial", err)
	}
	conn := tls.Client(raw, d.Credentials.tlsConfig(ep.Host))
	if err := conn.HandshakeContext(ctx); err != nil {
		raw.Close()
		return nil, connErr("tls", describeTLSError(err, addr))
	}

	// libvirtd checks the client certificate (and its allow-lists) after the handshake and
	// answers with one byte: 1 means accepted; otherwise it just hangs up. The byte must be
	// consumed or every later frame is misaligned.
	deadline, _ := ctx.Deadline()
	stop := context.AfterFunc(ctx, func() { _ = conn.SetReadDeadline(time.Now()) })
	_ = conn.SetReadDeadline(deadline)
	var b [1]byte
	_, err = io.ReadFull(conn, b[:])
	stop()
	if err != nil {
		conn.Close()
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			err = errors.New("libvirtd closed the connection instead of confirming the session: it rejected the client certificate or this source address")
		} else {
			err = describeTLSError(err, addr)
		}
		return nil, connErr("tls", err)
	}
	if b[0] != 1 {
		conn.Close()
		return nil, connErr("tls", fmt.Errorf("libvirtd refused the session (confirmation byte %#02x, want 0x01)", b[0]))
	}
	_ = conn.SetReadDeadline(time.Time{})
	return conn, nil
}

// describeTLSError names the usual causes of a failed handshake in operator terms.
func describeTLSError(err error, addr string) error {
	var (
		unknownCA x509.UnknownAuthorityError
		hostname  x509.HostnameError
		invalid   x509.CertificateInvalidError
		recordHdr tls.RecordHeaderError
		alert     tls.AlertError
		verifyErr *tls.CertificateVerificationError
	)
	switch {
	case errors.As(err, &hostname):
		return fmt.Errorf("invalid server name: the server certificate does not cover the dialled host: %w", err)
	case errors.As(err, &unknownCA):
		return fmt.Errorf("the server certificate is not signed by the configured CA bundle: %w", err)
	case errors.As(err, &invalid):
		return fmt.Errorf("the server certificate is not acceptable: %w", err)
	case errors.As(err, &verifyErr):
		return fmt.Errorf("the server certificate failed verification: %w", err)
	case errors.As(err, &recordHdr):
		return fmt.Errorf("%s does not speak TLS (is it libvirtd's TLS port, normally %d?): %w", addr, DefaultPort, err)
	case errors.As(err, &alert):
		switch alert {
		case 42, 43, 44, 45, 46, 48, 116: // bad/unsupported/revoked/expired/unknown certificate, unknown CA, certificate required
			return fmt.Errorf("libvirtd rejected the client certificate: %w", err)
		}
		return fmt.Errorf("libvirtd aborted the TLS handshake: %w", err)
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return fmt.Errorf("%s closed the connection during the TLS handshake: %w", addr, err)
	}
	return err
}

// openSession runs the mandatory AUTH_LIST (libvirtd hangs on anything else first) and
// CONNECT_OPEN.
func (c *Client) openSession(ctx context.Context, uri string) error {
	var types []int32
	err := c.call(ctx, wire.ProgramRemote, procAuthList, nil, func(d *xdr.Decoder) {
		types = decodeList(d, maxAuthTypes, 4, (*xdr.Decoder).Int32)
	})
	if err != nil {
		return fmt.Errorf("libvirt session %s: %w", c.addr, err)
	}
	const authNone = 0
	if !slices.Contains(types, authNone) {
		return &ConnError{Op: "session", Addr: c.addr, Err: fmt.Errorf("%w (offered %v; set auth_tls = \"none\" and rely on the client certificate)", ErrAuthRequired, authNames(types))}
	}
	err = c.call(ctx, wire.ProgramRemote, procConnectOpen, func(e *xdr.Encoder) {
		e.OptString(&uri)
		e.Uint32(0) // read-write
	}, nil)
	if err != nil {
		return fmt.Errorf("libvirt session %s: open %s: %w", c.addr, uri, err)
	}
	return nil
}

func authNames(types []int32) []string {
	names := make([]string, 0, len(types))
	for _, t := range types {
		switch t {
		case 1:
			names = append(names, "sasl")
		case 2:
			names = append(names, "polkit")
		default:
			names = append(names, fmt.Sprint(t))
		}
	}
	return names
}
