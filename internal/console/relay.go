package console

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "banlieue.io/banlieue/api/infrastructure/v1alpha1"
	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
)

// ProviderPort is the port of a provider's console endpoint.
const ProviderPort = 8443

// Relay opens a console on the provider of a machine's Provider.
type Relay struct {
	// Tokens are the relay's credentials, one audience per Provider.
	Tokens TokenSource
	// Address is where p's provider listens (host:port); ServiceAddress when nil.
	Address func(p *banlieuev1.Provider) (string, error)
	// TLS configures the connection to the provider; each dial adds the check of the
	// provider's key against its Provider's status.consoleKeys (pinnedTLS).
	TLS *tls.Config
	// Now is the clock the keys' renewal times are read against; time.Now when nil.
	Now func() time.Time
}

// ServiceAddress is the provider's Service, which the operator names after the workload's
// Deployment (Provider status.workload).
func ServiceAddress(p *banlieuev1.Provider) (string, error) {
	w := p.Status.Workload
	if w == nil || w.DeploymentName == "" {
		return "", fmt.Errorf("the Provider %s/%s has no workload yet (status.workload is empty)", p.Namespace, p.Name)
	}
	return net.JoinHostPort(w.DeploymentName+"."+w.Namespace+".svc", fmt.Sprint(ProviderPort)), nil
}

// ProviderTLS is how the relay dials providers, before each dial pins the key its Provider
// publishes (pinnedTLS; ADR-0151).
func ProviderTLS() *tls.Config {
	return &tls.Config{MinVersion: tls.VersionTLS12}
}

// ProviderError is a provider's refusal, with its HTTP status.
type ProviderError struct {
	Code    int
	Message string
}

func (e *ProviderError) Error() string {
	return fmt.Sprintf("the provider refused the console (%d): %s", e.Code, e.Message)
}

// Upstream is a console connection to a provider; Reader holds what arrived with its 101.
type Upstream struct {
	net.Conn
	Reader *bufio.Reader
}

// Dial asks p's provider for machine's console and returns the connection once it says 101.
func (r *Relay) Dial(ctx context.Context, p *banlieuev1.Provider, machine *infrav1.LibvirtMachine, force bool) (*Upstream, error) {
	address := r.Address
	if address == nil {
		address = ServiceAddress
	}
	addr, err := address(p)
	if err != nil {
		return nil, err
	}
	token, err := r.Tokens.Token(ctx, Audience(types.NamespacedName{Namespace: p.Namespace, Name: p.Name}))
	if err != nil {
		return nil, fmt.Errorf("requesting the relay's token for Provider %s/%s: %w", p.Namespace, p.Name, err)
	}
	now := r.Now
	if now == nil {
		now = time.Now
	}
	d := tls.Dialer{Config: pinnedTLS(r.TLS, p, now)}
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("reaching the provider of %s/%s at %s: %w", p.Namespace, p.Name, addr, err)
	}
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	}
	u := url.URL{Path: ProviderPath(types.NamespacedName{Namespace: machine.Namespace, Name: machine.Name})}
	if force {
		u.RawQuery = ForceParam + "=true"
	}
	req := "GET " + u.RequestURI() + " HTTP/1.1\r\nHost: " + addr + "\r\nAuthorization: Bearer " + token +
		"\r\nConnection: Upgrade\r\nUpgrade: " + UpgradeProtocol + "\r\n\r\n"
	if _, err := io.WriteString(conn, req); err != nil {
		conn.Close()
		return nil, fmt.Errorf("asking the provider of %s/%s: %w", p.Namespace, p.Name, err)
	}
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("the provider of %s/%s answered: %w", p.Namespace, p.Name, err)
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		resp.Body.Close()
		conn.Close()
		return nil, &ProviderError{Code: resp.StatusCode, Message: strings.TrimSpace(string(body))}
	}
	_ = conn.SetDeadline(time.Time{})
	return &Upstream{Conn: conn, Reader: br}, nil
}

// TokenSource returns a token for an audience.
type TokenSource interface {
	Token(ctx context.Context, audience string) (string, error)
}

// tokenLifetime is what a relay token is asked to live; the API server's minimum is 10 minutes,
// and the shorter it lives the less a token a provider saw is worth.
const tokenLifetime = 10 * time.Minute

// ServiceAccountTokens issues the relay's own ServiceAccount tokens with the TokenRequest API,
// one per audience, reused for half their life.
type ServiceAccountTokens struct {
	Client         client.Client
	ServiceAccount types.NamespacedName

	mu    sync.Mutex
	cache map[string]cachedToken
}

type cachedToken struct {
	token   string
	renewAt time.Time
}

// Token returns a token of the ServiceAccount for audience.
func (s *ServiceAccountTokens) Token(ctx context.Context, audience string) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if t, ok := s.cache[audience]; ok && time.Now().Before(t.renewAt) {
		return t.token, nil
	}
	seconds := int64(tokenLifetime / time.Second)
	tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{Audiences: []string{audience}, ExpirationSeconds: &seconds}}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: s.ServiceAccount.Namespace, Name: s.ServiceAccount.Name}}
	if err := s.Client.SubResource("token").Create(ctx, sa, tr); err != nil {
		return "", err
	}
	if s.cache == nil {
		s.cache = map[string]cachedToken{}
	}
	life := time.Until(tr.Status.ExpirationTimestamp.Time)
	s.cache[audience] = cachedToken{token: tr.Status.Token, renewAt: time.Now().Add(life / 2)}
	return tr.Status.Token, nil
}
