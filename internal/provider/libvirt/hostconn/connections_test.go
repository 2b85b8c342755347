package hostconn

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"banlieue.io/banlieue/pkg/libvirt"
)

// silentHost accepts TCP connections and never answers, like a libvirtd that is frozen or whose
// TLS port is black-holed: a dial to it lasts the Dialer's whole timeout.
func silentHost(t *testing.T) libvirt.Endpoint {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var held []net.Conn
	var mu sync.Mutex
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			held = append(held, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		_ = l.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range held {
			_ = c.Close()
		}
	})
	host, port, _ := net.SplitHostPort(l.Addr().String())
	p, _ := strconv.Atoi(port)
	return libvirt.Endpoint{Host: host, Port: p}
}

func testCredentials(t *testing.T) Credentials {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "pool-test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	creds, err := libvirt.NewCredentials(certPEM, certPEM, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}))
	if err != nil {
		t.Fatal(err)
	}
	return Credentials{TLS: creds, Version: "1"}
}

// TestGetDoesNotWaitOnAnotherProvidersDial: one Provider's host stops answering; another
// Provider's callers, and a caller of the same Provider whose context is short, are not held
// behind that dial.
func TestGetDoesNotWaitOnAnotherProvidersDial(t *testing.T) {
	const slowDial = 3 * time.Second
	conns := NewConnections()
	conns.Dialer.Timeout = slowDial
	t.Cleanup(conns.Close)
	creds := testCredentials(t)
	frozen, other := types.NamespacedName{Namespace: "ns", Name: "frozen"}, types.NamespacedName{Namespace: "ns", Name: "other"}

	started := make(chan struct{})
	go func() {
		close(started)
		_, _ = conns.Get(context.Background(), frozen, silentHost(t), creds)
	}()
	<-started
	time.Sleep(100 * time.Millisecond) // the frozen Provider's dial is under way

	cases := []struct {
		name     string
		provider types.NamespacedName
	}{
		{"another Provider", other},
		{"the same Provider, short context", frozen},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			defer cancel()
			start := time.Now()
			_, err := conns.Get(ctx, tc.provider, silentHost(t), creds)
			took := time.Since(start)
			if err == nil {
				t.Fatal("a dial to a silent host succeeded")
			}
			if took > time.Second {
				t.Errorf("Get returned after %s (%v): held behind the other dial of up to %s", took.Round(time.Millisecond), err, slowDial)
			}
		})
	}
}
