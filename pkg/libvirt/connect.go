package libvirt

import (
	"context"

	"banlieue.io/banlieue/pkg/libvirt/internal/wire"
	"banlieue.io/banlieue/pkg/libvirt/internal/xdr"
)

// listAll is the argument of every CONNECT_LIST_ALL_* procedure: need_results=1 asks for the
// objects, not just their count.
func listAll(flags uint32) func(*xdr.Encoder) {
	return func(e *xdr.Encoder) {
		e.Int32(1)
		e.Uint32(flags)
	}
}

// LibVersion returns libvirtd's version as major*1_000_000 + minor*1000 + release.
func (c *Client) LibVersion(ctx context.Context) (uint64, error) {
	var v uint64
	err := c.call(ctx, wire.ProgramRemote, procConnectGetLibVersion, nil, func(d *xdr.Decoder) { v = d.Uint64() })
	return v, err
}

// Capabilities returns the host capabilities XML.
func (c *Client) Capabilities(ctx context.Context) (string, error) {
	var s string
	err := c.call(ctx, wire.ProgramRemote, procConnectGetCapabilities, nil, func(d *xdr.Decoder) { s = d.String(maxString) })
	return s, err
}

// ListAllStoragePools returns every pool, active or not (flags 0).
func (c *Client) ListAllStoragePools(ctx context.Context) ([]StoragePool, error) {
	var out []StoragePool
	err := c.call(ctx, wire.ProgramRemote, procConnectListAllStoragePools, listAll(0), func(d *xdr.Decoder) {
		out = decodeList(d, maxListObjects, minPoolSize, decodePool)
		d.Uint32() // ret: the count again
	})
	return out, err
}

// ListAllNetworks returns every network, active or not.
func (c *Client) ListAllNetworks(ctx context.Context) ([]Network, error) {
	var out []Network
	err := c.call(ctx, wire.ProgramRemote, procConnectListAllNetworks, listAll(0), func(d *xdr.Decoder) {
		out = decodeList(d, maxListObjects, minNetworkSize, decodeNetwork)
		d.Uint32()
	})
	return out, err
}

// ListAllInterfaces returns the host's interfaces (bridges included) known to libvirt.
func (c *Client) ListAllInterfaces(ctx context.Context) ([]Interface, error) {
	var out []Interface
	err := c.call(ctx, wire.ProgramRemote, procConnectListAllInterfaces, listAll(0), func(d *xdr.Decoder) {
		out = decodeList(d, maxListObjects, minInterfaceSize, decodeInterface)
		d.Uint32()
	})
	return out, err
}

// ListAllDomains returns every domain, running or not.
func (c *Client) ListAllDomains(ctx context.Context) ([]Domain, error) {
	var out []Domain
	err := c.call(ctx, wire.ProgramRemote, procConnectListAllDomains, listAll(0), func(d *xdr.Decoder) {
		out = decodeList(d, maxListObjects, minDomainSize, decodeDomain)
		d.Uint32()
	})
	return out, err
}
