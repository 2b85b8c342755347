package console

import (
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
)

// KeyHash is the SHA-256 of cert's public key (its DER SubjectPublicKeyInfo) in lowercase hex,
// as a Provider's status.consoleKeys holds it. The key, not the certificate, is pinned, as in
// RFC 7469.
func KeyHash(cert *x509.Certificate) string {
	sum := sha256.Sum256(cert.RawSubjectPublicKeyInfo)
	return hex.EncodeToString(sum[:])
}

// ServingKeyHash is KeyHash of the first certificate cfg serves.
func ServingKeyHash(cfg *tls.Config) (string, error) {
	if cfg == nil || len(cfg.Certificates) == 0 || len(cfg.Certificates[0].Certificate) == 0 {
		return "", errors.New("the console endpoint's TLS configuration has no certificate")
	}
	leaf, err := x509.ParseCertificate(cfg.Certificates[0].Certificate[0])
	if err != nil {
		return "", fmt.Errorf("parsing the console endpoint's certificate: %w", err)
	}
	return KeyHash(leaf), nil
}

// publishedKey reports, with why not, whether hash is one of p's console keys renewed within
// ConsoleKeyValidity of now. A key renewed in the future by a clock ahead of ours counts.
func publishedKey(p *banlieuev1.Provider, hash string, now time.Time) error {
	if len(p.Status.ConsoleKeys) == 0 {
		return fmt.Errorf("the Provider %s/%s publishes no console key (status.consoleKeys): its provider has not started "+
			"its console endpoint yet", p.Namespace, p.Name)
	}
	for _, k := range p.Status.ConsoleKeys {
		if k.SHA256 != hash {
			continue
		}
		if now.Sub(k.RenewedAt.Time) > banlieuev1.ConsoleKeyValidity {
			return fmt.Errorf("the provider's console key is that of pod %s of Provider %s/%s, last renewed at %s, more than %s ago",
				k.Pod, p.Namespace, p.Name, k.RenewedAt.UTC().Format(time.RFC3339), banlieuev1.ConsoleKeyValidity)
		}
		return nil
	}
	return fmt.Errorf("the provider's console key (SHA-256 %s) is not among Provider %s/%s's published keys (status.consoleKeys)",
		hash, p.Namespace, p.Name)
}

// pinnedTLS is base for a dial to p's provider: the peer must present a key p publishes. No CA
// vouches for a provider's certificate (it is generated in memory at each start), so the chain
// is not verified and the key is checked instead, before anything is sent on the connection.
func pinnedTLS(base *tls.Config, p *banlieuev1.Provider, now func() time.Time) *tls.Config {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if base != nil {
		cfg = base.Clone()
	}
	cfg.InsecureSkipVerify = true //nolint:gosec // the peer's key is pinned by VerifyConnection below
	cfg.VerifyConnection = func(cs tls.ConnectionState) error {
		if len(cs.PeerCertificates) == 0 {
			return errors.New("the provider presented no certificate")
		}
		return publishedKey(p, KeyHash(cs.PeerCertificates[0]), now())
	}
	return cfg
}
