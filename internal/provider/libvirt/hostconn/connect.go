package hostconn

import (
	"context"
	"errors"

	"sigs.k8s.io/controller-runtime/pkg/client"

	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
	"banlieue.io/banlieue/pkg/libvirt"
)

// SpecError is a Provider connection the libvirt provider refuses: a scheme other than
// qemu+tls, or insecureSkipTLSVerify. It will not fix itself, so callers do not retry on a timer.
type SpecError struct{ Err error }

func (e *SpecError) Error() string { return e.Err.Error() }
func (e *SpecError) Unwrap() error { return e.Err }

// Target is where and how to reach a Provider's host.
type Target struct {
	Endpoint    libvirt.Endpoint
	Credentials Credentials
}

// Resolve reads the Provider's credentials and checks its connection settings.
// Errors are *CredentialsError or *SpecError when the Provider itself is at fault.
func Resolve(ctx context.Context, r client.Reader, p *banlieuev1.Provider) (Target, error) {
	return resolveWith(p, func() (Credentials, error) { return ResolveCredentials(ctx, r, p) })
}

// resolveWith is Resolve with the credentials from resolveCreds.
func resolveWith(p *banlieuev1.Provider, resolveCreds func() (Credentials, error)) (Target, error) {
	creds, err := resolveCreds()
	if err != nil {
		return Target{}, err
	}
	if p.Spec.Connection.InsecureSkipTLSVerify {
		return Target{}, &SpecError{errors.New("invalid connection.insecureSkipTLSVerify: the libvirt provider always " +
			"verifies libvirtd's certificate against caBundle; remove insecureSkipTLSVerify")}
	}
	ep, err := libvirt.ParseEndpoint(p.Spec.Connection.Endpoint)
	if err != nil {
		return Target{}, &SpecError{err}
	}
	return Target{Endpoint: ep, Credentials: creds}, nil
}

// Connect returns the Provider's pooled connection, its credentials resolved at most once per
// CredentialsTTL (credcache.go).
func (p *Connections) Connect(ctx context.Context, r client.Reader, provider *banlieuev1.Provider) (*libvirt.Client, error) {
	return p.connect(ctx, r, provider, false)
}

// ConnectFresh is Connect reading the Secret and CA whatever their age: the Provider's probe,
// which reports on them, sees a rotation or a removal at once.
func (p *Connections) ConnectFresh(ctx context.Context, r client.Reader, provider *banlieuev1.Provider) (*libvirt.Client, error) {
	return p.connect(ctx, r, provider, true)
}

func (p *Connections) connect(ctx context.Context, r client.Reader, provider *banlieuev1.Provider, fresh bool) (*libvirt.Client, error) {
	t, err := p.credentials.resolve(ctx, r, provider, fresh)
	if err != nil {
		return nil, err
	}
	return p.Get(ctx, client.ObjectKeyFromObject(provider), t.Endpoint, t.Credentials)
}

// Dial opens a connection of its own, for one-shot commands such as the import.
func Dial(ctx context.Context, r client.Reader, provider *banlieuev1.Provider) (*libvirt.Client, error) {
	t, err := Resolve(ctx, r, provider)
	if err != nil {
		return nil, err
	}
	return libvirt.Dialer{Endpoint: t.Endpoint, Credentials: t.Credentials.TLS}.Dial(ctx)
}
