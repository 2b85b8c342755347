package libvirt

import (
	"fmt"

	"banlieue.io/banlieue/pkg/libvirt/internal/xdr"
)

// UUID is libvirt's 16-byte object identifier.
type UUID [16]byte

// String formats u in the canonical 8-4-4-4-12 form libvirt's XML uses.
func (u UUID) String() string {
	return fmt.Sprintf("%x-%x-%x-%x-%x", u[0:4], u[4:6], u[6:8], u[8:10], u[10:16])
}

// Domain is a handle to a libvirt domain (remote_nonnull_domain).
type Domain struct {
	Name string
	UUID UUID
	ID   int32 // -1 while the domain is not running
}

// StoragePool is a handle to a storage pool.
type StoragePool struct {
	Name string
	UUID UUID
}

// StorageVol is a handle to a storage volume. It has no UUID; Key is the host path for
// file-backed pools.
type StorageVol struct {
	Pool string
	Name string
	Key  string
}

// Network is a handle to a libvirt virtual network.
type Network struct {
	Name string
	UUID UUID
}

// Interface is a host network interface as libvirt's interface driver reports it.
type Interface struct {
	Name string
	MAC  string
}

// DomainState is virDomainState.
type DomainState int32

const (
	DomainNoState      DomainState = 0
	DomainRunning      DomainState = 1
	DomainBlocked      DomainState = 2
	DomainPaused       DomainState = 3
	DomainShuttingDown DomainState = 4
	DomainShutOff      DomainState = 5
	DomainCrashed      DomainState = 6
	DomainPMSuspended  DomainState = 7
)

var domainStateNames = [...]string{"NoState", "Running", "Blocked", "Paused", "ShuttingDown", "ShutOff", "Crashed", "PmSuspended"}

func (s DomainState) String() string {
	if s >= 0 && int(s) < len(domainStateNames) {
		return domainStateNames[s]
	}
	return "Unknown"
}

// DomainStateReason is why a domain is in its state: the virDomain<State>Reason enum of that
// state, so a value means something only together with the state.
type DomainStateReason int32

// DomainPausedStartingUp (VIR_DOMAIN_PAUSED_STARTING_UP) is the reason of a domain libvirtd is
// still starting: paused until its devices are set up.
const DomainPausedStartingUp DomainStateReason = 11

// Reasons of a shut-off domain (virDomainShutoffReason): the guest powered itself off, or the
// domain was destroyed (a power cut).
const (
	DomainShutoffShutdown  DomainStateReason = 1
	DomainShutoffDestroyed DomainStateReason = 2
)

// DomainRunningBooted (VIR_DOMAIN_RUNNING_BOOTED) is the reason of a domain started from off.
const DomainRunningBooted DomainStateReason = 1

// DomainPowerFlags are virDomainShutdownFlagValues and virDomainRebootFlagValues, which share
// their values: how a shutdown or reboot reaches the guest.
type DomainPowerFlags uint32

const (
	// PowerACPIButton (VIR_DOMAIN_SHUTDOWN_ACPI_POWER_BTN, VIR_DOMAIN_REBOOT_ACPI_POWER_BTN)
	// presses the virtual ACPI power button; the guest decides what to do with it.
	PowerACPIButton DomainPowerFlags = 1 << 0
	// PowerGuestAgent (VIR_DOMAIN_SHUTDOWN_GUEST_AGENT, VIR_DOMAIN_REBOOT_GUEST_AGENT) asks the
	// guest agent to shut down or reboot the guest; libvirtd refuses when no agent answers.
	// Alone, without PowerACPIButton, so that libvirtd does not fall back to the button itself.
	PowerGuestAgent DomainPowerFlags = 1 << 1
)

// DomainXMLFlags is virDomainXMLFlags.
type DomainXMLFlags uint32

const (
	// DomainXMLInactive (VIR_DOMAIN_XML_INACTIVE) asks for the persistent definition rather
	// than the live one.
	DomainXMLInactive DomainXMLFlags = 1 << 1
	// DomainXMLMigratable (VIR_DOMAIN_XML_MIGRATABLE) leaves out what libvirt adds at run time
	// and the destination must add itself: the base of a migration's destination XML.
	DomainXMLMigratable DomainXMLFlags = 1 << 3
)

// DomainUndefineFlags is virDomainUndefineFlagsValues.
type DomainUndefineFlags uint32

const (
	UndefineManagedSave DomainUndefineFlags = 1 << 0
	UndefineNVRAM       DomainUndefineFlags = 1 << 2
	UndefineTPM         DomainUndefineFlags = 1 << 5
)

// DomainDeviceModifyFlags is virDomainDeviceModifyFlags.
type DomainDeviceModifyFlags uint32

const (
	DeviceModifyLive   DomainDeviceModifyFlags = 1
	DeviceModifyConfig DomainDeviceModifyFlags = 2
	DeviceModifyForce  DomainDeviceModifyFlags = 4
)

// AddressSource says where DomainInterfaceAddresses looks (virDomainInterfaceAddressesSource).
type AddressSource uint32

const (
	AddressSourceLease AddressSource = 0
	AddressSourceAgent AddressSource = 1
	AddressSourceARP   AddressSource = 2
)

// IPAddrType is virIPAddrType.
type IPAddrType int32

const (
	IPv4 IPAddrType = 0
	IPv6 IPAddrType = 1
)

// DomainInterface is one guest interface and its addresses.
type DomainInterface struct {
	Name   string
	HWAddr string // empty when libvirt does not know it
	Addrs  []IPAddress
}

// IPAddress is an address with its prefix length.
type IPAddress struct {
	Type   IPAddrType
	Addr   string
	Prefix uint32
}

func encodeDomain(e *xdr.Encoder, d Domain) {
	e.String(d.Name)
	e.FixedOpaque(d.UUID[:])
	e.Int32(d.ID)
}

func decodeDomain(d *xdr.Decoder) Domain {
	var dom Domain
	dom.Name = d.String(maxString)
	d.FixedOpaque(dom.UUID[:])
	dom.ID = d.Int32()
	return dom
}

func encodePool(e *xdr.Encoder, p StoragePool) {
	e.String(p.Name)
	e.FixedOpaque(p.UUID[:])
}

func decodePool(d *xdr.Decoder) StoragePool {
	var p StoragePool
	p.Name = d.String(maxString)
	d.FixedOpaque(p.UUID[:])
	return p
}

func encodeVol(e *xdr.Encoder, v StorageVol) {
	e.String(v.Pool)
	e.String(v.Name)
	e.String(v.Key)
}

func decodeVol(d *xdr.Decoder) StorageVol {
	return StorageVol{Pool: d.String(maxString), Name: d.String(maxString), Key: d.String(maxString)}
}

func encodeNetwork(e *xdr.Encoder, n Network) {
	e.String(n.Name)
	e.FixedOpaque(n.UUID[:])
}

func decodeNetwork(d *xdr.Decoder) Network {
	var n Network
	n.Name = d.String(maxString)
	d.FixedOpaque(n.UUID[:])
	return n
}

func decodeInterface(d *xdr.Decoder) Interface {
	return Interface{Name: d.String(maxString), MAC: d.String(maxString)}
}

// Smallest encodings of list elements, used to reject impossible array counts before
// allocating: an empty string is 4 bytes, a UUID 16.
const (
	minDomainSize    = 4 + xdr.UUIDSize + 4
	minPoolSize      = 4 + xdr.UUIDSize
	minVolSize       = 3 * 4
	minNetworkSize   = 4 + xdr.UUIDSize
	minInterfaceSize = 2 * 4
)

// decodeList decodes a variable array of at most max elements.
func decodeList[T any](d *xdr.Decoder, max, minSize int, elem func(*xdr.Decoder) T) []T {
	n := d.ArrayLen(max, minSize)
	out := make([]T, 0, n)
	for i := 0; i < n && d.Err() == nil; i++ {
		out = append(out, elem(d))
	}
	return out
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
