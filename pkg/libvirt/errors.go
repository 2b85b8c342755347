package libvirt

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// ErrConnectionClosed is wrapped by every error a call returns once its connection has ended,
// whether through Close, a transport failure or a silent peer. The caller redials.
var ErrConnectionClosed = errors.New("libvirt: connection closed")

// ErrAuthRequired is wrapped, inside a *ConnError with Op "session", by the Dial error for a
// libvirtd that offers only authentication beyond the client certificate (SASL, polkit). It
// is a configuration refusal, not a fault: redialling fails the same way until libvirtd's
// auth_tls is "none".
var ErrAuthRequired = errors.New("libvirtd requires authentication this client does not implement")

// Error is an error reported by libvirtd (virNetMessageError / remote_error).
type Error struct {
	Code    int32 // virErrorNumber
	Domain  int32 // virErrorDomain
	Message string
	// Procedure is the call libvirtd answered with the error, e.g. DOMAIN_CREATE_WITH_FLAGS.
	Procedure string
}

func (e *Error) Error() string {
	if e.Procedure == "" {
		return fmt.Sprintf("libvirt error (code %d): %s", e.Code, e.Message)
	}
	return fmt.Sprintf("libvirt %s: error (code %d): %s", e.Procedure, e.Code, e.Message)
}

// libvirt's virErrorNumber values for objects that do not exist (virerror.h).
const (
	ErrNoDomain      = 42
	ErrNoNetwork     = 43
	ErrNoStoragePool = 49
	ErrNoStorageVol  = 50
	ErrNoInterface   = 57
)

// virErrorNumber values a console open answers with: a domain that is not running, and a
// console another session holds.
const (
	ErrOperationInvalid = 55
	ErrOperationFailed  = 9
)

// ErrInvalidArg (VIR_ERR_INVALID_ARG) is, among others, libvirtd's answer to a domain disk call
// naming a disk the running domain does not have.
const ErrInvalidArg = 8

// ErrOperationTimeout (VIR_ERR_OPERATION_TIMEOUT) is libvirtd giving up waiting for another job
// on the same object: "cannot acquire state change lock".
const ErrOperationTimeout = 68

// IsNotFound reports whether err is libvirtd saying the domain, network, pool, volume or
// interface does not exist. Everything else, including permission errors, is a failure.
func IsNotFound(err error) bool {
	var e *Error
	if !errors.As(err, &e) {
		return false
	}
	switch e.Code {
	case ErrNoDomain, ErrNoNetwork, ErrNoStoragePool, ErrNoStorageVol, ErrNoInterface:
		return true
	}
	return false
}

// ConnError is a transport failure: dialling, TLS, the confirmation byte, reading, writing,
// a peer that stopped answering keepalives, or a session libvirtd would not open
// (ErrAuthRequired). A connection that produced one is unusable.
type ConnError struct {
	Op   string // "dial", "tls", "confirm", "read", "write", "keepalive", "session"
	Addr string // host:port as dialled
	Err  error
}

func (e *ConnError) Error() string {
	return fmt.Sprintf("libvirt %s %s: %v", e.Op, e.Addr, e.Err)
}

func (e *ConnError) Unwrap() error { return e.Err }

// ProtocolError is a message that breaks libvirt's RPC rules: a reply of the wrong type or
// program, undecodable XDR, a stream out of order. The connection is closed after one,
// because later frames can no longer be trusted.
type ProtocolError struct {
	Msg string
}

func (e *ProtocolError) Error() string { return "protocol violation: " + e.Msg }

// TimeoutError is returned when a call exceeds the client's timeout, or the one WithCallTimeout
// set for it (the caller's context carried no earlier deadline). It matches
// context.DeadlineExceeded with errors.Is.
type TimeoutError struct {
	Op    string
	After time.Duration
}

func (e *TimeoutError) Error() string { return fmt.Sprintf("%s timed out after %s", e.Op, e.After) }

func (e *TimeoutError) Is(target error) bool { return target == context.DeadlineExceeded }

// Timeout lets net.Error-style checks treat it as a timeout.
func (e *TimeoutError) Timeout() bool { return true }

// Is makes every ConnError match ErrConnectionClosed: the connection it describes is gone.
func (e *ConnError) Is(target error) bool { return target == ErrConnectionClosed }

// virErrorNumber values of a request the host cannot serve: the driver or pool type lacks the
// operation (VIR_ERR_NO_SUPPORT), or QEMU cannot do it for this device
// (VIR_ERR_OPERATION_UNSUPPORTED).
const (
	ErrNoSupport            = 3
	ErrOperationUnsupported = 84
)

// IsUnsupported reports whether err is libvirtd saying the host cannot do what was asked.
func IsUnsupported(err error) bool {
	var e *Error
	return errors.As(err, &e) && (e.Code == ErrNoSupport || e.Code == ErrOperationUnsupported)
}
