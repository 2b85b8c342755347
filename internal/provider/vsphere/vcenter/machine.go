package vcenter

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/vmware/govmomi/fault"
	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/property"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/soap"
	"github.com/vmware/govmomi/vim25/types"
)

// Ownership proof, in the VM's extraConfig outside guestinfo.* (the guest can write guestinfo
// through Tools, never other keys). config.managedBy is set as well, so the vSphere Client warns
// before a hand edit, but it is not the proof: a clone does not carry it until reconfigured.
const (
	KeyOwnerUID = "banlieue.io.owner-uid"
	KeyOwnerRef = "banlieue.io.owner-ref"
	// ExtensionKey marks config.managedBy.
	ExtensionKey = "io.banlieue"
	managedType  = "VirtualMachine"
)

// The standard cloud-init guestinfo keys (cloud-init's VMware datasource).
const (
	KeyMetadata         = "guestinfo.metadata"
	KeyMetadataEncoding = "guestinfo.metadata.encoding"
	KeyUserData         = "guestinfo.userdata"
	KeyUserDataEncoding = "guestinfo.userdata.encoding"
)

// MachineSpec is what Ensure makes true. Inventory paths are relative: Folder and Template
// below "<Datacenter>/vm", ResourcePool below "<Datacenter>/host" (e.g. "cluster1/Resources"),
// Datastore below "<Datacenter>/datastore", Networks below "<Datacenter>/network".
type MachineSpec struct {
	Name         string
	OwnerUID     string // the owning object's UID: the ownership proof
	OwnerRef     string // namespace/name, for people reading vCenter
	Datacenter   string
	Folder       string
	ResourcePool string
	Datastore    string
	Template     string
	CPUs         int32
	MemoryMiB    int64
	// DiskGiB sizes the VM's disks in device order; a disk is grown, never shrunk (Ensure
	// refuses), disks beyond the template's are added, and disks not listed are left alone.
	DiskGiB []int64
	// Networks are port groups; NIC i is put on Networks[i], NICs beyond are removed.
	Networks    []string
	MetadataB64 string
	UserDataB64 string // a secret: never logged nor put in an error
	// VTPM adds a virtual TPM; an existing one is never removed (its sealed secrets would go).
	VTPM bool
}

// Machine is what vCenter reports of a VM.
type Machine struct {
	Ref          string // "VirtualMachine:vm-42"
	Name         string
	BIOSUUID     string
	PowerState   string // poweredOn, poweredOff, suspended
	IPs          []string
	ToolsRunning bool
	OwnerUID     string
}

var vmProps = []string{
	"name", "config.extraConfig", "config.hardware", "config.template", "config.uuid",
	"config.managedBy", "runtime.powerState", "guest.ipAddress", "guest.net", "guest.toolsRunningStatus",
}

// extraConfig returns the VM's extraConfig as a map.
func extraConfig(vm *mo.VirtualMachine) map[string]string {
	out := map[string]string{}
	if vm.Config == nil {
		return out
	}
	for _, b := range vm.Config.ExtraConfig {
		if ov := b.GetOptionValue(); ov != nil {
			if v, ok := ov.Value.(string); ok {
				out[ov.Key] = v
			}
		}
	}
	return out
}

// checkOwned is the ownership decision: a VM is ours for ownerUID only if it is no template and
// its extraConfig names that owner.
func checkOwned(vm *mo.VirtualMachine, ownerUID string) error {
	if ownerUID == "" {
		return errors.New("owner UID is empty")
	}
	if vm.Config == nil {
		return fmt.Errorf("VM %q has no readable configuration to prove its owner: %w", vm.Name, ErrNotOwned)
	}
	if vm.Config.Template {
		return fmt.Errorf("%q is a template: %w", vm.Name, ErrNotOwned)
	}
	if got := extraConfig(vm)[KeyOwnerUID]; got != ownerUID {
		if got == "" {
			return fmt.Errorf("VM %q carries no %s: %w", vm.Name, KeyOwnerUID, ErrNotOwned)
		}
		return fmt.Errorf("VM %q belongs to owner %s: %w", vm.Name, got, ErrNotOwned)
	}
	return nil
}

func toMachine(vm *mo.VirtualMachine) Machine {
	m := Machine{
		Ref:          vm.Self.String(),
		Name:         vm.Name,
		PowerState:   string(vm.Runtime.PowerState),
		ToolsRunning: vm.Guest != nil && vm.Guest.ToolsRunningStatus == string(types.VirtualMachineToolsRunningStatusGuestToolsRunning),
		OwnerUID:     extraConfig(vm)[KeyOwnerUID],
	}
	if vm.Config != nil {
		m.BIOSUUID = vm.Config.Uuid
	}
	if vm.Guest != nil {
		m.IPs = guestIPs(vm.Guest.IpAddress, vm.Guest.Net)
	}
	return m
}

// guestIPs lists the guest's addresses, NIC by NIC, without duplicates.
func guestIPs(primary string, nics []types.GuestNicInfo) []string {
	var ips []string
	add := func(ip string) {
		if ip != "" && !slices.Contains(ips, ip) {
			ips = append(ips, ip)
		}
	}
	for _, n := range nics {
		for _, ip := range n.IpAddress {
			add(ip)
		}
	}
	add(primary)
	return ips
}

// read retrieves a VM's properties; a VM that is gone is ErrNotFound.
func (s *Session) read(ctx context.Context, ref types.ManagedObjectReference, props []string, dst any) error {
	cctx, cancel := s.call(ctx)
	defer cancel()
	err := property.DefaultCollector(s.vc).RetrieveOne(cctx, ref, props, dst)
	if fault.Is(err, &types.ManagedObjectNotFound{}) {
		return fmt.Errorf("%s: %w", ref, ErrNotFound)
	}
	return err
}

// owned parses a reference that came back from Machine.Ref and proves ownership again.
func (s *Session) owned(ctx context.Context, ref, ownerUID string) (*mo.VirtualMachine, error) {
	r := object.ReferenceFromString(ref)
	if r == nil || r.Type != "VirtualMachine" {
		return nil, fmt.Errorf("%q is not a VirtualMachine reference", ref)
	}
	var vm mo.VirtualMachine
	if err := s.read(ctx, *r, vmProps, &vm); err != nil {
		return nil, err
	}
	if err := checkOwned(&vm, ownerUID); err != nil {
		return nil, err
	}
	return &vm, nil
}

// wait waits for a task, bounded by the task timeout.
func (s *Session) wait(ctx context.Context, t *object.Task) (*types.TaskInfo, error) {
	tctx, cancel := context.WithTimeout(ctx, s.opts.taskTimeout)
	defer cancel()
	return t.WaitForResult(tctx)
}

// Get finds the VM name in the folder and proves it is ownerUID's.
func (s *Session) Get(ctx context.Context, datacenter, folder, name, ownerUID string) (Machine, error) {
	if err := checkName(name); err != nil {
		return Machine{}, stepErr("check name", err)
	}
	p, err := under(datacenter, "vm", "folder", folder)
	if err != nil {
		return Machine{}, stepErr("resolve folder", err)
	}
	ref, err := s.lookup(ctx, p+"/"+name, "VirtualMachine")
	if err != nil {
		return Machine{}, stepErr("find VM", err)
	}
	var vm mo.VirtualMachine
	if err := s.read(ctx, ref, vmProps, &vm); err != nil {
		return Machine{}, stepErr("read VM", err)
	}
	if err := checkOwned(&vm, ownerUID); err != nil {
		return Machine{}, stepErr("prove owner", err)
	}
	return toMachine(&vm), nil
}

// PowerOn powers an owned VM on; an already running VM is left alone.
func (s *Session) PowerOn(ctx context.Context, ref, ownerUID string) error {
	vm, err := s.owned(ctx, ref, ownerUID)
	if err != nil {
		return stepErr("prove owner", err)
	}
	if vm.Runtime.PowerState == types.VirtualMachinePowerStatePoweredOn {
		return nil
	}
	release, err := acquire(ctx, s.power, "power operation")
	if err != nil {
		return stepErr("power on", err)
	}
	defer release()
	cctx, cancel := s.call(ctx)
	defer cancel()
	t, err := object.NewVirtualMachine(s.vc, vm.Self).PowerOn(cctx)
	if err != nil {
		return stepErr("power on", err)
	}
	_, err = s.wait(ctx, t)
	return stepErr("power on", err)
}

// PowerOffPath says how a VM went off.
type PowerOffPath string

const (
	PowerOffAlreadyOff PowerOffPath = "AlreadyOff"
	// PowerOffGuest: the guest shut down when asked through Tools.
	PowerOffGuest PowerOffPath = "GuestShutdown"
	// PowerOffHard: power was cut (asked for, or Tools refused the guest shutdown).
	PowerOffHard PowerOffPath = "Hard"
	// PowerOffHardAfterTimeout: the guest was asked and had not stopped within the timeout.
	PowerOffHardAfterTimeout PowerOffPath = "HardAfterTimeout"
)

// PowerOff powers an owned VM off. graceful asks the guest through Tools (ShutdownGuest) and
// waits up to timeout; when vCenter refuses the request (ToolsUnavailable, Tools not running, a
// suspended VM) or the timeout passes, the power is cut. When vCenter does not answer at all,
// nothing is cut and the error says so. The returned path says which happened.
func (s *Session) PowerOff(ctx context.Context, ref, ownerUID string, graceful bool, timeout time.Duration) (PowerOffPath, error) {
	vm, err := s.owned(ctx, ref, ownerUID)
	if err != nil {
		return "", stepErr("prove owner", err)
	}
	if vm.Runtime.PowerState == types.VirtualMachinePowerStatePoweredOff {
		return PowerOffAlreadyOff, nil
	}
	o := object.NewVirtualMachine(s.vc, vm.Self)
	path := PowerOffHard
	if graceful && vm.Runtime.PowerState == types.VirtualMachinePowerStatePoweredOn {
		cctx, cancel := s.call(ctx)
		err := o.ShutdownGuest(cctx)
		cancel()
		if err != nil && !soap.IsSoapFault(err) && !soap.IsVimFault(err) {
			// vCenter did not answer: cutting the power now could be wrong; the caller retries.
			return "", stepErr("ask the guest to shut down", err)
		}
		if err == nil {
			off, werr := s.waitOff(ctx, o, timeout)
			if werr != nil {
				return "", stepErr("wait for guest shutdown", werr)
			}
			if off {
				return PowerOffGuest, nil
			}
			path = PowerOffHardAfterTimeout
		}
	}
	// The guest may finish its own shutdown in between: hardOff takes that as done.
	if err := s.hardOff(ctx, o); err != nil {
		return "", stepErr("power off", err)
	}
	return path, nil
}

// waitOff reports whether the VM reached poweredOff within timeout.
func (s *Session) waitOff(ctx context.Context, o *object.VirtualMachine, timeout time.Duration) (bool, error) {
	wctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	err := o.WaitForPowerState(wctx, types.VirtualMachinePowerStatePoweredOff)
	if err == nil {
		return true, nil
	}
	if ctx.Err() != nil {
		return false, ctx.Err()
	}
	if errors.Is(err, context.DeadlineExceeded) || wctx.Err() != nil {
		return false, nil
	}
	return false, err
}

// Delete powers an owned VM off and destroys it, returning once vCenter no longer knows it. A VM
// already gone is not an error.
func (s *Session) Delete(ctx context.Context, ref, ownerUID string) error {
	vm, err := s.owned(ctx, ref, ownerUID)
	if errors.Is(err, ErrNotFound) {
		return nil
	}
	if err != nil {
		return stepErr("prove owner", err)
	}
	o := object.NewVirtualMachine(s.vc, vm.Self)
	if vm.Runtime.PowerState != types.VirtualMachinePowerStatePoweredOff {
		if err := s.hardOff(ctx, o); err != nil {
			return stepErr("power off before destroy", err)
		}
	}
	cctx, cancel := s.call(ctx)
	t, err := o.Destroy(cctx)
	cancel()
	if err != nil {
		return stepErr("destroy", err)
	}
	if _, err := s.wait(ctx, t); err != nil {
		return stepErr("destroy", err)
	}
	var gone mo.VirtualMachine
	if err := s.read(ctx, vm.Self, []string{"name"}, &gone); !errors.Is(err, ErrNotFound) {
		if err == nil {
			err = errors.New("VM still present after destroy")
		}
		return stepErr("confirm destroyed", err)
	}
	return nil
}

// hardOff cuts the power within the power-operation limit; a VM found already off is fine.
func (s *Session) hardOff(ctx context.Context, o *object.VirtualMachine) error {
	release, err := acquire(ctx, s.power, "power operation")
	if err != nil {
		return err
	}
	defer release()
	cctx, cancel := s.call(ctx)
	t, err := o.PowerOff(cctx)
	cancel()
	if err != nil {
		return err
	}
	if _, err := s.wait(ctx, t); err != nil && !fault.Is(err, &types.InvalidPowerState{}) {
		return err
	}
	return nil
}
