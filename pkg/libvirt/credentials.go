package libvirt

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// Credentials are the trust roots and client identity for mutual TLS with libvirtd.
//
// The private key is reachable only through an unexported pointer, and Credentials formats
// itself without it, so no %v, %+v, %#v or %s of any value holding Credentials — directly,
// by pointer or nested in another struct — can print key material.
type Credentials struct {
	p *credentials
}

type credentials struct {
	roots   *x509.CertPool
	cert    tls.Certificate
	subject string
	nCA     int
}

// NewCredentials parses the CA bundle that signed libvirtd's server certificate, the client
// certificate chain and the client private key, all PEM.
func NewCredentials(caPEM, certPEM, keyPEM []byte) (Credentials, error) {
	roots := x509.NewCertPool()
	nCA := 0
	for rest := caPEM; ; {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			break
		}
		if b.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			return Credentials{}, fmt.Errorf("invalid PEM for caBundle: %v", err)
		}
		roots.AddCert(c)
		nCA++
	}
	if nCA == 0 {
		return Credentials{}, errors.New("invalid PEM for caBundle: no CERTIFICATE block")
	}
	if !strings.Contains(string(certPEM), "CERTIFICATE") {
		return Credentials{}, errors.New("invalid PEM for client certificate: no CERTIFICATE block")
	}
	if b, _ := pem.Decode(keyPEM); b == nil || !strings.Contains(b.Type, "PRIVATE KEY") {
		return Credentials{}, errors.New("invalid PEM for client key: no PRIVATE KEY block")
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		// crypto/tls's messages never quote key bytes; keep them for the hint they give
		// (for example "private key does not match public key").
		return Credentials{}, fmt.Errorf("invalid PEM for client certificate or key: %v", err)
	}
	leaf, err := x509.ParseCertificate(cert.Certificate[0])
	if err != nil {
		return Credentials{}, fmt.Errorf("invalid PEM for client certificate: %v", err)
	}
	cert.Leaf = leaf
	return Credentials{p: &credentials{roots: roots, cert: cert, subject: leaf.Subject.String(), nCA: nCA}}, nil
}

// ReadPKIDir loads libvirt's pkipath layout: cacert.pem, clientcert.pem and clientkey.pem.
func ReadPKIDir(dir string) (Credentials, error) {
	var data [3][]byte
	for i, name := range []string{"cacert.pem", "clientcert.pem", "clientkey.pem"} {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			return Credentials{}, err
		}
		data[i] = b
	}
	return NewCredentials(data[0], data[1], data[2])
}

// IsZero reports whether c holds no credentials.
func (c Credentials) IsZero() bool { return c.p == nil }

// String describes the credentials without key material.
func (c Credentials) String() string {
	if c.p == nil {
		return "libvirt.Credentials{}"
	}
	return fmt.Sprintf("libvirt.Credentials{CA: %d cert(s), Client: %q, Key: [REDACTED]}", c.p.nCA, c.p.subject)
}

// GoString keeps %#v as safe as %v.
func (c Credentials) GoString() string { return c.String() }

// Format makes every verb, including %+v and %x, print the redacted form.
func (c Credentials) Format(f fmt.State, _ rune) { _, _ = io.WriteString(f, c.String()) }

// tlsConfig returns a client configuration trusting only the CA bundle, presenting the
// client certificate whatever CA list the server advertises, and verifying serverName.
func (c Credentials) tlsConfig(serverName string) *tls.Config {
	cert := c.p.cert
	return &tls.Config{
		RootCAs:    c.p.roots,
		ServerName: serverName,
		MinVersion: tls.VersionTLS12,
		// Always present the certificate: Go would otherwise stay silent when the server's
		// acceptable-CA list does not match, and the server's rejection is the clearer error.
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &cert, nil },
	}
}
