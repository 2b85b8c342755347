package libvirt

import (
	"bytes"
	"testing"

	"banlieue.io/banlieue/pkg/libvirt/internal/wire"
	"banlieue.io/banlieue/pkg/libvirt/internal/xdr"
)

// The replies are laid out field by field as remote_protocol.x declares them: NODE_GET_INFO's
// char model[32] is a fixed array of 32 chars, each an XDR int; STORAGE_POOL_GET_INFO's
// unsigned char state is one XDR unsigned int. A decoder that read model as 32 bytes of opaque
// would take memory from the middle of the model and fail on the trailing bytes.
func TestNodeAndPoolInfoWire(t *testing.T) {
	pool := StoragePool{Name: "fast", UUID: UUID{1, 2, 3}}
	var poolArgs []byte
	f := startFake(t, func(s *fakeSession) {
		for {
			h, payload, err := s.read()
			if err != nil {
				return
			}
			switch procedure(h.Procedure) {
			case procNodeGetInfo:
				if len(payload) != 0 {
					t.Errorf("NODE_GET_INFO sent %d bytes of arguments, want none", len(payload))
				}
				s.reply(h, wire.OK, func(e *xdr.Encoder) {
					model := "x86_64"
					for i := range nodeModelLen {
						var c int32
						if i < len(model) {
							c = int32(model[i])
						}
						e.Int32(c)
					}
					e.Uint64(24 << 20) // memory, KiB: 24 GiB
					e.Int32(16)        // cpus
					e.Int32(2400)      // mhz
					e.Int32(1)         // nodes
					e.Int32(1)         // sockets
					e.Int32(8)         // cores
					e.Int32(2)         // threads
				})
			case procStoragePoolGetInfo:
				poolArgs = payload
				s.reply(h, wire.OK, func(e *xdr.Encoder) {
					e.Uint32(2)         // state: running
					e.Uint64(100 << 30) // capacity
					e.Uint64(60 << 30)  // allocation
					e.Uint64(40 << 30)  // available
				})
			default:
				s.replyError(h, 1, "unexpected procedure")
			}
		}
	})
	c := f.dial(t)
	ctx := testContext(t)

	n, err := c.NodeGetInfo(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := NodeInfo{Model: "x86_64", MemoryKiB: 24 << 20, CPUs: 16, MHz: 2400, Nodes: 1, Sockets: 1, Cores: 8, Threads: 2}
	if n != want {
		t.Fatalf("NodeGetInfo = %+v, want %+v", n, want)
	}

	info, err := c.StoragePoolGetInfo(ctx, pool)
	if err != nil {
		t.Fatal(err)
	}
	if want := (StoragePoolInfo{State: StoragePoolRunning, Capacity: 100 << 30, Allocation: 60 << 30, Available: 40 << 30}); info != want {
		t.Fatalf("StoragePoolGetInfo = %+v, want %+v", info, want)
	}
	e := xdr.NewEncoder(nil)
	encodePool(e, pool) // remote_storage_pool_get_info_args: one remote_nonnull_storage_pool
	if !bytes.Equal(poolArgs, e.Bytes()) {
		t.Fatalf("STORAGE_POOL_GET_INFO arguments %x, want %x", poolArgs, e.Bytes())
	}
}

// The lab's libvirtd answers both with the host's own figures.
func TestNodeAndPoolInfoLab(t *testing.T) {
	l := needLab(t)
	c := l.dial(t, "qemu:///system")
	ctx := testContext(t)
	n, err := c.NodeGetInfo(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if n.CPUs < 1 || n.MemoryKiB < 64<<10 || n.Model == "" {
		t.Fatalf("NodeGetInfo = %+v: no CPUs, under 64 MiB of memory, or no model", n)
	}
	pool := testPool(t, l, c)
	info, err := c.StoragePoolGetInfo(ctx, pool)
	if err != nil {
		t.Fatal(err)
	}
	if info.State != StoragePoolRunning || info.Capacity == 0 || info.Available > info.Capacity {
		t.Fatalf("StoragePoolGetInfo = %+v, want a running pool with available <= capacity > 0", info)
	}
	t.Logf("host: %+v; pool %s: %+v", n, pool.Name, info)
}
