package vsphere

import (
	"context"
	"errors"
	"time"
)

// Errors a Backend returns that the reconciler decides on; the adapter wraps the vSphere
// faults into them.
var (
	// ErrNotFound: the virtual machine is gone from vCenter.
	ErrNotFound = errors.New("virtual machine not found")
	// ErrNotOwned: a virtual machine of the name exists without this machine's proof of owner.
	ErrNotOwned = errors.New("virtual machine not owned by this machine")
)

// Backend is what the VSphereMachine reconciler asks of vCenter: one long-lived session per
// Provider. internal/provider/vsphere/vcenter's Session satisfies it through a thin adapter;
// every method honours ctx's deadline and says in its error which vCenter step failed.
type Backend interface {
	// FailureDomains lists the compute clusters of the inventory as failure domains, each
	// narrowed to the datastores and networks of q that are reachable there.
	FailureDomains(ctx context.Context, q FailureDomainQuery) ([]FailureDomain, error)
	// Ensure clones spec's virtual machine powered off when none carries spec.OwnerUID, and
	// brings an existing one of that owner to spec; a virtual machine of spec's name without
	// that proof of owner is never adopted, changed or destroyed (an error, ErrNotOwned).
	Ensure(ctx context.Context, spec MachineSpec) (Machine, error)
	// Get reads the virtual machine ref, ErrNotFound when it is gone.
	Get(ctx context.Context, ref string) (Machine, error)
	// PowerOn powers the virtual machine on.
	PowerOn(ctx context.Context, ref string) error
	// PowerOff asks the guest to shut down through VMware Tools when graceful, and powers off
	// once timeout has passed (at once when not graceful).
	PowerOff(ctx context.Context, ref string, graceful bool, timeout time.Duration) error
	// Delete powers off and destroys the virtual machine ref, only when it carries ownerUID.
	Delete(ctx context.Context, ref, ownerUID string) error
	// Watch calls changed with each virtual machine whose power state, guest addresses or tools
	// status changed, or that was destroyed, until ctx ends.
	Watch(ctx context.Context, changed func(Machine)) error
}

// FailureDomainQuery is what the Provider's capabilities map to vSphere names.
type FailureDomainQuery struct {
	Datastores, Networks []string
}

// FailureDomain is one compute cluster of the inventory.
type FailureDomain struct {
	Name, Datacenter, Cluster, ResourcePool, Folder, Region, Zone string
	Datastores, Networks                                          []string
	VTPM                                                          bool
}

// MachineSpec is the virtual machine a VSphereMachine asks for, in vCenter's terms.
type MachineSpec struct {
	Name, OwnerUID, OwnerRef                              string
	Datacenter, Folder, ResourcePool, Datastore, Template string
	CPUs                                                  int32
	MemoryMiB                                             int64
	DiskGiB                                               []int64
	Networks                                              []string
	MetadataB64, UserDataB64                              string
	VTPM                                                  bool
}

// Machine is a virtual machine as vCenter reports it.
type Machine struct {
	Ref, BIOSUUID, PowerState string
	IPs                       []string
	ToolsRunning              bool
	OwnerUID                  string
}

// Power states of a Machine, as vCenter names them.
const (
	PowerStateOn        = "poweredOn"
	PowerStateOff       = "poweredOff"
	PowerStateSuspended = "suspended"
)

// Endpoint is how a Provider's vCenter is reached: its SDK URL, the user of the credentials
// Secret and the CA its certificate must chain to (never the public roots).
type Endpoint struct {
	URL                string
	Username, Password string
	CAPEM              []byte
}

// Dialer opens the one long-lived session of a Provider.
type Dialer func(ctx context.Context, e Endpoint) (Backend, error)
