package libvirt

import (
	"crypto/ecdsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"strings"
	"testing"
)

// TestCredentialsNeverPrintKey formats every value that holds the key with every verb a log
// line might use and checks that neither the PEM nor the key's scalar appears.
func TestCredentialsNeverPrintKey(t *testing.T) {
	p := newTestPKI(t)
	creds := p.credentials(t)
	blk, _ := pem.Decode(p.clientKey)
	k, err := x509.ParsePKCS8PrivateKey(blk.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := k.(*ecdsa.PrivateKey).Bytes()
	if err != nil {
		t.Fatal(err)
	}
	d := new(big.Int).SetBytes(raw) // the key's scalar
	secrets := []string{
		strings.Split(string(p.clientKey), "\n")[1], // a line of the PEM body
		d.String(),
		d.Text(16),
		fmt.Sprint(d.Bits()),
	}
	// The check must be able to see a leak: the raw key does print its scalar.
	if !strings.Contains(fmt.Sprintf("%v", creds.p.cert.PrivateKey), d.String()) {
		t.Fatal("leak detector is blind: raw key print lacks the scalar")
	}
	type holder struct {
		c Credentials // unexported: fmt cannot call its methods
	}
	dialer := Dialer{Credentials: creds, URI: "qemu:///system"}
	values := []any{creds, &creds, dialer, &dialer, holder{creds}, &holder{creds}, []Credentials{creds}, map[string]Credentials{"k": creds}}
	for _, v := range values {
		for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x"} {
			out := fmt.Sprintf(verb, v)
			for _, s := range secrets {
				if strings.Contains(out, s) {
					t.Fatalf("%s of %T prints key material: %s", verb, v, out)
				}
			}
		}
	}
	if got := creds.String(); !strings.Contains(got, "[REDACTED]") || !strings.Contains(got, `"CN=client"`) {
		t.Errorf("String() = %s", got)
	}
}

func TestNewCredentialsErrors(t *testing.T) {
	p := newTestPKI(t)
	other := newTestCA(t, "other")
	_, otherKey := other.issue(t, "x", 0, nil, nil)
	tests := []struct {
		name          string
		ca, cert, key []byte
		want          string
	}{
		{"no CA", nil, p.clientCert, p.clientKey, "invalid PEM for caBundle"},
		{"garbage CA", []byte("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"), p.clientCert, p.clientKey, "invalid PEM for caBundle"},
		{"no cert", p.ca.certPEM, []byte("nope"), p.clientKey, "invalid PEM for client certificate"},
		{"no key", p.ca.certPEM, p.clientCert, []byte("nope"), "invalid PEM for client key"},
		{"mismatched key", p.ca.certPEM, p.clientCert, otherKey, "does not match"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := NewCredentials(tt.ca, tt.cert, tt.key)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want %q", err, tt.want)
			}
			if lines := strings.Split(string(tt.key), "\n"); len(lines) > 2 && strings.Contains(err.Error(), lines[1]) {
				t.Fatalf("error quotes the key: %v", err)
			}
		})
	}
	if _, err := (Dialer{}).Dial(t.Context()); err == nil || errors.Is(err, ErrConnectionClosed) {
		t.Fatalf("Dial without credentials: %v", err)
	}
}
