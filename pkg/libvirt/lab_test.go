package libvirt

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// lab describes the libvirtd started by hack/libvirt-lab.sh.
type lab struct {
	dir      string
	pki      string
	endpoint Endpoint
}

// needLab returns the lab named by BANLIEUE_LIBVIRT_LAB. Without one the test is skipped,
// except under CI (CI non-empty), where a skipped integration test would hide a broken setup.
func needLab(t testing.TB) lab {
	t.Helper()
	dir := os.Getenv("BANLIEUE_LIBVIRT_LAB")
	if dir == "" {
		const msg = "BANLIEUE_LIBVIRT_LAB is not set; run `hack/libvirt-lab.sh start && . /var/tmp/banlieue-lab/env`"
		if os.Getenv("CI") != "" {
			t.Fatal(msg + " (CI must not skip integration tests)")
		}
		t.Skip(msg)
	}
	ep, err := ParseEndpoint(cmpOrEnv("BANLIEUE_LIBVIRT_ENDPOINT", "qemu+tls://127.0.0.1/system"))
	if err != nil {
		t.Fatal(err)
	}
	return lab{dir: dir, pki: cmpOrEnv("BANLIEUE_LIBVIRT_PKI", filepath.Join(dir, "pki")), endpoint: ep}
}

func cmpOrEnv(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

func (l lab) credentials(t testing.TB) Credentials {
	t.Helper()
	creds, err := ReadPKIDir(l.pki)
	if err != nil {
		t.Fatal(err)
	}
	return creds
}

func (l lab) dialer(t testing.TB, uri string) Dialer {
	return Dialer{Endpoint: l.endpoint, Credentials: l.credentials(t), URI: uri}
}

// dial opens a client that the test closes on cleanup.
func (l lab) dial(t testing.TB, uri string) *Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := l.dialer(t, uri).Dial(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// restartLibvirtd kills libvirtd and starts it again with the same state.
func (l lab) restartLibvirtd(t testing.TB) {
	t.Helper()
	script := filepath.Join("..", "..", "hack", "libvirt-lab.sh")
	out, err := exec.Command(script, "restart-libvirtd", l.dir).CombinedOutput()
	if err != nil {
		t.Fatalf("restart libvirtd: %v\n%s", err, out)
	}
}

func testContext(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}
