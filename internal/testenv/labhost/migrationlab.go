package labhost

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"banlieue.io/banlieue/internal/testenv"
	"banlieue.io/banlieue/pkg/libvirt"
)

// MigrationLab is the two hosts of hack/migration-lab.sh (BANLIEUE_MIGRATION_LAB; hack/test.sh
// starts it for a package whose tests name that variable).
type MigrationLab struct {
	// Dir is the lab's directory: its PKI, and each host's state under host-a and host-b.
	Dir string
	// A and B are the hosts' endpoints.
	A, B  string
	Creds libvirt.Credentials
}

// NeedMigrationLab is the lab of the environment, or skips the test (fails it under CI, which
// must not skip integration tests).
func NeedMigrationLab(t testing.TB) MigrationLab {
	t.Helper()
	dir := os.Getenv("BANLIEUE_MIGRATION_LAB")
	if dir == "" {
		const msg = "BANLIEUE_MIGRATION_LAB is not set; run `hack/migration-lab.sh start && . /var/tmp/banlieue-migration/env`"
		if os.Getenv("CI") != "" {
			t.Fatal(msg + " (CI must not skip integration tests)")
		}
		t.Skip(msg)
	}
	or := func(k, def string) string {
		if v := os.Getenv(k); v != "" {
			return v
		}
		return def
	}
	creds, err := libvirt.ReadPKIDir(or("BANLIEUE_MIGRATION_PKI", filepath.Join(dir, "pki")))
	if err != nil {
		t.Fatal(err)
	}
	return MigrationLab{Dir: dir, Creds: creds,
		A: or("BANLIEUE_MIGRATION_A", "qemu+tls://127.0.0.1:17100/system"), B: or("BANLIEUE_MIGRATION_B", "qemu+tls://127.0.0.1:17101/system")}
}

// Dial connects to the host at uri, closed when the test ends.
func (l MigrationLab) Dial(t testing.TB, uri string) *libvirt.Client {
	t.Helper()
	ep, err := libvirt.ParseEndpoint(uri)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := libvirt.Dialer{Endpoint: ep, Credentials: l.Creds}.Dial(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// LabOf is the host at uri as a testenv.LibvirtLab, for the helpers that take one (a Provider,
// a namespace's credentials, virsh).
func (l MigrationLab) LabOf(uri string) testenv.LibvirtLab {
	return testenv.LibvirtLab{Dir: l.Dir, Endpoint: uri, PKI: filepath.Join(l.Dir, "pki")}
}

// HostPath is where a path of host's /var/lib/libvirt, or of its /var/log/libvirt, is on this
// machine.
func (l MigrationLab) HostPath(host, libvirtPath string) string {
	state := filepath.Join(l.Dir, "host-"+host, "state")
	if rest, ok := strings.CutPrefix(libvirtPath, "/var/log/libvirt/"); ok {
		return filepath.Join(state, "log", rest)
	}
	return filepath.Join(state, "lib", strings.TrimPrefix(libvirtPath, "/var/lib/libvirt/"))
}

// Pool creates a transient dir pool of the test's own on host ("a" or "b", at uri), removed with
// everything in it when the test ends, and returns it with its client and path on the host.
func (l MigrationLab) Pool(ctx context.Context, t testing.TB, host, uri, name string) (*libvirt.Client, libvirt.StoragePool, string) {
	t.Helper()
	c := l.Dial(t, uri)
	dir := "/var/lib/libvirt/images/" + name
	p, err := c.StoragePoolCreateXML(ctx, fmt.Sprintf(`<pool type='dir'><name>%s</name><target><path>%s</path></target></pool>`, name, dir), 1)
	if err != nil {
		t.Fatalf("host %s: pool: %v", host, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if vols, err := c.StoragePoolListAllVolumes(ctx, p); err == nil {
			for _, v := range vols {
				_ = c.StorageVolDelete(ctx, v)
			}
		}
		_ = c.StoragePoolDestroy(ctx, p)
		_ = os.RemoveAll(l.HostPath(host, dir))
	})
	return c, p, dir
}
