package console

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"math/big"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

func TestPaths(t *testing.T) {
	vm := types.NamespacedName{Namespace: "team-a", Name: "web-01"}
	if got, ok := parsePath(Path(vm)); !ok || got != vm {
		t.Fatalf("parsePath(Path) = %v, %v", got, ok)
	}
	if got, ok := ParseProviderPath(ProviderPath(vm)); !ok || got != vm {
		t.Fatalf("ParseProviderPath(ProviderPath) = %v, %v", got, ok)
	}
	for _, p := range []string{
		"/apis/subresources.banlieue.io/v1alpha1/namespaces/team-a/virtualmachines/web-01",
		"/apis/subresources.banlieue.io/v1alpha1/namespaces//virtualmachines/web-01/console",
		"/apis/subresources.banlieue.io/v1alpha1/namespaces/team-a/virtualmachines/web-01/console/x",
		"/apis/banlieue.io/v1alpha1/namespaces/team-a/virtualmachines/web-01/console",
	} {
		if _, ok := parsePath(p); ok {
			t.Errorf("parsePath(%q) accepted", p)
		}
	}
	if a, b := Audience(types.NamespacedName{Namespace: "a", Name: "b"}), Audience(types.NamespacedName{Namespace: "a-b", Name: ""}); a == b {
		t.Errorf("audiences of different Providers collide: %q", a)
	}
}

func TestIsUpgrade(t *testing.T) {
	for _, c := range []struct {
		conn, upgrade string
		want          bool
	}{
		{"Upgrade", UpgradeProtocol, true},
		{"keep-alive, upgrade", "BANLIEUE-CONSOLE", true},
		{"keep-alive", UpgradeProtocol, false},
		{"Upgrade", "websocket", false},
	} {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.Header.Set("Connection", c.conn)
		r.Header.Set("Upgrade", c.upgrade)
		if IsUpgrade(r) != c.want {
			t.Errorf("Connection %q Upgrade %q: %v", c.conn, c.upgrade, !c.want)
		}
	}
}

// Ctrl-] ends the input and is never sent; what came before it in the same read is.
func TestCopyUntilEscape(t *testing.T) {
	var out bytes.Buffer
	if err := copyUntilEscape(&out, strings.NewReader("ls\r"+string(rune(EscapeByte))+"rm -rf /\r")); err != nil {
		t.Fatal(err)
	}
	if out.String() != "ls\r" {
		t.Fatalf("sent %q", out.String())
	}
}

// The front proxy's headers count only behind its certificate: signed by the requestheader CA,
// for client auth, with an allowed name.
func TestFrontProxyAuthenticate(t *testing.T) {
	ca, caKey := testCA(t)
	other, otherKey := testCA(t)
	fp := &frontProxy{roots: x509.NewCertPool(), allowedNames: []string{"front-proxy-client"},
		userHeaders: []string{"X-Remote-User"}, groupHeaders: []string{"X-Remote-Group"}, extraPrefix: []string{"X-Remote-Extra-"}}
	fp.roots.AddCert(ca)
	req := func(cert *x509.Certificate) *http.Request {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.Header.Set("X-Remote-User", "alice")
		r.Header.Add("X-Remote-Group", "dev")
		r.Header.Add("X-Remote-Group", "system:authenticated")
		r.Header.Set("X-Remote-Extra-Scopes%2Fa", "x")
		if cert != nil {
			r.TLS = &tls.ConnectionState{PeerCertificates: []*x509.Certificate{cert}}
		}
		return r
	}
	u, err := fp.authenticate(req(leaf(t, ca, caKey, "front-proxy-client", x509.ExtKeyUsageClientAuth)))
	if err != nil || u.Name != "alice" || strings.Join(u.Groups, ",") != "dev,system:authenticated" || u.Extra["scopes/a"][0] != "x" {
		t.Fatalf("the front proxy: %+v, %v", u, err)
	}
	for name, cert := range map[string]*x509.Certificate{
		"no certificate":         nil,
		"another CA":             leaf(t, other, otherKey, "front-proxy-client", x509.ExtKeyUsageClientAuth),
		"a name not allowed":     leaf(t, ca, caKey, "someone", x509.ExtKeyUsageClientAuth),
		"a server's certificate": leaf(t, ca, caKey, "front-proxy-client", x509.ExtKeyUsageServerAuth),
	} {
		if _, err := fp.authenticate(req(cert)); !errors.Is(err, errNotFrontProxy) {
			t.Errorf("%s: %v, want errNotFrontProxy", name, err)
		}
	}
}

func testCA(t *testing.T) (*x509.Certificate, *ecdsa.PrivateKey) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "ca"}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return ca, key
}

func leaf(t *testing.T, ca *x509.Certificate, caKey *ecdsa.PrivateKey, cn string, usage x509.ExtKeyUsage) *x509.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: cn},
		ExtKeyUsage: []x509.ExtKeyUsage{usage}, KeyUsage: x509.KeyUsageDigitalSignature,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	c, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return c
}
