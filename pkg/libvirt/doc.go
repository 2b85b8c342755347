// Package libvirt is a libvirt RPC client over mutual TLS, written from libvirt's protocol
// definitions (remote_protocol.x, virnetprotocol.x, qemu_protocol.x,
// virkeepaliveprotocol.x): no cgo, no virsh, no third-party libvirt library.
//
// The wire format (framing and XDR) lives in internal packages; this package holds the
// connection (TLS, session open, multiplexing, keepalive, streams) and typed procedures.
//
// Connecting:
//
//	creds, err := libvirt.ReadPKIDir(dir) // cacert.pem, clientcert.pem, clientkey.pem
//	ep, err := libvirt.ParseEndpoint("qemu+tls://host/system")
//	c, err := libvirt.Dialer{Endpoint: ep, Credentials: creds}.Dial(ctx)
//	defer c.Close()
//	dom, err := c.DomainLookupByName(ctx, "vm1")
//	if libvirt.IsNotFound(err) { ... }
//
// One Client serves any number of goroutines. Every call takes a context; without an earlier
// deadline a call is bounded by Dialer.Timeout (30 s by default). Cancelling a call abandons
// it: its late reply is discarded and the session stays usable.
//
// A Client never reconnects by itself. Its owner watches Done (or checks Err, or sees an
// error matching ErrConnectionClosed) and dials again with the same Dialer; pending calls
// fail promptly when the connection breaks or keepalive declares libvirtd dead.
//
// Procedure numbers are held to libvirt's own table at a pinned release
// (testdata/procedures.tsv, written by hack/libvirt-procedures.sh from the protocol
// definitions; TestProcedureNumbersMatchLibvirt). Flags and state reasons are typed constants
// (DomainXMLInactive, DomainPausedStartingUp, …), so callers pass no bare numbers. An error
// libvirtd returns is an *Error naming the procedure it refused.
//
// Domain events: SubscribeDomainEvents registers, for every domain of the host, for lifecycle
// and device-removed events, which libvirtd sends as MESSAGE packets on the same connection; the
// reader hands them to the subscription beside replies and streams. A subscription never stalls
// the reader: past DomainEventBacklog waiting events the oldest are dropped (Dropped counts
// them). Events is closed when the subscription is closed or the connection ends; a new Client
// must subscribe again, and whatever happened in between was not reported.
//
// Stream downloads share the connection's reader: a consumer that stops reading stalls the
// other calls on that Client once a few packets are queued, so write downloads to fast sinks
// (files) or use a dedicated Client.
package libvirt
