package libvirt

import (
	"context"

	"banlieue.io/banlieue/pkg/libvirt/internal/wire"
	"banlieue.io/banlieue/pkg/libvirt/internal/xdr"
)

func (c *Client) domainCall(ctx context.Context, proc procedure, args func(*xdr.Encoder)) (Domain, error) {
	var dom Domain
	err := c.call(ctx, wire.ProgramRemote, proc, args, func(d *xdr.Decoder) { dom = decodeDomain(d) })
	return dom, err
}

// DomainLookupByName finds a domain; IsNotFound reports a missing one.
func (c *Client) DomainLookupByName(ctx context.Context, name string) (Domain, error) {
	return c.domainCall(ctx, procDomainLookupByName, func(e *xdr.Encoder) { e.String(name) })
}

// DomainDefineXML defines (or redefines) a persistent domain.
func (c *Client) DomainDefineXML(ctx context.Context, xml string, flags uint32) (Domain, error) {
	return c.domainCall(ctx, procDomainDefineXMLFlags, func(e *xdr.Encoder) {
		e.String(xml)
		e.Uint32(flags)
	})
}

// DomainCreate starts a defined domain and returns it with its new ID.
func (c *Client) DomainCreate(ctx context.Context, dom Domain, flags uint32) (Domain, error) {
	return c.domainCall(ctx, procDomainCreateWithFlags, func(e *xdr.Encoder) {
		encodeDomain(e, dom)
		e.Uint32(flags)
	})
}

// DomainState returns the domain's state and libvirt's reason code for it.
func (c *Client) DomainState(ctx context.Context, dom Domain) (DomainState, DomainStateReason, error) {
	var state, reason int32
	err := c.call(ctx, wire.ProgramRemote, procDomainGetState, func(e *xdr.Encoder) {
		encodeDomain(e, dom)
		e.Uint32(0)
	}, func(d *xdr.Decoder) {
		state, reason = d.Int32(), d.Int32()
	})
	return DomainState(state), DomainStateReason(reason), err
}

// DomainDestroy stops the domain immediately (power off).
func (c *Client) DomainDestroy(ctx context.Context, dom Domain) error {
	return c.call(ctx, wire.ProgramRemote, procDomainDestroy, func(e *xdr.Encoder) { encodeDomain(e, dom) }, nil)
}

// DomainShutdown asks the guest to shut down the way flags say and returns at once: the domain
// is off only once the guest has done it.
func (c *Client) DomainShutdown(ctx context.Context, dom Domain, flags DomainPowerFlags) error {
	return c.call(ctx, wire.ProgramRemote, procDomainShutdownFlags, func(e *xdr.Encoder) {
		encodeDomain(e, dom)
		e.Uint32(uint32(flags))
	}, nil)
}

// DomainReboot asks the guest to reboot the way flags say and returns at once. With
// PowerACPIButton, QEMU resets the domain when the guest powers off instead of ending it.
func (c *Client) DomainReboot(ctx context.Context, dom Domain, flags DomainPowerFlags) error {
	return c.call(ctx, wire.ProgramRemote, procDomainReboot, func(e *xdr.Encoder) {
		encodeDomain(e, dom)
		e.Uint32(uint32(flags))
	}, nil)
}

// DomainSuspend pauses the domain's virtual CPUs; its memory stays allocated.
func (c *Client) DomainSuspend(ctx context.Context, dom Domain) error {
	return c.call(ctx, wire.ProgramRemote, procDomainSuspend, func(e *xdr.Encoder) { encodeDomain(e, dom) }, nil)
}

// DomainResume runs a suspended domain's virtual CPUs again.
func (c *Client) DomainResume(ctx context.Context, dom Domain) error {
	return c.call(ctx, wire.ProgramRemote, procDomainResume, func(e *xdr.Encoder) { encodeDomain(e, dom) }, nil)
}

// DomainUndefine removes the domain's persistent definition, and with the flags its managed
// save image, NVRAM and TPM state.
func (c *Client) DomainUndefine(ctx context.Context, dom Domain, flags DomainUndefineFlags) error {
	return c.call(ctx, wire.ProgramRemote, procDomainUndefineFlags, func(e *xdr.Encoder) {
		encodeDomain(e, dom)
		e.Uint32(uint32(flags))
	}, nil)
}

// DomainUpdateDevice changes a device in place, e.g. to eject or insert cdrom media.
func (c *Client) DomainUpdateDevice(ctx context.Context, dom Domain, xml string, flags DomainDeviceModifyFlags) error {
	return c.call(ctx, wire.ProgramRemote, procDomainUpdateDeviceFlags, func(e *xdr.Encoder) {
		encodeDomain(e, dom)
		e.String(xml)
		e.Uint32(uint32(flags))
	}, nil)
}

// DomainXMLDesc returns the domain's XML.
func (c *Client) DomainXMLDesc(ctx context.Context, dom Domain, flags DomainXMLFlags) (string, error) {
	var s string
	err := c.call(ctx, wire.ProgramRemote, procDomainGetXMLDesc, func(e *xdr.Encoder) {
		encodeDomain(e, dom)
		e.Uint32(uint32(flags))
	}, func(d *xdr.Decoder) { s = d.String(maxString) })
	return s, err
}

// DomainInterfaceAddresses returns the guest's interfaces and addresses from source.
func (c *Client) DomainInterfaceAddresses(ctx context.Context, dom Domain, source AddressSource) ([]DomainInterface, error) {
	var out []DomainInterface
	err := c.call(ctx, wire.ProgramRemote, procDomainInterfaceAddresses, func(e *xdr.Encoder) {
		encodeDomain(e, dom)
		e.Uint32(uint32(source))
		e.Uint32(0)
	}, func(d *xdr.Decoder) {
		out = decodeList(d, maxDomainIfaces, 3*4, decodeDomainInterface)
	})
	return out, err
}

func decodeDomainInterface(d *xdr.Decoder) DomainInterface {
	iface := DomainInterface{Name: d.String(maxString), HWAddr: deref(d.OptString(maxString))}
	iface.Addrs = decodeList(d, maxIfaceAddrs, 3*4, func(d *xdr.Decoder) IPAddress {
		return IPAddress{Type: IPAddrType(d.Int32()), Addr: d.String(maxString), Prefix: d.Uint32()}
	})
	return iface
}

// DomainAgentCommand sends a guest-agent JSON command through the QEMU program on the same
// connection and returns the agent's JSON reply. timeout is in seconds (libvirt's
// VIR_DOMAIN_QEMU_AGENT_COMMAND_* values -2..-1 select its defaults).
func (c *Client) DomainAgentCommand(ctx context.Context, dom Domain, cmd string, timeout int32) (string, error) {
	var res *string
	err := c.call(ctx, wire.ProgramQEMU, qemuProcAgentCommand, func(e *xdr.Encoder) {
		encodeDomain(e, dom)
		e.String(cmd)
		e.Int32(timeout)
		e.Uint32(0)
	}, func(d *xdr.Decoder) { res = d.OptString(maxString) })
	return deref(res), err
}

// DomainBlockResizeFlags is virDomainBlockResizeFlags.
type DomainBlockResizeFlags uint32

// BlockResizeBytes says the size is in bytes; without it libvirtd reads KiB.
const BlockResizeBytes DomainBlockResizeFlags = 1 << 0

// DomainBlockResize grows a running domain's disk, named by its target (vda) or source path,
// to size: QEMU grows the image and the guest sees the new size at once.
func (c *Client) DomainBlockResize(ctx context.Context, dom Domain, disk string, size uint64, flags DomainBlockResizeFlags) error {
	return c.call(ctx, wire.ProgramRemote, procDomainBlockResize, func(e *xdr.Encoder) {
		encodeDomain(e, dom)
		e.String(disk)
		e.Uint64(size)
		e.Uint32(uint32(flags))
	}, nil)
}

// BlockInfo is a domain disk's size: capacity is what the guest sees, allocation and physical
// what the image takes on the host.
type BlockInfo struct {
	Capacity   uint64
	Allocation uint64
	Physical   uint64
}

// DomainGetBlockInfo reads the size of the domain's disk named by its target or source path;
// of a running domain, as QEMU has it.
func (c *Client) DomainGetBlockInfo(ctx context.Context, dom Domain, disk string) (BlockInfo, error) {
	var info BlockInfo
	err := c.call(ctx, wire.ProgramRemote, procDomainGetBlockInfo, func(e *xdr.Encoder) {
		encodeDomain(e, dom)
		e.String(disk)
		e.Uint32(0)
	}, func(d *xdr.Decoder) {
		info.Allocation, info.Capacity, info.Physical = d.Uint64(), d.Uint64(), d.Uint64()
	})
	return info, err
}
