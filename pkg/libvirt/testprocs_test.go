package libvirt

import (
	"context"
	"maps"

	"banlieue.io/banlieue/pkg/libvirt/internal/wire"
	"banlieue.io/banlieue/pkg/libvirt/internal/xdr"
)

// Procedures only this package's lab tests call: they check what the tests do (a volume's
// size after an upload, a pool or network really gone) or complete a lifecycle under test.
// Banlieue never calls them, so they are not part of the package.
const (
	procDomainShutdown        procedure = 33
	procNetworkCreate         procedure = 39
	procNetworkDestroy        procedure = 42
	procStoragePoolUndefine   procedure = 82
	procStoragePoolGetXMLDesc procedure = 88
	procNetworkGetDHCPLeases  procedure = 341
)

var testProcedureNames = map[procedure]string{
	procDomainShutdown:        "DOMAIN_SHUTDOWN",
	procNetworkCreate:         "NETWORK_CREATE",
	procNetworkDestroy:        "NETWORK_DESTROY",
	procStoragePoolUndefine:   "STORAGE_POOL_UNDEFINE",
	procStoragePoolGetXMLDesc: "STORAGE_POOL_GET_XML_DESC",
	procNetworkGetDHCPLeases:  "NETWORK_GET_DHCP_LEASES",
}

// Their errors name them like the package's own.
func init() { maps.Copy(procedureNames, testProcedureNames) }

// maxDHCPLeases is REMOTE_NETWORK_DHCP_LEASES_MAX.
const maxDHCPLeases = 65536

// domainShutdown asks the guest to shut down (ACPI); it returns before the guest stops.
func (c *Client) domainShutdown(ctx context.Context, dom Domain) error {
	return c.call(ctx, wire.ProgramRemote, procDomainShutdown, func(e *xdr.Encoder) { encodeDomain(e, dom) }, nil)
}

// networkCreate starts a defined network.
func (c *Client) networkCreate(ctx context.Context, n Network) error {
	return c.call(ctx, wire.ProgramRemote, procNetworkCreate, networkOnly(n), nil)
}

// networkDestroy stops a network.
func (c *Client) networkDestroy(ctx context.Context, n Network) error {
	return c.call(ctx, wire.ProgramRemote, procNetworkDestroy, networkOnly(n), nil)
}

// dhcpLease is one lease from a libvirt network's dnsmasq.
type dhcpLease struct {
	Iface      string
	ExpiryTime int64 // seconds since the epoch
	Type       IPAddrType
	MAC        string
	IAID       string
	IPAddr     string
	Prefix     uint32
	Hostname   string
	ClientID   string
}

// networkDHCPLeases returns the network's DHCP leases, all of them when mac is empty.
func (c *Client) networkDHCPLeases(ctx context.Context, n Network, mac string) ([]dhcpLease, error) {
	var out []dhcpLease
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

func decodeLease(d *xdr.Decoder) dhcpLease {
	return dhcpLease{
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

// storagePoolUndefine removes a stopped pool's persistent definition.
func (c *Client) storagePoolUndefine(ctx context.Context, p StoragePool) error {
	return c.call(ctx, wire.ProgramRemote, procStoragePoolUndefine, poolOnly(p), nil)
}

// storagePoolXMLDesc returns the pool's XML.
func (c *Client) storagePoolXMLDesc(ctx context.Context, p StoragePool) (string, error) {
	var s string
	err := c.call(ctx, wire.ProgramRemote, procStoragePoolGetXMLDesc, poolFlags(p, 0), func(d *xdr.Decoder) { s = d.String(maxString) })
	return s, err
}

// storageVolFile is VIR_STORAGE_VOL_FILE, the virStorageVolType of a file-backed volume.
const storageVolFile = 0
