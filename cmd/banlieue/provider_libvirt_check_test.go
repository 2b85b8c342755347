package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"banlieue.io/banlieue/internal/testenv"
)

func TestCheckAgainstLab(t *testing.T) {
	lab := testenv.RequireLibvirtLab(t)
	for _, uri := range []string{"qemu:///system", "test:///default"} {
		var out bytes.Buffer
		err := runLibvirtCheck(checkContext(t), &out, libvirtCheckOptions{endpoint: lab.Endpoint, pkiDir: lab.PKI, uri: uri, timeout: 30 * time.Second})
		if err != nil {
			t.Fatalf("%s: %v", uri, err)
		}
		for _, want := range []string{"libvirt:", "domain type:", "storage pools:", "networks:", "interfaces:", uri} {
			if !strings.Contains(out.String(), want) {
				t.Errorf("%s: report lacks %q:\n%s", uri, want, out.String())
			}
		}
		t.Logf("%s:\n%s", uri, out.String())
	}
}

func TestCheckFailures(t *testing.T) {
	lab := testenv.RequireLibvirtLab(t)
	untrusted := t.TempDir()
	for dst, src := range map[string]string{"cacert.pem": "cacert.pem", "clientcert.pem": "untrusted/clientcert.pem", "clientkey.pem": "untrusted/clientkey.pem"} {
		if err := os.WriteFile(filepath.Join(untrusted, dst), lab.Read(t, src), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name string
		o    libvirtCheckOptions
		want string
	}{
		{"ssh scheme", libvirtCheckOptions{endpoint: "qemu+ssh://host/system", pkiDir: lab.PKI}, `invalid connection.endpoint: scheme "qemu+ssh" is not supported`},
		{"missing pki", libvirtCheckOptions{endpoint: lab.Endpoint, pkiDir: t.TempDir()}, "reading --pki-dir"},
		{"untrusted client", libvirtCheckOptions{endpoint: lab.Endpoint, pkiDir: untrusted}, "rejected the client certificate"},
		{"nothing listening", libvirtCheckOptions{endpoint: "127.0.0.1:1", pkiDir: lab.PKI}, "connection refused"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.o.uri, tt.o.timeout = "qemu:///system", 10*time.Second
			err := runLibvirtCheck(checkContext(t), &bytes.Buffer{}, tt.o)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want %q", err, tt.want)
			}
		})
	}
}

func TestCheckCommandFlags(t *testing.T) {
	cmd := newProviderLibvirtCheckCommand()
	cmd.SetArgs([]string{})
	cmd.SetOut(&bytes.Buffer{})
	cmd.SetErr(&bytes.Buffer{})
	if err := cmd.Execute(); err == nil || !strings.Contains(err.Error(), `"endpoint" not set`) {
		t.Fatalf("without --endpoint: %v", err)
	}
	for _, name := range []string{"endpoint", "pki-dir", "uri", "timeout"} {
		if cmd.Flags().Lookup(name) == nil {
			t.Errorf("flag --%s missing", name)
		}
	}
	if got := cmd.Flags().Lookup("pki-dir").DefValue; !strings.HasSuffix(got, filepath.Join(".config", "banlieue", "libvirt")) {
		t.Errorf("--pki-dir default = %q", got)
	}
}

func checkContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}
