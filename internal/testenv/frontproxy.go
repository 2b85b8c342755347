package testenv

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// FrontProxyName is the common name of the API server's front-proxy client certificate, the
// one name --requestheader-allowed-names admits.
const FrontProxyName = "front-proxy-client"

// configureFrontProxy gives the API server what a kubeadm cluster's has for aggregated APIs: a
// front-proxy CA and the client certificate it presents to them (--proxy-client-*), the
// request-header settings it publishes in kube-system/extension-apiserver-authentication for
// them to verify it, and routing to an APIService's endpoints rather than its cluster IP, which
// nothing routes here (no kube-proxy).
func configureFrontProxy(apiServer *envtest.APIServer, certDir string) error {
	ca, caKey, err := newCA("banlieue-test-front-proxy-ca")
	if err != nil {
		return err
	}
	certPEM, keyPEM, err := SignCert(ca, caKey, FrontProxyName, nil, x509.ExtKeyUsageClientAuth)
	if err != nil {
		return err
	}
	files := map[string][]byte{
		"front-proxy-ca.crt":     pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.Raw}),
		"front-proxy-client.crt": certPEM,
		"front-proxy-client.key": keyPEM,
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(certDir, name), data, 0o600); err != nil {
			return err
		}
	}
	args := apiServer.Configure()
	args.Set("requestheader-client-ca-file", filepath.Join(certDir, "front-proxy-ca.crt"))
	args.Set("proxy-client-cert-file", filepath.Join(certDir, "front-proxy-client.crt"))
	args.Set("proxy-client-key-file", filepath.Join(certDir, "front-proxy-client.key"))
	args.Set("requestheader-allowed-names", FrontProxyName)
	args.Set("requestheader-username-headers", "X-Remote-User")
	args.Set("requestheader-group-headers", "X-Remote-Group")
	args.Set("requestheader-extra-headers-prefix", "X-Remote-Extra-")
	args.Set("enable-aggregator-routing", "true")
	return nil
}

// newCA is a self-signed CA for one test run.
func newCA(name string) (*x509.Certificate, *ecdsa.PrivateKey, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, err
	}
	ca, err := x509.ParseCertificate(der)
	return ca, key, err
}

// NewCA is a CA for a test's own certificates (an aggregated server's serving certificate), as
// PEM, with what SignCert needs.
func NewCA(t testing.TB, name string) (caPEM []byte, ca *x509.Certificate, key *ecdsa.PrivateKey) {
	t.Helper()
	ca, key, err := newCA(name)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.Raw}), ca, key
}

// SignCert issues a certificate for cn (and dnsNames) with one extended key usage, as PEM.
func SignCert(ca *x509.Certificate, caKey *ecdsa.PrivateKey, cn string, dnsNames []string, usage x509.ExtKeyUsage) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: cn}, DNSNames: dnsNames,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return nil, nil, err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), nil
}

// CertUser is a user the API server knows by a client certificate its client CA signed (not
// impersonation: the request is authenticated as that user from the first hop), with groups.
func (e *Env) CertUser(t testing.TB, name string, groups ...string) *rest.Config {
	t.Helper()
	u, err := e.env.AddUser(envtest.User{Name: name, Groups: groups}, nil)
	if err != nil {
		t.Fatalf("adding user %s: %v", name, err)
	}
	return u.Config()
}

// HostIP is a non-loopback IPv4 address of this machine: an aggregated server's endpoint must
// not be a loopback address, which the API server refuses to proxy to.
func HostIP(t testing.TB) net.IP {
	t.Helper()
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range addrs {
		if ipn, ok := a.(*net.IPNet); ok && ipn.IP.To4() != nil && !ipn.IP.IsLoopback() && !ipn.IP.IsLinkLocalUnicast() {
			return ipn.IP.To4()
		}
	}
	t.Fatal(fmt.Errorf("this machine has no non-loopback IPv4 address"))
	return nil
}

// FrontProxyCertificate is the client certificate the API server of StartWith(Options{FrontProxy: true}) presents to
// aggregated servers, for a test that speaks to one as the API server would.
func (e *Env) FrontProxyCertificate(t testing.TB) tls.Certificate {
	t.Helper()
	cert, err := tls.LoadX509KeyPair(filepath.Join(e.certDir, "front-proxy-client.crt"), filepath.Join(e.certDir, "front-proxy-client.key"))
	if err != nil {
		t.Fatalf("the front-proxy certificate (Options.FrontProxy only): %v", err)
	}
	return cert
}
