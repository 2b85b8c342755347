package libvirt

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"testing"
	"time"
)

// testCA is an in-memory CA for tests that need no libvirtd.
type testCA struct {
	cert    *x509.Certificate
	key     *ecdsa.PrivateKey
	certPEM []byte
}

func newTestCA(t testing.TB, cn string) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: cn},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	return &testCA{cert: cert, key: key, certPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// issue returns a leaf certificate and its key, PEM encoded.
func (ca *testCA) issue(t testing.TB, cn string, usage x509.ExtKeyUsage, ips []net.IP, dns []string) (certPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()),
		Subject:      pkix.Name{CommonName: cn},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{usage},
		IPAddresses:  ips,
		DNSNames:     dns,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder})
}

// testPKI is a CA with a server certificate for 127.0.0.1 and a client certificate.
type testPKI struct {
	ca                    *testCA
	server                tls.Certificate
	clientCert, clientKey []byte
}

func newTestPKI(t testing.TB) *testPKI {
	ca := newTestCA(t, "test CA")
	sc, sk := ca.issue(t, "127.0.0.1", x509.ExtKeyUsageServerAuth, []net.IP{net.IPv4(127, 0, 0, 1)}, nil)
	server, err := tls.X509KeyPair(sc, sk)
	if err != nil {
		t.Fatal(err)
	}
	cc, ck := ca.issue(t, "client", x509.ExtKeyUsageClientAuth, nil, nil)
	return &testPKI{ca: ca, server: server, clientCert: cc, clientKey: ck}
}

func (p *testPKI) credentials(t testing.TB) Credentials {
	t.Helper()
	c, err := NewCredentials(p.ca.certPEM, p.clientCert, p.clientKey)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// serverConfig requires a client certificate from the PKI's CA, like libvirtd.
func (p *testPKI) serverConfig() *tls.Config {
	pool := x509.NewCertPool()
	pool.AddCert(p.ca.cert)
	return &tls.Config{Certificates: []tls.Certificate{p.server}, ClientCAs: pool, ClientAuth: tls.RequireAndVerifyClientCert}
}
