package testenv

import (
	"os"
	"path/filepath"
	"testing"
)

// LibvirtLab is the libvirtd that hack/libvirt-lab.sh runs with TLS on 127.0.0.1.
type LibvirtLab struct {
	// Dir holds the lab's state, env file and PID files.
	Dir string
	// Endpoint is the transport URI, e.g. qemu+tls://127.0.0.1/system.
	Endpoint string
	// PKI holds cacert.pem, clientcert.pem, clientkey.pem and the untrusted/ and other-ca/ sets.
	PKI string
}

// RequireLibvirtLab returns the lab named by BANLIEUE_LIBVIRT_LAB, skipping the test without one
// (failing under CI, where a skip would hide that nothing was tested).
func RequireLibvirtLab(t testing.TB) LibvirtLab {
	t.Helper()
	dir := os.Getenv("BANLIEUE_LIBVIRT_LAB")
	if dir == "" {
		const msg = "BANLIEUE_LIBVIRT_LAB is not set; run hack/libvirt-lab.sh start and source its env file"
		if os.Getenv("CI") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	lab := LibvirtLab{Dir: dir, Endpoint: os.Getenv("BANLIEUE_LIBVIRT_ENDPOINT"), PKI: os.Getenv("BANLIEUE_LIBVIRT_PKI")}
	if lab.Endpoint == "" {
		lab.Endpoint = "qemu+tls://127.0.0.1/system"
	}
	if lab.PKI == "" {
		lab.PKI = filepath.Join(dir, "pki")
	}
	return lab
}

// Read returns a file of the lab's PKI, e.g. "clientkey.pem" or "untrusted/clientcert.pem".
func (l LibvirtLab) Read(t testing.TB, name string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(l.PKI, name))
	if err != nil {
		t.Fatalf("reading lab PKI: %v", err)
	}
	return data
}
