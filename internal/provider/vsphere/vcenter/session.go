package vcenter

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"reflect"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vmware/govmomi/fault"
	"github.com/vmware/govmomi/session"
	"github.com/vmware/govmomi/vim25"
	"github.com/vmware/govmomi/vim25/soap"
	"github.com/vmware/govmomi/vim25/types"
)

// Endpoint is where and as whom to log in. Password is never logged nor put in an error;
// String redacts it.
type Endpoint struct {
	// URL of the SDK, e.g. https://vcenter.example/sdk. Only https is accepted.
	URL string
	// Username and Password of the vCenter account.
	Username, Password string
	// CAPEM holds the PEM certificates the server's chain must verify against; there is no
	// fallback to the system roots and no way to skip verification.
	CAPEM []byte
}

// String names the endpoint and user, never the password.
func (e Endpoint) String() string { return fmt.Sprintf("%s as %q", e.URL, e.Username) }

// Option tunes a Session.
type Option func(*options)

type options struct {
	callTimeout time.Duration
	taskTimeout time.Duration
	clones      int
	powerOps    int
}

// WithLimits bounds how many clones and how many power operations this Session runs on vCenter
// at once (default 4 and 16); more wait their turn, within their context.
func WithLimits(clones, powerOps int) Option {
	return func(o *options) { o.clones, o.powerOps = clones, powerOps }
}

// WithCallTimeout bounds every single request to vCenter (default 30 s).
func WithCallTimeout(d time.Duration) Option { return func(o *options) { o.callTimeout = d } }

// WithTaskTimeout bounds the wait for one vCenter task such as a clone (default 10 min).
func WithTaskTimeout(d time.Duration) Option { return func(o *options) { o.taskTimeout = d } }

// Session is one logged-in connection to a vCenter. It is safe for concurrent use; a session
// vCenter forgot (NotAuthenticated) is re-established once per failed request.
type Session struct {
	ep     Endpoint
	opts   options
	soap   *soap.Client
	vc     *vim25.Client // requests go through reauth
	raw    *vim25.Client // login and logout, without reauth
	mu     sync.Mutex    // serialises logins
	gen    atomic.Int64  // bumped by every successful login
	logins atomic.Int64
	clones chan struct{} // one token per clone running
	power  chan struct{} // one token per power operation running
}

// acquire takes a token of sem, waiting within ctx; release gives it back.
func acquire(ctx context.Context, sem chan struct{}, what string) (release func(), err error) {
	select {
	case sem <- struct{}{}:
		return func() { <-sem }, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("waiting for a free %s slot: %w", what, ctx.Err())
	}
}

// StepError says which step of an operation failed.
type StepError struct {
	Step string
	Err  error
}

func (e *StepError) Error() string { return e.Step + ": " + e.Err.Error() }
func (e *StepError) Unwrap() error { return e.Err }

func stepErr(step string, err error) error {
	if err == nil {
		return nil
	}
	return &StepError{Step: step, Err: err}
}

// Sentinel errors, matched with errors.Is.
var (
	// ErrNotFound: no such object at that inventory path (or with that reference).
	ErrNotFound = errors.New("not found")
	// ErrNotOwned: the object exists but carries no proof that banlieue created it for this
	// owner; it was not changed.
	ErrNotOwned = errors.New("not owned by this banlieue owner")
)

// Dial verifies the server against ep.CAPEM, logs in and returns the session.
func Dial(ctx context.Context, ep Endpoint, opt ...Option) (*Session, error) {
	o := options{callTimeout: 30 * time.Second, taskTimeout: 10 * time.Minute, clones: 4, powerOps: 16}
	for _, f := range opt {
		f(&o)
	}
	o.clones, o.powerOps = max(o.clones, 1), max(o.powerOps, 1)
	u, err := url.Parse(ep.URL)
	if err != nil {
		return nil, stepErr("parse endpoint URL", err)
	}
	if u.Scheme != "https" || u.Host == "" {
		return nil, stepErr("parse endpoint URL", fmt.Errorf("%q is not an https URL", ep.URL))
	}
	if u.Path == "" || u.Path == "/" {
		u.Path = "/sdk" // where vCenter serves the API
	}
	if u.User != nil {
		return nil, stepErr("parse endpoint URL", errors.New("credentials belong in Username and Password, not in the URL"))
	}
	if ep.Username == "" || ep.Password == "" {
		return nil, stepErr("check credentials", errors.New("username and password are required"))
	}
	pool := x509.NewCertPool()
	if len(ep.CAPEM) == 0 || !pool.AppendCertsFromPEM(ep.CAPEM) {
		return nil, stepErr("load CA", errors.New("no PEM certificate in the CA bundle"))
	}

	sc := soap.NewClient(u, false)
	tr := sc.DefaultTransport()
	tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	// govmomi's own TLS dialer falls back to thumbprints and ignores the context; this one
	// only verifies against the pool and honours the deadline.
	dialer := &tls.Dialer{NetDialer: &net.Dialer{}, Config: tr.TLSClientConfig}
	tr.DialTLSContext = dialer.DialContext
	tr.TLSHandshakeTimeout = o.callTimeout

	s := &Session{ep: ep, opts: o, soap: sc, clones: make(chan struct{}, o.clones), power: make(chan struct{}, o.powerOps)}
	cctx, cancel := context.WithTimeout(ctx, o.callTimeout)
	defer cancel()
	raw, err := vim25.NewClient(cctx, sc)
	if err != nil {
		return nil, stepErr("connect to "+u.Host, err)
	}
	s.raw = raw
	vc := *raw
	vc.RoundTripper = &reauth{next: sc, s: s}
	s.vc = &vc
	if err := s.login(cctx, s.gen.Load()); err != nil {
		return nil, err
	}
	return s, nil
}

func (s *Session) login(ctx context.Context, seen int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.gen.Load() != seen {
		return nil // another request logged in meanwhile
	}
	if seen > 0 {
		// vCenter refuses a Login sent with a session cookie it still knows (a fault injected as
		// NotAuthenticated, a proxy's); forget the old session so the new one starts clean.
		s.soap.Jar.SetCookies(s.soap.URL(), []*http.Cookie{{Name: soap.SessionCookieName, MaxAge: -1}})
	}
	m := session.NewManager(s.raw)
	if err := m.Login(ctx, url.UserPassword(s.ep.Username, s.ep.Password)); err != nil {
		// The fault text names no password; keep only that.
		return stepErr("log in to "+s.ep.URL+" as "+s.ep.Username, err)
	}
	s.gen.Add(1)
	s.logins.Add(1)
	return nil
}

// Close logs out. The session is unusable afterwards.
func (s *Session) Close(ctx context.Context) error {
	cctx, cancel := s.call(ctx)
	defer cancel()
	err := session.NewManager(s.raw).Logout(cctx)
	s.soap.CloseIdleConnections()
	return stepErr("log out", err)
}

// call bounds one request.
func (s *Session) call(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, s.opts.callTimeout)
}

// reauth logs in again when vCenter answers NotAuthenticated (the session expired or was
// terminated) and retries the request once.
type reauth struct {
	next soap.RoundTripper
	s    *Session
}

func (r *reauth) RoundTrip(ctx context.Context, req, res soap.HasFault) error {
	seen := r.s.gen.Load()
	err := r.next.RoundTrip(ctx, req, res)
	if err == nil || !fault.Is(err, &types.NotAuthenticated{}) {
		return err
	}
	if lerr := r.s.login(ctx, seen); lerr != nil {
		return fmt.Errorf("session lost (%v); %w", err, lerr)
	}
	clearFault(res)
	return r.next.RoundTrip(ctx, req, res)
}

// clearFault empties the response body's fault so that a retried request is not read as failing
// again: the SOAP decoder fills fields and never clears them.
func clearFault(res soap.HasFault) {
	v := reflect.ValueOf(res)
	if v.Kind() != reflect.Pointer || v.Elem().Kind() != reflect.Struct {
		return
	}
	if f := v.Elem().FieldByName("Fault_"); f.IsValid() && f.CanSet() {
		f.Set(reflect.Zero(f.Type()))
	}
}
