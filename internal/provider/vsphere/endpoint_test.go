package vsphere

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"strings"
	"testing"
	"time"

	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
)

// testCA is a self-signed CA certificate in PEM, made for the test.
func testCA(t *testing.T) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "vcenter test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

func TestEndpointFor(t *testing.T) {
	ca := testCA(t)
	creds := map[string][]byte{KeyUsername: []byte("banlieue@vsphere.local"), KeyPassword: []byte("s3cret-pw")}
	provider := func(endpoint string, insecure bool) *banlieuev1.Provider {
		return &banlieuev1.Provider{Spec: banlieuev1.ProviderSpec{Connection: banlieuev1.ProviderConnection{
			Endpoint: endpoint, InsecureSkipTLSVerify: insecure, CredentialsRef: banlieuev1.LocalObjectReference{Name: "vcenter-dc1-creds"}}}}
	}
	for _, endpoint := range []string{"https://vcenter.example/sdk", "https://vcenter.example", "https://vcenter.example/", "vcenter.example"} {
		e, rf := endpointFor(provider(endpoint, false), creds, ca)
		if rf != nil || e.URL != "https://vcenter.example/sdk" || e.Username != "banlieue@vsphere.local" || e.Password != "s3cret-pw" || string(e.CAPEM) != string(ca) {
			t.Errorf("%s: endpoint %+v, refusal %v", endpoint, e, rf)
		}
	}
	if e, rf := endpointFor(provider("vcenter.example:8443", false), creds, ca); rf != nil || e.URL != "https://vcenter.example:8443/sdk" {
		t.Errorf("a port is kept: %+v, %v", e, rf)
	}

	cases := []struct {
		name     string
		p        *banlieuev1.Provider
		creds    map[string][]byte
		ca       []byte
		reason   string
		contains string
	}{
		{"insecureSkipTLSVerify", provider("https://vcenter.example/sdk", true), creds, ca, banlieuev1.ReasonConnectFailed, "invalid connection.insecureSkipTLSVerify"},
		{"plain http", provider("http://vcenter.example/sdk", false), creds, ca, banlieuev1.ReasonConnectFailed, `scheme "http" is not supported`},
		{"user information in the URL", provider("https://root:hunter2@vcenter.example/sdk", false), creds, ca, banlieuev1.ReasonConnectFailed, "carries user information"},
		{"another path", provider("https://vcenter.example/ui", false), creds, ca, banlieuev1.ReasonConnectFailed, `path "/ui" is not vCenter's SDK`},
		{"a query", provider("https://vcenter.example/sdk?x=1", false), creds, ca, banlieuev1.ReasonConnectFailed, "a query or fragment"},
		{"no username", provider("https://vcenter.example/sdk", false), map[string][]byte{KeyPassword: []byte("x")}, ca,
			banlieuev1.ReasonCredentialsUnavailable, `missing required field: secret.data.username (Secret "vcenter-dc1-creds")`},
		{"an empty password", provider("https://vcenter.example/sdk", false), map[string][]byte{KeyUsername: []byte("u"), KeyPassword: nil}, ca,
			banlieuev1.ReasonCredentialsUnavailable, "missing required field: secret.data.password"},
		{"no CA", provider("https://vcenter.example/sdk", false), creds, nil, banlieuev1.ReasonCredentialsUnavailable, "missing required field: Provider.spec.connection.caBundle"},
		{"a CA that is no certificate", provider("https://vcenter.example/sdk", false), creds, []byte("-----BEGIN CERTIFICATE-----\nbm90\n-----END CERTIFICATE-----\n"),
			banlieuev1.ReasonCredentialsUnavailable, "holds no PEM certificate"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, rf := endpointFor(tc.p, tc.creds, tc.ca)
			if rf == nil || rf.Reason != tc.reason || !strings.Contains(rf.Message, tc.contains) {
				t.Fatalf("refusal = %+v, want %s containing %q", rf, tc.reason, tc.contains)
			}
			// No secret in a condition: neither the Secret's password nor one written in the URL.
			for _, secret := range []string{"s3cret-pw", "hunter2"} {
				if strings.Contains(rf.Message, secret) {
					t.Errorf("message %q carries a password", rf.Message)
				}
			}
		})
	}
}
