package libvirt

import (
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// TLS failures against the real libvirtd must name their cause.
func TestLibvirtdTLSRejections(t *testing.T) {
	l := needLab(t)
	read := func(parts ...string) []byte {
		b, err := os.ReadFile(filepath.Join(append([]string{l.pki}, parts...)...))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	ca := read("cacert.pem")
	tests := []struct {
		name       string
		ca, cc, ck []byte
		host       string
		want       string
	}{
		{
			name: "client certificate from an untrusted CA",
			ca:   ca, cc: read("untrusted", "clientcert.pem"), ck: read("untrusted", "clientkey.pem"),
			want: "rejected the client certificate",
		},
		{
			name: "server certificate from another CA",
			ca:   read("other-ca", "cacert.pem"), cc: read("clientcert.pem"), ck: read("clientkey.pem"),
			want: "not signed by the configured CA bundle",
		},
		{
			name: "dialled name not in the server certificate",
			ca:   ca, cc: read("clientcert.pem"), ck: read("clientkey.pem"),
			host: "127.0.0.2", // reaches libvirtd through a local relay; the certificate covers 127.0.0.1
			want: "invalid server name",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			creds, err := NewCredentials(tt.ca, tt.cc, tt.ck)
			if err != nil {
				t.Fatal(err)
			}
			ep := l.endpoint
			if tt.host != "" {
				ep = relay(t, tt.host, l.endpoint.Address()).Endpoint
			}
			c, err := Dialer{Endpoint: ep, Credentials: creds}.Dial(testContext(t))
			if err == nil {
				c.Close()
				t.Fatal("Dial succeeded")
			}
			var ce *ConnError
			if !errors.As(err, &ce) || ce.Op != "tls" || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want a tls ConnError containing %q", err, tt.want)
			}
			t.Log(err)
		})
	}
}

// relay listens on host and copies bytes to and from target, so a client can reach target
// under another name, or through a link the test can freeze.
type relayLink struct {
	Endpoint
	mu     sync.Mutex
	frozen bool
	thawed *sync.Cond
}

func relay(t *testing.T, host, target string) *relayLink {
	t.Helper()
	ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	r := &relayLink{}
	r.thawed = sync.NewCond(&r.mu)
	t.Cleanup(r.thaw)
	go func() {
		for {
			in, err := ln.Accept()
			if err != nil {
				return
			}
			out, err := net.Dial("tcp", target)
			if err != nil {
				in.Close()
				continue
			}
			go func() { r.copy(out, in); out.Close() }()
			go func() { r.copy(in, out); in.Close() }()
		}
	}()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	r.Port, _ = strconv.Atoi(port)
	r.Host = host
	return r
}

// copy forwards src to dst, holding data while the link is frozen. Like a host that hangs
// or vanishes: the sender's writes still succeed, nothing comes back.
func (r *relayLink) copy(dst io.Writer, src io.Reader) {
	buf := make([]byte, 64<<10)
	for {
		n, err := src.Read(buf)
		r.mu.Lock()
		for r.frozen {
			r.thawed.Wait()
		}
		r.mu.Unlock()
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func (r *relayLink) freeze() {
	r.mu.Lock()
	r.frozen = true
	r.mu.Unlock()
}

func (r *relayLink) thaw() {
	r.mu.Lock()
	r.frozen = false
	r.mu.Unlock()
	r.thawed.Broadcast()
}
