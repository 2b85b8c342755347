package libvirt

import (
	"crypto/tls"
	"errors"
	"net"
	"strings"
	"testing"
	"time"
)

// listen serves each accepted connection with handle and returns the Dialer for it.
func listen(t *testing.T, pki *testPKI, handle func(net.Conn)) Dialer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				handle(c)
			}()
		}
	}()
	return Dialer{
		Endpoint:    Endpoint{Host: "127.0.0.1", Port: ln.Addr().(*net.TCPAddr).Port},
		Credentials: pki.credentials(t),
		Timeout:     3 * time.Second,
	}
}

// tlsThen completes a TLS handshake as libvirtd would, then runs after.
func tlsThen(pki *testPKI, after func(*tls.Conn)) func(net.Conn) {
	return func(c net.Conn) {
		tc := tls.Server(c, pki.serverConfig())
		if tc.Handshake() != nil {
			return
		}
		after(tc)
	}
}

func TestDialTLSFailures(t *testing.T) {
	pki := newTestPKI(t)
	otherCA := newTestCA(t, "other CA")
	tests := []struct {
		name   string
		handle func(net.Conn)
		tweak  func(*Dialer)
		want   string
	}{
		{
			name:   "plaintext peer",
			handle: func(c net.Conn) { _, _ = c.Write([]byte("SSH-2.0-OpenSSH_9.2\r\n")); time.Sleep(time.Second) },
			want:   "does not speak TLS",
		},
		{
			name:   "closes after handshake without confirming",
			handle: tlsThen(pki, func(*tls.Conn) {}),
			want:   "closed the connection instead of confirming the session",
		},
		{
			name:   "refuses with another confirmation byte",
			handle: tlsThen(pki, func(c *tls.Conn) { _, _ = c.Write([]byte{0}); time.Sleep(time.Second) }),
			want:   "confirmation byte 0x00",
		},
		{
			name:   "silent after handshake",
			handle: tlsThen(pki, func(*tls.Conn) { time.Sleep(2 * time.Second) }),
			tweak:  func(d *Dialer) { d.Timeout = 300 * time.Millisecond },
			want:   "connect to 127.0.0.1:",
		},
		{
			name:   "server name not in certificate",
			handle: tlsThen(pki, func(c *tls.Conn) { _, _ = c.Write([]byte{1}) }),
			tweak:  func(d *Dialer) { d.Endpoint.Host = "localhost" },
			want:   "invalid server name",
		},
		{
			name:   "server certificate from another CA",
			handle: tlsThen(pki, func(c *tls.Conn) { _, _ = c.Write([]byte{1}) }),
			tweak: func(d *Dialer) {
				cc, ck := otherCA.issue(t, "client", 0, nil, nil)
				creds, err := NewCredentials(otherCA.certPEM, cc, ck)
				if err != nil {
					t.Fatal(err)
				}
				d.Credentials = creds
			},
			want: "not signed by the configured CA bundle",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := listen(t, pki, tt.handle)
			if tt.tweak != nil {
				tt.tweak(&d)
			}
			start := time.Now()
			c, err := d.Dial(testContext(t))
			if err == nil {
				c.Close()
				t.Fatal("Dial succeeded")
			}
			var ce *ConnError
			if !errors.As(err, &ce) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want a ConnError containing %q", err, tt.want)
			}
			if time.Since(start) > 2*time.Second {
				t.Fatalf("took %s", time.Since(start))
			}
			t.Log(err)
		})
	}
}

func TestDialRefused(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	d := Dialer{Endpoint: Endpoint{Host: "127.0.0.1", Port: port}, Credentials: newTestPKI(t).credentials(t)}
	_, err = d.Dial(testContext(t))
	var ce *ConnError
	if !errors.As(err, &ce) || ce.Op != "dial" || !strings.Contains(err.Error(), "connection refused") {
		t.Fatalf("err = %v", err)
	}
}
