package libvirt

import (
	"context"

	"banlieue.io/banlieue/pkg/libvirt/internal/wire"
	"banlieue.io/banlieue/pkg/libvirt/internal/xdr"
)

// NodeInfo is the host's size as NODE_GET_INFO reports it (remote_node_get_info_ret).
type NodeInfo struct {
	// Model is the CPU architecture, e.g. x86_64.
	Model string
	// MemoryKiB is the host's memory in KiB.
	MemoryKiB uint64
	// CPUs is the number of logical CPUs the host has online.
	CPUs int32
	// MHz is the CPU frequency; Nodes, Sockets, Cores and Threads its topology.
	MHz, Nodes, Sockets, Cores, Threads int32
}

// nodeModelLen is the length of remote_node_get_info_ret's model: char model[32], an XDR fixed
// array of chars, each carried as a 4-byte int.
const nodeModelLen = 32

// NodeGetInfo reads the host's CPU count and memory: one call, no arguments.
func (c *Client) NodeGetInfo(ctx context.Context) (NodeInfo, error) {
	var n NodeInfo
	err := c.call(ctx, wire.ProgramRemote, procNodeGetInfo, nil, func(d *xdr.Decoder) {
		var model [nodeModelLen]byte
		for i := range model {
			model[i] = byte(d.Int32())
		}
		n.Model = cString(model[:])
		n.MemoryKiB = d.Uint64()
		n.CPUs = d.Int32()
		n.MHz = d.Int32()
		n.Nodes = d.Int32()
		n.Sockets = d.Int32()
		n.Cores = d.Int32()
		n.Threads = d.Int32()
	})
	return n, err
}

// cString is b up to its first NUL.
func cString(b []byte) string {
	for i, c := range b {
		if c == 0 {
			return string(b[:i])
		}
	}
	return string(b)
}

// StoragePoolInfo is a pool's state and sizes (remote_storage_pool_get_info_ret), in bytes.
type StoragePoolInfo struct {
	// State is virStoragePoolState: 2 is running, the only state whose sizes are meaningful.
	State      uint8
	Capacity   uint64
	Allocation uint64
	Available  uint64
}

// StoragePoolRunning is VIR_STORAGE_POOL_RUNNING.
const StoragePoolRunning uint8 = 2

// StoragePoolGetInfo reads a pool's capacity and free space, as of libvirt's last refresh of it.
func (c *Client) StoragePoolGetInfo(ctx context.Context, p StoragePool) (StoragePoolInfo, error) {
	var info StoragePoolInfo
	err := c.call(ctx, wire.ProgramRemote, procStoragePoolGetInfo, poolOnly(p), func(d *xdr.Decoder) {
		info.State = uint8(d.Uint32()) // unsigned char, carried in 4 bytes
		info.Capacity = d.Uint64()
		info.Allocation = d.Uint64()
		info.Available = d.Uint64()
	})
	return info, err
}
