package console

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"math/big"
	"net"
	"net/http"
	"time"
)

// Listener serves a handler over TLS as a manager Runnable, on every replica (a console is
// served by whichever replica the connection reaches, leader or not).
type Listener struct {
	Addr    string
	TLS     *tls.Config
	Handler http.Handler
	// ready, when not nil, receives the bound address once listening (tests bind port 0).
	Ready chan<- net.Addr
}

// Start serves until ctx is done.
func (l *Listener) Start(ctx context.Context) error {
	cfg := l.TLS.Clone()
	// Upgrade is HTTP/1.1's; a console over HTTP/2 cannot be taken over (Hijack).
	cfg.NextProtos = []string{"http/1.1"}
	ln, err := tls.Listen("tcp", l.Addr, cfg)
	if err != nil {
		return err
	}
	if l.Ready != nil {
		l.Ready <- ln.Addr()
	}
	srv := &http.Server{Handler: l.Handler, ReadHeaderTimeout: 10 * time.Second}
	stop := context.AfterFunc(ctx, func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx) // hijacked consoles are not waited for: they end with the process
	})
	defer stop()
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// NeedLeaderElection is false: every replica serves.
func (*Listener) NeedLeaderElection() bool { return false }

// SelfSignedTLS is a server configuration with a certificate generated in memory, for the
// provider's endpoint (nothing is written: the root filesystem is read-only). Its limit is the
// one of /metrics (docs/security.md, "Console").
func SelfSignedTLS(hosts ...string) (*tls.Config, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()),
		Subject:      pkix.Name{CommonName: "banlieue-provider-console"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(10 * 365 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:     hosts,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	return &tls.Config{MinVersion: tls.VersionTLS12,
		Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}}, nil
}

// ServingTLS is the aggregated server's configuration: the certificate the APIService's
// caBundle vouches for, and a request for the client certificate the front proxy presents
// (verified per request against the current front-proxy CA, frontProxy.authenticate).
func ServingTLS(certFile, keyFile string) (*tls.Config, error) {
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, err
	}
	return &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{cert}, ClientAuth: tls.RequestClientCert}, nil
}
