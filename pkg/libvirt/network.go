package libvirt

import (
	"context"

	"banlieue.io/banlieue/pkg/libvirt/internal/wire"
	"banlieue.io/banlieue/pkg/libvirt/internal/xdr"
)

func networkOnly(n Network) func(*xdr.Encoder) {
	return func(e *xdr.Encoder) { encodeNetwork(e, n) }
}

// NetworkLookupByName finds a network; IsNotFound reports a missing one.
func (c *Client) NetworkLookupByName(ctx context.Context, name string) (Network, error) {
	var n Network
	err := c.call(ctx, wire.ProgramRemote, procNetworkLookupByName, func(e *xdr.Encoder) { e.String(name) },
		func(d *xdr.Decoder) { n = decodeNetwork(d) })
	return n, err
}

// NetworkDefineXML defines a persistent network without starting it.
func (c *Client) NetworkDefineXML(ctx context.Context, xml string) (Network, error) {
	var n Network
	err := c.call(ctx, wire.ProgramRemote, procNetworkDefineXML, func(e *xdr.Encoder) { e.String(xml) },
		func(d *xdr.Decoder) { n = decodeNetwork(d) })
	return n, err
}

// NetworkCreate starts a defined network.
func (c *Client) NetworkCreate(ctx context.Context, n Network) error {
	return c.call(ctx, wire.ProgramRemote, procNetworkCreate, networkOnly(n), nil)
}

// NetworkDestroy stops a network.
func (c *Client) NetworkDestroy(ctx context.Context, n Network) error {
	return c.call(ctx, wire.ProgramRemote, procNetworkDestroy, networkOnly(n), nil)
}

// NetworkUndefine removes a network's persistent definition.
func (c *Client) NetworkUndefine(ctx context.Context, n Network) error {
	return c.call(ctx, wire.ProgramRemote, procNetworkUndefine, networkOnly(n), nil)
}

// NetworkDHCPLeases returns the network's DHCP leases, all of them when mac is empty.
func (c *Client) NetworkDHCPLeases(ctx context.Context, n Network, mac string) ([]DHCPLease, error) {
	var out []DHCPLease
	err := c.call(ctx, wire.ProgramRemote, procNetworkGetDHCPLeases, func(e *xdr.Encoder) {
		encodeNetwork(e, n)
		if mac == "" {
			e.OptString(nil)
		} else {
			e.OptString(&mac)
		}
		e.Int32(1) // need_results
		e.Uint32(0)
	}, func(d *xdr.Decoder) {
		out = decodeList(d, maxDHCPLeases, 9*4, decodeLease)
		d.Uint32()
	})
	return out, err
}

func decodeLease(d *xdr.Decoder) DHCPLease {
	return DHCPLease{
		Iface:      d.String(maxString),
		ExpiryTime: d.Int64(),
		Type:       IPAddrType(d.Int32()),
		MAC:        deref(d.OptString(maxString)),
		IAID:       deref(d.OptString(maxString)),
		IPAddr:     d.String(maxString),
		Prefix:     d.Uint32(),
		Hostname:   deref(d.OptString(maxString)),
		ClientID:   deref(d.OptString(maxString)),
	}
}
