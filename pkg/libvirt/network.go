package libvirt

import (
	"context"

	"banlieue.io/banlieue/pkg/libvirt/internal/wire"
	"banlieue.io/banlieue/pkg/libvirt/internal/xdr"
)

func networkOnly(n Network) func(*xdr.Encoder) {
	return func(e *xdr.Encoder) { encodeNetwork(e, n) }
}

// NetworkLookupByName finds a network; IsNotFound reports a missing one. Like NetworkDefineXML
// and NetworkUndefine it prepares a host the way its operator would, which is what tests of
// code built on this package need; banlieue's provider itself only lists networks.
func (c *Client) NetworkLookupByName(ctx context.Context, name string) (Network, error) {
	var n Network
	err := c.call(ctx, wire.ProgramRemote, procNetworkLookupByName, func(e *xdr.Encoder) { e.String(name) },
		func(d *xdr.Decoder) { n = decodeNetwork(d) })
	return n, err
}

// NetworkDefineXML defines a persistent network without starting it (host preparation, see
// NetworkLookupByName).
func (c *Client) NetworkDefineXML(ctx context.Context, xml string) (Network, error) {
	var n Network
	err := c.call(ctx, wire.ProgramRemote, procNetworkDefineXML, func(e *xdr.Encoder) { e.String(xml) },
		func(d *xdr.Decoder) { n = decodeNetwork(d) })
	return n, err
}

// NetworkUndefine removes a network's persistent definition (host preparation, see
// NetworkLookupByName).
func (c *Client) NetworkUndefine(ctx context.Context, n Network) error {
	return c.call(ctx, wire.ProgramRemote, procNetworkUndefine, networkOnly(n), nil)
}
