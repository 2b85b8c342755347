package vmexport

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"log"
	"net/http/httptest"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"banlieue.io/banlieue/internal/imagebuilder/build"
	"banlieue.io/banlieue/pkg/libvirt"
)

// labHost is one host of hack/migration-lab.sh (BANLIEUE_MIGRATION_LAB; hack/test.sh starts
// it) with a pool of the test's own.
type labHost struct {
	name string
	dir  string // the lab's directory
	c    *libvirt.Client
	pool libvirt.StoragePool
	path string // the pool's path as the host sees it
}

func needLab(t *testing.T) (dir string, creds libvirt.Credentials) {
	t.Helper()
	dir = os.Getenv("BANLIEUE_MIGRATION_LAB")
	if dir == "" {
		const msg = "BANLIEUE_MIGRATION_LAB is not set; run `hack/migration-lab.sh start && . /var/tmp/banlieue-migration/env`"
		if os.Getenv("CI") != "" {
			t.Fatal(msg + " (CI must not skip integration tests)")
		}
		t.Skip(msg)
	}
	pki := os.Getenv("BANLIEUE_MIGRATION_PKI")
	if pki == "" {
		pki = filepath.Join(dir, "pki")
	}
	creds, err := libvirt.ReadPKIDir(pki)
	if err != nil {
		t.Fatal(err)
	}
	return dir, creds
}

func openHost(ctx context.Context, t *testing.T, dir string, creds libvirt.Credentials, host, uri, pool string) *labHost {
	t.Helper()
	ep, err := libvirt.ParseEndpoint(uri)
	if err != nil {
		t.Fatal(err)
	}
	c, err := libvirt.Dialer{Endpoint: ep, Credentials: creds}.Dial(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	h := &labHost{name: host, dir: dir, c: c, path: "/var/lib/libvirt/images/" + pool}
	h.pool, err = c.StoragePoolCreateXML(ctx, fmt.Sprintf(`<pool type='dir'><name>%s</name><target><path>%s</path></target></pool>`, pool, h.path), 1) // WITH_BUILD
	if err != nil {
		t.Fatalf("host %s: pool: %v", host, err)
	}
	t.Cleanup(func() {
		cctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if vols, err := c.StoragePoolListAllVolumes(cctx, h.pool); err == nil {
			for _, v := range vols {
				_ = c.StorageVolDelete(cctx, v)
			}
		}
		if err := c.StoragePoolDestroy(cctx, h.pool); err != nil {
			t.Errorf("host %s: pool %s: %v", host, pool, err)
		}
		_ = os.RemoveAll(h.local(""))
	})
	return h
}

// local is the path on this machine of a file in the host's pool.
func (h *labHost) local(file string) string {
	return filepath.Join(h.dir, "host-"+h.name, "state", "lib", "images", filepath.Base(h.path), file)
}

// exec runs a command in the host's mount namespace, where its pool paths are what it sees.
func (h *labHost) exec(t *testing.T, args ...string) {
	t.Helper()
	out, err := exec.Command(filepath.Join("..", "..", "hack", "migration-lab.sh"), append([]string{"exec", h.name, h.dir}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("host %s: %v: %v\n%s", h.name, args, err, out)
	}
}

func run(t *testing.T, name string, args ...string) {
	t.Helper()
	if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
		t.Fatalf("%s %v: %v\n%s", name, args, err, out)
	}
}

func labName(prefix string) string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}

const (
	diskSize = 24 << 20
	baseByte = 0x42
	vmByte   = 0x17 // what the VM wrote, at 1 MiB, in its overlay only
)

// TestExportRoundTripLab is an export and the restore of a lost host with real parts: a VM's
// disk on host a (a qcow2 overlay over a base in the pool, written by qemu-io as a guest would),
// exported through ToDir with a stale copy of an earlier attempt in the way, pushed to a registry
// (go-containerregistry's, in memory, over plain HTTP) as a containerDisk, pulled back by the
// imagebuilder's OCI source pinned by the pushed digest, uploaded to host b as a new VM's base
// image and read there through a new overlay: the VM's bytes are there, and nothing of the
// export is left on host a.
func TestExportRoundTripLab(t *testing.T) {
	dir, creds := needLab(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	pool := labName("export-")
	a := openHost(ctx, t, dir, creds, "a", envOr("BANLIEUE_MIGRATION_A", "qemu+tls://127.0.0.1:17100/system"), pool)
	b := openHost(ctx, t, dir, creds, "b", envOr("BANLIEUE_MIGRATION_B", "qemu+tls://127.0.0.1:17101/system"), pool)

	// The VM's disk on host a.
	base := filepath.Join(t.TempDir(), "base.qcow2")
	run(t, "qemu-img", "create", "-q", "-f", "qcow2", base, fmt.Sprint(diskSize))
	run(t, "qemu-io", "-f", "qcow2", "-c", fmt.Sprintf("write -P %#x 0 %d", baseByte, diskSize), base)
	run(t, "cp", base, a.local("base.qcow2"))
	if err := a.c.StoragePoolRefresh(ctx, a.pool); err != nil {
		t.Fatal(err)
	}
	vol, err := a.c.StorageVolCreateXML(ctx, a.pool, fmt.Sprintf(`<volume type='file'><name>vm-disk.qcow2</name>`+
		`<capacity>%d</capacity><target><format type='qcow2'/></target>`+
		`<backingStore><path>%s/base.qcow2</path><format type='qcow2'/></backingStore></volume>`, diskSize, a.path), 0)
	if err != nil {
		t.Fatal(err)
	}
	a.exec(t, "qemu-io", "-f", "qcow2", "-c", fmt.Sprintf("write -P %#x 1M 1M", vmByte), vol.Key)

	// A copy an earlier, killed attempt left: replaced, then deleted.
	copyName := CopyName(vol.Name, "0f1e2d3c-aaaa-bbbb-cccc-000000000001")
	if _, err := a.c.StorageVolCreateXML(ctx, a.pool, fmt.Sprintf(`<volume><name>%s</name><capacity>1048576</capacity>`+
		`<target><format type='raw'/></target></volume>`, copyName), 0); err != nil {
		t.Fatal(err)
	}

	out := t.TempDir()
	res, err := ToDir(ctx, a.c, a.pool, vol, copyName, out, Options{})
	if err != nil {
		t.Fatalf("export: %v (step %s)", err, StepOf(err))
	}
	if res.Capacity != diskSize || res.Size <= 0 || res.Size > MaxFileSize(diskSize) {
		t.Fatalf("result %+v", res)
	}
	if _, err := a.c.StorageVolLookupByName(ctx, a.pool, copyName); !libvirt.IsNotFound(err) {
		t.Fatalf("the export's copy is still on the host (lookup: %v)", err)
	}
	sum, err := os.ReadFile(filepath.Join(out, DiskFile+".sha256"))
	if err != nil || string(sum) != res.Digest[len("sha256:"):]+"  "+DiskFile+"\n" {
		t.Fatalf("digest file %q, %v; export %s", sum, err, res.Digest)
	}
	if entries, _ := os.ReadDir(out); len(entries) != 2 {
		t.Fatalf("the target holds %v, want the disk and its digest", entries)
	}

	// To the registry and back through the imagebuilder's OCI source.
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(srv.Close)
	host := strings.TrimPrefix(srv.URL, "http://")
	ref, err := name.ParseReference(host+"/exports/vm-1:latest", name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	pinned, err := PushContainerDisk(ctx, filepath.Join(out, DiskFile), res, ref, "amd64", remote.WithTransport(srv.Client().Transport))
	if err != nil {
		t.Fatalf("push: %v (step %s)", err, StepOf(err))
	}
	if !strings.HasPrefix(pinned, host+"/exports/vm-1@sha256:") {
		t.Fatalf("pinned reference %q", pinned)
	}
	limits := build.DefaultLimits()
	limits.InsecureRegistries = []string{host}
	limits.AllowNetworks = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}
	artifact := filepath.Join(t.TempDir(), "disk.raw")
	built, err := build.Build(ctx, build.Options{VMImage: "restored", From: pinned, Output: artifact, Limits: limits}, io.Discard)
	if err != nil {
		t.Fatalf("import of the export: %v", err)
	}
	if built.SourceDigest != pinned[strings.Index(pinned, "@")+1:] {
		t.Errorf("the build pulled %s, the export pushed %s", built.SourceDigest, pinned)
	}

	// The new VM on host b: the artifact as its base, a fresh overlay over it.
	f, err := os.Open(artifact)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	fi, _ := f.Stat()
	restoredBase, err := b.c.StorageVolCreateXML(ctx, b.pool, fmt.Sprintf(`<volume><name>restored.raw</name><capacity>%d</capacity>`+
		`<allocation>0</allocation><target><format type='raw'/></target></volume>`, fi.Size()), 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.c.StorageVolUploadSparse(ctx, restoredBase, f, nil); err != nil {
		t.Fatal(err)
	}
	overlay, err := b.c.StorageVolCreateXML(ctx, b.pool, fmt.Sprintf(`<volume type='file'><name>new-vm.qcow2</name>`+
		`<capacity>%d</capacity><target><format type='qcow2'/></target>`+
		`<backingStore><path>%s</path><format type='raw'/></backingStore></volume>`, diskSize, restoredBase.Key), 0)
	if err != nil {
		t.Fatal(err)
	}
	// qemu-io's read -P fails unless every byte of the range holds the pattern.
	b.exec(t, "qemu-io", "-f", "qcow2", "-c", fmt.Sprintf("read -P %#x 1M 1M", vmByte), "-c", fmt.Sprintf("read -P %#x 0 1M", baseByte),
		"-c", fmt.Sprintf("read -P %#x 2M %d", baseByte, diskSize-2<<20), overlay.Key)
	got, err := os.ReadFile(artifact)
	if err != nil {
		t.Fatal(err)
	}
	want := bytes.Repeat([]byte{baseByte}, diskSize)
	copy(want[1<<20:2<<20], bytes.Repeat([]byte{vmByte}, 1<<20))
	if !bytes.Equal(got, want) {
		t.Fatal("the imported export is not the VM's disk")
	}
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}
