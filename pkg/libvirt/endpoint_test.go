package libvirt

import (
	"strings"
	"testing"
)

func TestParseEndpoint(t *testing.T) {
	tests := []struct {
		in      string
		host    string
		port    int
		wantErr string
	}{
		{in: "qemu+tls://host.example/system", host: "host.example", port: 16514},
		{in: "qemu+tls://10.0.0.5:16515/system", host: "10.0.0.5", port: 16515},
		{in: "qemu+tls://10.0.0.5", host: "10.0.0.5", port: 16514},
		{in: "qemu+tls://10.0.0.5/", host: "10.0.0.5", port: 16514},
		{in: "qemu+tls://h/session?pkipath=/x", host: "h", port: 16514},
		{in: "QEMU+TLS://h/system", host: "h", port: 16514},
		{in: "qemu+tls://root@h:1/system", host: "h", port: 1},
		{in: "qemu+tls://[fd00::1]:16514/system", host: "fd00::1", port: 16514},
		{in: "qemu+tls://[fd00::1]/system", host: "fd00::1", port: 16514},
		{in: "[fd00::1]:7", host: "fd00::1", port: 7},
		{in: "[::1]", host: "::1", port: 16514},
		{in: "fd00::1", host: "fd00::1", port: 16514},
		{in: "host", host: "host", port: 16514},
		{in: "host:16000", host: "host", port: 16000},
		{in: "qemu+ssh://host/system", wantErr: `invalid connection.endpoint: scheme "qemu+ssh" is not supported; this client speaks mutual TLS only (qemu+tls://host/system).`},
		{in: "qemu+tcp://host/system", wantErr: `scheme "qemu+tcp" is not supported`},
		{in: "qemu:///system", wantErr: `scheme "qemu" is not supported`},
		{in: "https://host", wantErr: `scheme "https" is not supported`},
		{in: "", wantErr: `invalid connection.endpoint: no host in ""`},
		{in: "qemu+tls:///system", wantErr: `invalid connection.endpoint: no host in "qemu+tls:///system"`},
		{in: "qemu+tls://:16514/system", wantErr: `no host in`},
		{in: "qemu+tls://host:abc/system", wantErr: `invalid connection.endpoint: port "abc" is not a number`},
		{in: "host:", wantErr: `port "" is not a number`},
		{in: "host:-1", wantErr: `port "-1" is not a number`},
		{in: "host:70000", wantErr: `port 70000 is out of range`},
		{in: "host:0", wantErr: `port 0 is out of range`},
		{in: "[fd00::1", wantErr: `missing ']'`},
		{in: "[fd00::1]x", wantErr: `unexpected "x" after IPv6 address`},
		{in: "[host]:1", wantErr: `"host" is not an IPv6 address`},
		{in: "fd00::1:zz:1", wantErr: `must be bracketed`},
		{in: "host/system", wantErr: `is neither`},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			ep, err := ParseEndpoint(tt.in)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				if !strings.HasPrefix(err.Error(), "invalid connection.endpoint: ") {
					t.Fatalf("err %q lacks the invalid connection.endpoint prefix", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if ep.Host != tt.host || ep.Port != tt.port {
				t.Fatalf("got %+v, want host %q port %d", ep, tt.host, tt.port)
			}
		})
	}
}

func TestSchemeErrorShape(t *testing.T) {
	_, err := ParseEndpoint("qemu+ssh://h/system")
	const prefix = `invalid connection.endpoint: scheme "qemu+ssh" is not supported`
	if err == nil || !strings.HasPrefix(err.Error(), prefix) {
		t.Fatalf("err = %v, want prefix %q", err, prefix)
	}
}

func TestEndpointString(t *testing.T) {
	for in, want := range map[string]string{
		"h":              "qemu+tls://h:16514/system",
		"[fd00::1]:9":    "qemu+tls://[fd00::1]:9/system",
		"10.1.1.1:16514": "qemu+tls://10.1.1.1:16514/system",
	} {
		ep, err := ParseEndpoint(in)
		if err != nil {
			t.Fatal(err)
		}
		if ep.String() != want {
			t.Errorf("%s: String() = %s, want %s", in, ep, want)
		}
		if again, err := ParseEndpoint(ep.String()); err != nil || again != ep {
			t.Errorf("%s: String() does not parse back: %v %v", in, again, err)
		}
	}
}
