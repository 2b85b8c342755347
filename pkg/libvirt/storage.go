package libvirt

import (
	"context"

	"banlieue.io/banlieue/pkg/libvirt/internal/wire"
	"banlieue.io/banlieue/pkg/libvirt/internal/xdr"
)

func (c *Client) poolCall(ctx context.Context, proc procedure, args func(*xdr.Encoder)) (StoragePool, error) {
	var p StoragePool
	err := c.call(ctx, wire.ProgramRemote, proc, args, func(d *xdr.Decoder) { p = decodePool(d) })
	return p, err
}

func (c *Client) volCall(ctx context.Context, proc procedure, args func(*xdr.Encoder)) (StorageVol, error) {
	var v StorageVol
	err := c.call(ctx, wire.ProgramRemote, proc, args, func(d *xdr.Decoder) { v = decodeVol(d) })
	return v, err
}

// poolOnly encodes the {pool} argument, optionally followed by flags.
func poolOnly(p StoragePool) func(*xdr.Encoder) {
	return func(e *xdr.Encoder) { encodePool(e, p) }
}

func poolFlags(p StoragePool, flags uint32) func(*xdr.Encoder) {
	return func(e *xdr.Encoder) {
		encodePool(e, p)
		e.Uint32(flags)
	}
}

func xmlFlags(xml string, flags uint32) func(*xdr.Encoder) {
	return func(e *xdr.Encoder) {
		e.String(xml)
		e.Uint32(flags)
	}
}

// StoragePoolLookupByName finds a pool; IsNotFound reports a missing one.
func (c *Client) StoragePoolLookupByName(ctx context.Context, name string) (StoragePool, error) {
	return c.poolCall(ctx, procStoragePoolLookupByName, func(e *xdr.Encoder) { e.String(name) })
}

// StoragePoolCreateXML creates and starts a transient pool.
func (c *Client) StoragePoolCreateXML(ctx context.Context, xml string, flags uint32) (StoragePool, error) {
	return c.poolCall(ctx, procStoragePoolCreateXML, xmlFlags(xml, flags))
}

// StoragePoolDefineXML defines a persistent pool without starting it. With StoragePoolCreate
// it prepares a host the way its operator would, which is what tests of code built on this
// package need; banlieue's provider itself only uses pools that exist.
func (c *Client) StoragePoolDefineXML(ctx context.Context, xml string, flags uint32) (StoragePool, error) {
	return c.poolCall(ctx, procStoragePoolDefineXML, xmlFlags(xml, flags))
}

// StoragePoolCreate starts a defined pool (host preparation, see StoragePoolDefineXML).
func (c *Client) StoragePoolCreate(ctx context.Context, p StoragePool, flags uint32) error {
	return c.call(ctx, wire.ProgramRemote, procStoragePoolCreate, poolFlags(p, flags), nil)
}

// StoragePoolDestroy stops a pool; a transient pool disappears.
func (c *Client) StoragePoolDestroy(ctx context.Context, p StoragePool) error {
	return c.call(ctx, wire.ProgramRemote, procStoragePoolDestroy, poolOnly(p), nil)
}

// StoragePoolRefresh makes libvirt rescan the pool, e.g. after an upload changed a volume.
func (c *Client) StoragePoolRefresh(ctx context.Context, p StoragePool) error {
	return c.call(ctx, wire.ProgramRemote, procStoragePoolRefresh, poolFlags(p, 0), nil)
}

// StoragePoolListAllVolumes returns the pool's volumes.
func (c *Client) StoragePoolListAllVolumes(ctx context.Context, p StoragePool) ([]StorageVol, error) {
	var out []StorageVol
	err := c.call(ctx, wire.ProgramRemote, procStoragePoolListAllVolumes, func(e *xdr.Encoder) {
		encodePool(e, p)
		e.Int32(1) // need_results
		e.Uint32(0)
	}, func(d *xdr.Decoder) {
		out = decodeList(d, maxListObjects, minVolSize, decodeVol)
		d.Uint32()
	})
	return out, err
}

// StorageVolCreateXML creates a volume in p.
func (c *Client) StorageVolCreateXML(ctx context.Context, p StoragePool, xml string, flags uint32) (StorageVol, error) {
	return c.volCall(ctx, procStorageVolCreateXML, func(e *xdr.Encoder) {
		encodePool(e, p)
		e.String(xml)
		e.Uint32(flags)
	})
}

// StorageVolLookupByName finds a volume in p; IsNotFound reports a missing one.
func (c *Client) StorageVolLookupByName(ctx context.Context, p StoragePool, name string) (StorageVol, error) {
	return c.volCall(ctx, procStorageVolLookupByName, func(e *xdr.Encoder) {
		encodePool(e, p)
		e.String(name)
	})
}

// StorageVolDelete deletes the volume and its data.
func (c *Client) StorageVolDelete(ctx context.Context, v StorageVol) error {
	return c.call(ctx, wire.ProgramRemote, procStorageVolDelete, func(e *xdr.Encoder) {
		encodeVol(e, v)
		e.Uint32(0)
	}, nil)
}

// StorageVolXMLDesc returns the volume's XML, read afresh from the volume: for a qcow2 overlay
// its <backingStore> names the file the overlay backs onto. flags are none so far (0).
func (c *Client) StorageVolXMLDesc(ctx context.Context, v StorageVol, flags uint32) (string, error) {
	var s string
	err := c.call(ctx, wire.ProgramRemote, procStorageVolGetXMLDesc, func(e *xdr.Encoder) {
		encodeVol(e, v)
		e.Uint32(flags)
	}, func(d *xdr.Decoder) { s = d.String(maxString) })
	return s, err
}

// StorageVolInfo is a volume's size as libvirtd reads it from the volume: capacity is the size
// the guest sees, allocation what the file takes on the host.
type StorageVolInfo struct {
	Type       int32
	Capacity   uint64
	Allocation uint64
}

// StorageVolGetInfo reads the volume's type, capacity and allocation afresh.
func (c *Client) StorageVolGetInfo(ctx context.Context, v StorageVol) (StorageVolInfo, error) {
	var info StorageVolInfo
	err := c.call(ctx, wire.ProgramRemote, procStorageVolGetInfo, func(e *xdr.Encoder) { encodeVol(e, v) },
		func(d *xdr.Decoder) {
			info = StorageVolInfo{Type: d.Int32(), Capacity: d.Uint64(), Allocation: d.Uint64()}
		})
	return info, err
}

// StorageVolResizeFlags is virStorageVolResizeFlags.
type StorageVolResizeFlags uint32

const (
	// VolResizeAllocate allocates the new space rather than leaving it sparse.
	VolResizeAllocate StorageVolResizeFlags = 1 << 0
	// VolResizeDelta makes capacity an amount to add rather than the new size.
	VolResizeDelta StorageVolResizeFlags = 1 << 1
	// VolResizeShrink allows a smaller capacity; without it libvirtd refuses one.
	VolResizeShrink StorageVolResizeFlags = 1 << 2
)

// StorageVolResize sets the volume's capacity in bytes. The volume must not be in use by a
// running domain: QEMU holds its image lock, and a running guest's disk is grown with
// DomainBlockResize instead.
func (c *Client) StorageVolResize(ctx context.Context, v StorageVol, capacity uint64, flags StorageVolResizeFlags) error {
	return c.call(ctx, wire.ProgramRemote, procStorageVolResize, func(e *xdr.Encoder) {
		encodeVol(e, v)
		e.Uint64(capacity)
		e.Uint32(uint32(flags))
	}, nil)
}
