package libvirt

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// TestFlattenOverlayAndDownloadLab is an export's host side against a real libvirtd (host a of
// hack/migration-lab.sh): a qcow2 overlay over a base, both in the pool, is copied by
// STORAGE_VOL_CREATE_XML_FROM into a standalone qcow2 (no backing file: qemu-img convert read
// the chain) that downloads whole and holds the overlay's view of the disk, the base's bytes
// where the overlay has none.
func TestFlattenOverlayAndDownloadLab(t *testing.T) {
	l := needMigrationLab(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	name := labName("flatten-")
	h := &migrationHost{name: "a", c: l.dial(t, l.a), dir: "/var/lib/libvirt/images/" + name}
	pool, err := h.c.StoragePoolCreateXML(ctx, fmt.Sprintf(`<pool type='dir'><name>%s</name><target><path>%s</path></target></pool>`, name, h.dir), 1) // VIR_STORAGE_POOL_CREATE_WITH_BUILD
	if err != nil {
		t.Fatal(err)
	}
	h.pool = pool
	t.Cleanup(func() { cleanupMigrationHost(t, l, h, name) })

	base := filepath.Join(t.TempDir(), "base.qcow2")
	run(t, "qemu-img", "create", "-q", "-f", "qcow2", base, fmt.Sprint(migDiskSize))
	run(t, "qemu-io", "-f", "qcow2", "-c", fmt.Sprintf("write -P %#x 0 %d", migBaseByte, migDiskSize), base)
	run(t, "cp", base, filepath.Join(l.dir, "host-a", "state", "lib", "images", name, "base.qcow2"))
	if err := h.c.StoragePoolRefresh(ctx, pool); err != nil {
		t.Fatal(err)
	}
	createOverlay(ctx, t, h)
	overlay, err := h.c.StorageVolLookupByName(ctx, pool, "overlay.qcow2")
	if err != nil {
		t.Fatal(err)
	}
	// What a guest would have written: 1 MiB at 1 MiB, in the overlay only.
	l.exec(t, "a", "qemu-io", "-f", "qcow2", "-c", "write -P 0x17 1M 1M", overlay.Key)

	copyXML := fmt.Sprintf(`<volume type='file'><name>export.qcow2</name><capacity>%d</capacity>`+
		`<target><format type='qcow2'/></target></volume>`, migDiskSize)
	flat, err := h.c.StorageVolCreateXMLFrom(WithCallTimeout(ctx, 2*time.Minute), pool, copyXML, overlay, 0)
	if err != nil {
		t.Fatalf("flatten: %v", err)
	}
	xml, err := h.c.StorageVolXMLDesc(ctx, flat, 0)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains([]byte(xml), []byte("<backingStore>")) && bytes.Contains([]byte(xml), []byte("<path>")) {
		t.Errorf("the copy still names a backing store:\n%s", xml)
	}

	dst, err := os.Create(filepath.Join(t.TempDir(), "export.qcow2"))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = dst.Close() }()
	n, err := h.c.StorageVolDownloadObserved(ctx, flat, dst, DownloadOptions{Limit: migDiskSize + migDiskSize/1024 + 32<<20})
	if err != nil || n == 0 {
		t.Fatalf("download = %d, %v", n, err)
	}
	out, err := exec.Command("qemu-img", "info", "--output=json", dst.Name()).Output()
	if err != nil {
		t.Fatal(err)
	}
	var info struct {
		Format  string `json:"format"`
		Backing string `json:"backing-filename"`
		Virtual int64  `json:"virtual-size"`
	}
	if err := json.Unmarshal(out, &info); err != nil {
		t.Fatal(err)
	}
	if info.Format != "qcow2" || info.Backing != "" || info.Virtual != migDiskSize {
		t.Fatalf("downloaded copy: %+v, want a standalone qcow2 of %d bytes", info, migDiskSize)
	}
	raw := filepath.Join(t.TempDir(), "export.raw")
	run(t, "qemu-img", "convert", "-O", "raw", dst.Name(), raw)
	got, err := os.ReadFile(raw)
	if err != nil {
		t.Fatal(err)
	}
	want := bytes.Repeat([]byte{migBaseByte}, migDiskSize)
	copy(want[1<<20:2<<20], bytes.Repeat([]byte{0x17}, 1<<20))
	if !bytes.Equal(got, want) {
		t.Fatal("the exported disk is not the overlay's view of the disk")
	}
}
