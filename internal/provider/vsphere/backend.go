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
// Provider. internal/provider/vsphere/vcenter's Session satisfies it through a thin adapter
// (session.go); every method honours ctx's deadline and says in its error which vCenter step
// failed. Every call that changes or reads one virtual machine names its owner's UID, and the
// Backend proves it again before acting.
type Backend interface {
	// FailureDomains lists the compute clusters of the inventory as failure domains, each
	// narrowed to the datastores and networks of q that are reachable there.
	FailureDomains(ctx context.Context, q FailureDomainQuery) ([]FailureDomain, error)
	// Template checks that the absolute inventory path template ("/<datacenter>/vm/…") is a
	// virtual machine template; ErrNotFound when nothing is there.
	Template(ctx context.Context, template string) error
	// Ensure clones spec's virtual machine powered off when none carries spec.OwnerUID, and
	// brings an existing one of that owner to spec; a virtual machine of spec's name without
	// that proof of owner is never adopted, changed or destroyed (an error, ErrNotOwned).
	Ensure(ctx context.Context, spec MachineSpec) (Machine, error)
	// Get finds the virtual machine name in the datacenter's folder, ErrNotFound when there is
	// none and ErrNotOwned when it is not ownerUID's.
	Get(ctx context.Context, datacenter, folder, name, ownerUID string) (Machine, error)
	// PowerOn powers the virtual machine ref of ownerUID on.
	PowerOn(ctx context.Context, ref, ownerUID string) error
	// PowerOff asks the guest to shut down through VMware Tools when graceful, and powers off
	// once timeout has passed (at once when not graceful, or when vCenter refuses the guest
	// shutdown).
	PowerOff(ctx context.Context, ref, ownerUID string, graceful bool, timeout time.Duration) error
	// Delete powers off and destroys the virtual machine ref, only when it carries ownerUID, and
	// returns once vCenter no longer knows it; one already gone is no error.
	Delete(ctx context.Context, ref, ownerUID string) error
	// Watch calls changed with each virtual machine of the datacenter's folder whose power
	// state, guest addresses or tools status changed, or that was destroyed (gone), until ctx
	// ends.
	Watch(ctx context.Context, datacenter, folder string, changed func(m Machine, gone bool)) error
	// Close ends the session.
	Close(ctx context.Context) error
}

// FailureDomainQuery is what the Provider's capabilities map to vSphere names.
type FailureDomainQuery struct {
	Datastores, Networks []string
	// Folder is the folder below "<datacenter>/vm" the provider clones into, in every
	// datacenter; empty is the datacenter's root VM folder.
	Folder string
	// VTPM is declared by the Provider, never discovered.
	VTPM bool
}

// FailureDomain is one compute cluster of the inventory.
type FailureDomain struct {
	Name, Datacenter, Cluster, ResourcePool, Folder, Region, Zone string
	Datastores, Networks                                          []string
	VTPM                                                          bool
	// CPUs and MemoryMiB are the cluster's size; zero when vCenter reports none.
	CPUs      int32
	MemoryMiB int64
	// DatastoreSpace is the size and free space of each of Datastores vCenter reports one for.
	DatastoreSpace []DatastoreSpace
}

// DatastoreSpace is one datastore's size and free space, in whole GiB (rounded down).
type DatastoreSpace struct {
	Name                 string
	CapacityGiB, FreeGiB int64
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
