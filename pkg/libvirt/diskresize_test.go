package libvirt

import (
	"fmt"
	"testing"

	"banlieue.io/banlieue/pkg/libvirt/internal/wire"
	"banlieue.io/banlieue/pkg/libvirt/internal/xdr"
)

// TestDiskResizeWire checks the calls that grow a disk against remote_protocol.x, field by field:
//
//	remote_storage_vol_get_info_args {remote_nonnull_storage_vol vol}
//	remote_storage_vol_get_info_ret {char type; unsigned hyper capacity; unsigned hyper allocation}
//	remote_storage_vol_resize_args {remote_nonnull_storage_vol vol; unsigned hyper capacity; unsigned int flags}
//	remote_domain_block_resize_args {remote_nonnull_domain dom; remote_nonnull_string disk; unsigned hyper size; unsigned int flags}
//	remote_domain_get_block_info_args {remote_nonnull_domain dom; remote_nonnull_string path; unsigned int flags}
//	remote_domain_get_block_info_ret {unsigned hyper allocation; unsigned hyper capacity; unsigned hyper physical}
//
// An XDR char is a whole 4-byte int, and the block info reply puts allocation before capacity.
func TestDiskResizeWire(t *testing.T) {
	vol := StorageVol{Pool: "default", Name: "vm-os.qcow2", Key: "/pools/default/vm-os.qcow2"}
	dom := Domain{Name: "ns-vm", UUID: UUID{9, 8, 7}, ID: 3}
	saw := make(chan string, 8)
	f := startFake(t, func(s *fakeSession) {
		for {
			h, payload, err := s.read()
			if err != nil {
				return
			}
			d := xdr.NewDecoder(payload)
			var got string
			var reply func(*xdr.Encoder)
			switch procedure(h.Procedure) {
			case procStorageVolGetInfo:
				got = fmt.Sprintf("info %+v", decodeVol(d))
				reply = func(e *xdr.Encoder) { e.Int32(0); e.Uint64(20 << 30); e.Uint64(3 << 30) }
			case procStorageVolResize:
				got = fmt.Sprintf("resize %+v %d %d", decodeVol(d), d.Uint64(), d.Uint32())
			case procDomainBlockResize:
				got = fmt.Sprintf("blockresize %+v %s %d %d", decodeDomain(d), d.String(maxString), d.Uint64(), d.Uint32())
			case procDomainGetBlockInfo:
				got = fmt.Sprintf("blockinfo %+v %s %d", decodeDomain(d), d.String(maxString), d.Uint32())
				reply = func(e *xdr.Encoder) { e.Uint64(1 << 30); e.Uint64(40 << 30); e.Uint64(2 << 30) }
			default:
				got = fmt.Sprintf("procedure %v", procedure(h.Procedure))
			}
			if err := d.Finish(); err != nil {
				got += " (decode: " + err.Error() + ")"
			}
			saw <- got
			s.reply(h, wire.OK, reply)
		}
	})
	c := f.dial(t)
	ctx := testContext(t)

	info, err := c.StorageVolGetInfo(ctx, vol)
	if want := (StorageVolInfo{Type: 0, Capacity: 20 << 30, Allocation: 3 << 30}); err != nil || info != want {
		t.Fatalf("StorageVolGetInfo = %+v, %v; want %+v", info, err, want)
	}
	if err := c.StorageVolResize(ctx, vol, 40<<30, VolResizeShrink); err != nil {
		t.Fatal(err)
	}
	if err := c.DomainBlockResize(ctx, dom, "vdb", 40<<30, BlockResizeBytes); err != nil {
		t.Fatal(err)
	}
	bi, err := c.DomainGetBlockInfo(ctx, dom, "vdb")
	if want := (BlockInfo{Allocation: 1 << 30, Capacity: 40 << 30, Physical: 2 << 30}); err != nil || bi != want {
		t.Fatalf("DomainGetBlockInfo = %+v, %v; want %+v", bi, err, want)
	}
	for _, want := range []string{
		fmt.Sprintf("info %+v", vol),
		fmt.Sprintf("resize %+v %d 4", vol, uint64(40<<30)),
		fmt.Sprintf("blockresize %+v vdb %d 1", dom, uint64(40<<30)),
		fmt.Sprintf("blockinfo %+v vdb 0", dom),
	} {
		if got := <-saw; got != want {
			t.Errorf("the fake saw %q, want %q", got, want)
		}
	}
	for proc, name := range map[procedure]string{procStorageVolGetInfo: "STORAGE_VOL_GET_INFO", procStorageVolResize: "STORAGE_VOL_RESIZE",
		procDomainBlockResize: "DOMAIN_BLOCK_RESIZE", procDomainGetBlockInfo: "DOMAIN_GET_BLOCK_INFO"} {
		if proc.String() != name {
			t.Errorf("procedure %d is named %s, want %s", proc, proc, name)
		}
	}
}

// A real volume grows, sparse, and is refused a smaller size unless asked to shrink (which
// banlieue never asks).
func TestLabStorageVolResize(t *testing.T) {
	l := needLab(t)
	c := l.dial(t, "qemu:///system")
	ctx := testContext(t)
	pool := testPool(t, l, c)
	vol, err := c.StorageVolCreateXML(ctx, pool, `<volume><name>grow.qcow2</name><capacity unit='bytes'>4194304</capacity>`+
		`<target><format type='qcow2'/></target></volume>`, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.StorageVolResize(ctx, vol, 64<<20, 0); err != nil {
		t.Fatal(err)
	}
	info, err := c.StorageVolGetInfo(ctx, vol)
	if err != nil || info.Capacity != 64<<20 || info.Allocation >= 64<<20 {
		t.Fatalf("after growing to 64 MiB: %+v, %v; want capacity 64 MiB, sparse", info, err)
	}
	err = c.StorageVolResize(ctx, vol, 8<<20, 0)
	var le *Error
	if !asError(err, &le) {
		t.Fatalf("shrinking without VolResizeShrink: %v, want libvirtd's refusal", err)
	}
	if info, err := c.StorageVolGetInfo(ctx, vol); err != nil || info.Capacity != 64<<20 {
		t.Fatalf("after the refused shrink: %+v, %v; want 64 MiB still", info, err)
	}
}

// A running domain's disk grows live: QEMU grows the image, and DOMAIN_GET_BLOCK_INFO and the
// volume both read the new size while the domain still runs.
func TestLabDomainBlockResize(t *testing.T) {
	l := needLab(t)
	c := l.dial(t, "qemu:///system")
	ctx := testContext(t)
	pool := testPool(t, l, c)
	disk := createVol(t, c, pool, "root.raw", 1<<20)

	name := uniqueName("grow")
	dom, err := c.DomainDefineXML(ctx, fmt.Sprintf(domainXML, name, disk.Key), 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.DomainDestroy(testContext(t), dom)
		_ = c.DomainUndefine(testContext(t), dom, UndefineManagedSave|UndefineNVRAM|UndefineTPM)
	})
	running, err := c.DomainCreate(ctx, dom, 0)
	if err != nil {
		t.Fatal(err)
	}
	before, err := c.DomainGetBlockInfo(ctx, running, "vda")
	if err != nil || before.Capacity != 1<<20 {
		t.Fatalf("DomainGetBlockInfo before = %+v, %v; want capacity 1 MiB", before, err)
	}
	if err := c.DomainBlockResize(ctx, running, "vda", 16<<20, BlockResizeBytes); err != nil {
		t.Fatal(err)
	}
	after, err := c.DomainGetBlockInfo(ctx, running, "vda")
	if err != nil || after.Capacity != 16<<20 {
		t.Fatalf("DomainGetBlockInfo after = %+v, %v; want capacity 16 MiB", after, err)
	}
	if st, _, err := c.DomainState(ctx, running); err != nil || st != DomainRunning {
		t.Fatalf("state after the resize = %v, %v; want Running", st, err)
	}
	if err := c.StoragePoolRefresh(ctx, pool); err != nil {
		t.Fatal(err)
	}
	if info, err := c.StorageVolGetInfo(ctx, disk); err != nil || info.Capacity != 16<<20 {
		t.Fatalf("the volume after the live resize: %+v, %v; want 16 MiB", info, err)
	}
	// A disk the running domain lacks (a volume defined for its next boot) is refused as an
	// invalid argument, which tells it from a failure.
	_, err = c.DomainGetBlockInfo(ctx, running, "/no/such/disk.qcow2")
	var le *Error
	if !asError(err, &le) || le.Code != ErrInvalidArg {
		t.Fatalf("DomainGetBlockInfo of a disk the domain lacks: %v, want libvirt error code %d", err, ErrInvalidArg)
	}
}
