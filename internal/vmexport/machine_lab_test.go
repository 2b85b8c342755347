package vmexport

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	infrav1 "banlieue.io/banlieue/api/infrastructure/v1alpha1"
	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
	"banlieue.io/banlieue/internal/testenv"
	"banlieue.io/banlieue/pkg/libvirt"
)

// machineFixture is a LibvirtMachine "web" in ns with its Provider on host a of the migration
// lab, and on the host its pool, its image (size bytes of baseByte) and its OS disk, an overlay
// whose data bytes at 1 MiB hold vmByte.
type machineFixture struct {
	env    *testenv.Env
	lab    testenv.LibvirtLab
	host   *labHost
	vol    libvirt.StorageVol
	domain string
	ns     string
}

func newMachineFixture(ctx context.Context, t *testing.T, size, data int64) *machineFixture {
	t.Helper()
	dir, creds := needLab(t)
	testenv.SetLogger(t)
	env := testenv.Start(t)
	pki := os.Getenv("BANLIEUE_MIGRATION_PKI")
	if pki == "" {
		pki = filepath.Join(dir, "pki")
	}
	lab := testenv.LibvirtLab{Dir: dir, Endpoint: envOr("BANLIEUE_MIGRATION_A", "qemu+tls://127.0.0.1:17100/system"), PKI: pki}
	const ns = "tenant-export"
	env.CreateLabNamespace(ctx, t, lab, ns, "host-creds", "host-ca")
	env.Create(ctx, t, lab.Provider(ns, "host-a", "host-creds", "host-ca", banlieuev1.ProviderCapabilities{}))

	a := openHost(ctx, t, dir, creds, "a", lab.Endpoint, labName("exportm-"))
	domain := labName("tenant-export-web-")
	base := filepath.Join(t.TempDir(), "base.raw")
	run(t, "qemu-img", "create", "-q", "-f", "raw", base, fmt.Sprint(size))
	run(t, "qemu-io", "-f", "raw", "-c", fmt.Sprintf("write -P %#x 0 %d", baseByte, size), base)
	run(t, "cp", base, a.local("image.raw"))
	if err := a.c.StoragePoolRefresh(ctx, a.pool); err != nil {
		t.Fatal(err)
	}
	vol, err := a.c.StorageVolCreateXML(ctx, a.pool, fmt.Sprintf(`<volume type='file'><name>%s-root.qcow2</name>`+
		`<capacity>%d</capacity><target><format type='qcow2'/></target>`+
		`<backingStore><path>%s/image.raw</path><format type='raw'/></backingStore></volume>`, domain, size, a.path), 0)
	if err != nil {
		t.Fatal(err)
	}
	a.exec(t, "qemu-io", "-f", "qcow2", "-c", fmt.Sprintf("write -P %#x 1M %d", vmByte, data), vol.Key)
	return &machineFixture{env: env, lab: lab, host: a, vol: vol, domain: domain, ns: ns}
}

// machine creates the fixture's LibvirtMachine, its status recording volumes.
func (fx *machineFixture) machine(ctx context.Context, t *testing.T, volumes ...string) *infrav1.LibvirtMachine {
	t.Helper()
	m := &infrav1.LibvirtMachine{
		ObjectMeta: metav1.ObjectMeta{Namespace: fx.ns, Name: "web"},
		Spec: infrav1.LibvirtMachineSpec{
			ProviderRef: &infrav1.ProviderReference{Name: "host-a"},
			Pool:        fx.host.pool.Name,
			DomainName:  fx.domain,
			BootSource:  infrav1.BootSource{Kind: infrav1.BootBackingVolume, Volume: "image.raw"},
			VCPUs:       1,
			MemoryMiB:   128,
			Firmware:    "bios",
			Disks:       []infrav1.LibvirtDisk{{Name: "root", SizeGiB: 1}},
		},
	}
	fx.env.Create(ctx, t, m)
	if len(volumes) > 0 {
		m.Status.Volumes = volumes
		if err := fx.env.Client.Status().Update(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	return m
}

// TestExportMachineLab exports a LibvirtMachine's OS disk as the export command does, with a
// real API server (the machine, its Provider, the Provider's credentials Secret and CA) and a
// real libvirtd (host a of hack/migration-lab.sh): refused while the domain runs, refused for a
// disk the machine's status does not record, exported once the domain is shut off, the file
// being the machine's view of its disk.
func TestExportMachineLab(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	fx := newMachineFixture(ctx, t, diskSize, 1<<20)
	env, a, vol, domain, ns := fx.env, fx.host, fx.vol, fx.domain, fx.ns
	dom, err := a.c.DomainDefineXML(ctx, fmt.Sprintf(`<domain type='qemu'><name>%s</name><memory unit='MiB'>64</memory>`+
		`<os><type arch='x86_64'>hvm</type></os><devices><disk type='file' device='disk'><driver name='qemu' type='qcow2'/>`+
		`<source file='%s'/><target dev='vda' bus='virtio'/></disk><graphics type='vnc' autoport='yes' listen='127.0.0.1'/></devices></domain>`, domain, vol.Key), 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_ = a.c.DomainDestroy(cctx, dom)
		_ = a.c.DomainUndefine(cctx, dom, 0)
	})

	m := fx.machine(ctx, t)
	out := t.TempDir()
	opts := MachineOptions{Namespace: ns, Machine: "web", OutputDir: out}

	// Not in status.volumes: not the machine's as far as banlieue knows.
	if _, err := ExportMachine(ctx, env.Client, opts, io.Discard); err == nil || !strings.Contains(err.Error(), "status.volumes") {
		t.Fatalf("export of an unrecorded volume: %v, want a refusal naming status.volumes", err)
	}
	m.Status.Volumes = []string{vol.Name}
	if err := env.Client.Status().Update(ctx, m); err != nil {
		t.Fatal(err)
	}

	if dom, err = a.c.DomainCreate(ctx, dom, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := ExportMachine(ctx, env.Client, opts, io.Discard); !errors.Is(err, ErrVMRunning) {
		t.Fatalf("export of a running VM: %v, want ErrVMRunning", err)
	}
	if vols, err := a.c.StoragePoolListAllVolumes(ctx, a.pool); err != nil || len(vols) != 2 {
		t.Fatalf("the refused export touched the pool: %v %v", vols, err)
	}
	if err := a.c.DomainDestroy(ctx, dom); err != nil {
		t.Fatal(err)
	}

	var log bytes.Buffer
	res, err := ExportMachine(ctx, env.Client, opts, &log)
	if err != nil {
		t.Fatalf("export: %v (step %s)\n%s", err, StepOf(err), log.String())
	}
	if res.Volume != vol.Name || res.File != filepath.Join(out, DiskFile) || res.Image != "" {
		t.Fatalf("result %+v", res)
	}
	if d := testenv.FileSHA256(t, res.File); "sha256:"+d != res.Digest {
		t.Fatalf("file %s, export %s", d, res.Digest)
	}
	raw := filepath.Join(t.TempDir(), "disk.raw")
	run(t, "qemu-img", "convert", "-O", "raw", res.File, raw)
	got, err := os.ReadFile(raw)
	if err != nil {
		t.Fatal(err)
	}
	want := bytes.Repeat([]byte{baseByte}, diskSize)
	copy(want[1<<20:2<<20], bytes.Repeat([]byte{vmByte}, 1<<20))
	if !bytes.Equal(got, want) {
		t.Fatal("the export is not the machine's disk")
	}
	if vols, err := a.c.StoragePoolListAllVolumes(ctx, a.pool); err != nil || len(vols) != 2 {
		t.Fatalf("the export left volumes on the host: %v %v", vols, err)
	}
	if strings.Contains(log.String(), "PRIVATE KEY") {
		t.Fatal("the export's log holds key material")
	}
}
