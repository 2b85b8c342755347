package vcenter

import (
	"context"
	"errors"
	"fmt"

	"github.com/vmware/govmomi/fault"
	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"
)

const gib = int64(1) << 30

// desiredExtraConfig is every extraConfig key Ensure owns, guestinfo and proof together.
func desiredExtraConfig(m MachineSpec) map[string]string {
	return map[string]string{
		KeyOwnerUID:         m.OwnerUID,
		KeyOwnerRef:         m.OwnerRef,
		KeyMetadata:         m.MetadataB64,
		KeyMetadataEncoding: "base64",
		KeyUserData:         m.UserDataB64,
		KeyUserDataEncoding: "base64",
	}
}

func checkSpec(m MachineSpec) error {
	if err := checkName(m.Name); err != nil {
		return err
	}
	switch {
	case m.OwnerUID == "":
		return errors.New("owner UID is empty")
	case m.CPUs < 1:
		return fmt.Errorf("CPUs %d: at least 1", m.CPUs)
	case m.MemoryMiB < 4:
		return fmt.Errorf("memory %d MiB: at least 4", m.MemoryMiB)
	case m.Template == "":
		return errors.New("template is empty")
	}
	for i, d := range m.DiskGiB {
		if d < 1 {
			return fmt.Errorf("disk %d: %d GiB, at least 1", i, d)
		}
	}
	return nil
}

// plan is the reconfiguration that makes the VM's configuration match the spec; nil when it
// already does. backings are the NIC backings of m.Networks, in order; ds is where added disks go.
// It refuses to shrink a disk.
func plan(m MachineSpec, cfg *types.VirtualMachineConfigInfo, backings []types.BaseVirtualDeviceBackingInfo, ds types.ManagedObjectReference) (*types.VirtualMachineConfigSpec, error) {
	spec := &types.VirtualMachineConfigSpec{}
	changed := false
	if cfg.Hardware.NumCPU != m.CPUs {
		spec.NumCPUs, changed = m.CPUs, true
	}
	if int64(cfg.Hardware.MemoryMB) != m.MemoryMiB {
		spec.MemoryMB, changed = m.MemoryMiB, true
	}
	current := map[string]string{}
	for _, b := range cfg.ExtraConfig {
		if ov := b.GetOptionValue(); ov != nil {
			if v, ok := ov.Value.(string); ok {
				current[ov.Key] = v
			}
		}
	}
	want := desiredExtraConfig(m)
	for _, k := range sortedKeys(want) {
		// vCenter removes a key set to "", so an empty value is already right when absent.
		if cur := current[k]; cur != want[k] {
			spec.ExtraConfig = append(spec.ExtraConfig, &types.OptionValue{Key: k, Value: want[k]})
			changed = true
		}
	}
	if cfg.ManagedBy == nil || cfg.ManagedBy.ExtensionKey != ExtensionKey {
		spec.ManagedBy = &types.ManagedByInfo{ExtensionKey: ExtensionKey, Type: managedType}
		changed = true
	}

	devices := object.VirtualDeviceList(cfg.Hardware.Device)
	var ops []types.BaseVirtualDeviceConfigSpec

	disks := devices.SelectByType((*types.VirtualDisk)(nil))
	for i, want := range m.DiskGiB {
		if i < len(disks) {
			d := disks[i].(*types.VirtualDisk)
			have := d.CapacityInBytes
			switch {
			case want*gib < have:
				return nil, fmt.Errorf("disk %d is %d bytes; %d GiB would shrink it and lose data", i, have, want)
			case want*gib > have:
				d.CapacityInBytes = want * gib
				d.CapacityInKB = want * gib / 1024
				ops = append(ops, &types.VirtualDeviceConfigSpec{Operation: types.VirtualDeviceConfigSpecOperationEdit, Device: d})
			}
			continue
		}
		ctrl, err := devices.FindDiskController("")
		if err != nil {
			return nil, fmt.Errorf("disk %d: no controller to add it to: %w", i, err)
		}
		d := devices.CreateDisk(ctrl, ds, "")
		d.CapacityInBytes = want * gib
		d.CapacityInKB = want * gib / 1024
		if b, ok := d.Backing.(*types.VirtualDiskFlatVer2BackingInfo); ok {
			b.ThinProvisioned = types.NewBool(true)
		}
		devices = append(devices, d) // the next disk takes the next unit number
		ops = append(ops, &types.VirtualDeviceConfigSpec{
			Operation:     types.VirtualDeviceConfigSpecOperationAdd,
			FileOperation: types.VirtualDeviceConfigSpecFileOperationCreate,
			Device:        d,
		})
	}

	nics := devices.SelectByType((*types.VirtualEthernetCard)(nil))
	for i, b := range backings {
		if i < len(nics) {
			card := nics[i].(types.BaseVirtualEthernetCard).GetVirtualEthernetCard()
			if !sameBacking(card.Backing, b) {
				card.Backing = b
				ops = append(ops, &types.VirtualDeviceConfigSpec{Operation: types.VirtualDeviceConfigSpecOperationEdit, Device: nics[i]})
			}
			continue
		}
		card, err := devices.CreateEthernetCard("vmxnet3", b)
		if err != nil {
			return nil, fmt.Errorf("NIC %d: %w", i, err)
		}
		devices = append(devices, card)
		ops = append(ops, &types.VirtualDeviceConfigSpec{Operation: types.VirtualDeviceConfigSpecOperationAdd, Device: card})
	}
	for i := len(backings); i < len(nics); i++ {
		ops = append(ops, &types.VirtualDeviceConfigSpec{Operation: types.VirtualDeviceConfigSpecOperationRemove, Device: nics[i]})
	}

	if m.VTPM && len(devices.SelectByType((*types.VirtualTPM)(nil))) == 0 {
		ops = append(ops, &types.VirtualDeviceConfigSpec{
			Operation: types.VirtualDeviceConfigSpecOperationAdd,
			Device:    &types.VirtualTPM{VirtualDevice: types.VirtualDevice{Key: -200}},
		})
	}
	if len(ops) > 0 {
		spec.DeviceChange, changed = ops, true
	}
	if !changed {
		return nil, nil
	}
	return spec, nil
}

// sameBacking compares a NIC's backing with the wanted one by the network it names.
func sameBacking(have, want types.BaseVirtualDeviceBackingInfo) bool {
	switch w := want.(type) {
	case *types.VirtualEthernetCardNetworkBackingInfo:
		h, ok := have.(*types.VirtualEthernetCardNetworkBackingInfo)
		return ok && h.DeviceName == w.DeviceName
	case *types.VirtualEthernetCardDistributedVirtualPortBackingInfo:
		h, ok := have.(*types.VirtualEthernetCardDistributedVirtualPortBackingInfo)
		return ok && h.Port.PortgroupKey == w.Port.PortgroupKey && h.Port.SwitchUuid == w.Port.SwitchUuid
	case *types.VirtualEthernetCardOpaqueNetworkBackingInfo:
		h, ok := have.(*types.VirtualEthernetCardOpaqueNetworkBackingInfo)
		return ok && h.OpaqueNetworkId == w.OpaqueNetworkId && h.OpaqueNetworkType == w.OpaqueNetworkType
	}
	return false
}

// Ensure makes the VM of m exist, powered off when it is created, configured as m says, and
// proven to be m.OwnerUID's. It is idempotent: a VM already matching is not reconfigured. A VM of
// that name in the folder without the proof for this owner is ErrNotOwned and is not touched.
func (s *Session) Ensure(ctx context.Context, m MachineSpec) (Machine, error) {
	if err := checkSpec(m); err != nil {
		return Machine{}, stepErr("check spec", err)
	}
	folderPath, err := under(m.Datacenter, "vm", "folder", m.Folder)
	if err != nil {
		return Machine{}, stepErr("resolve folder", err)
	}
	dsPath, err := under(m.Datacenter, "datastore", "datastore", m.Datastore)
	if err != nil {
		return Machine{}, stepErr("resolve datastore", err)
	}
	ds, err := s.lookup(ctx, dsPath, "Datastore")
	if err != nil {
		return Machine{}, stepErr("resolve datastore", err)
	}
	backings, err := s.backings(ctx, m)
	if err != nil {
		return Machine{}, err
	}

	ref, err := s.lookup(ctx, folderPath+"/"+m.Name, "VirtualMachine")
	switch {
	case errors.Is(err, ErrNotFound):
		ref, err = s.clone(ctx, m, folderPath, ds)
		if err != nil {
			return Machine{}, err
		}
	case err != nil:
		return Machine{}, stepErr("find VM", err)
	}

	var vm mo.VirtualMachine
	if err := s.read(ctx, ref, vmProps, &vm); err != nil {
		return Machine{}, stepErr("read VM", err)
	}
	if err := checkOwned(&vm, m.OwnerUID); err != nil {
		return Machine{}, stepErr("prove owner", err)
	}
	spec, err := plan(m, vm.Config, backings, ds)
	if err != nil {
		return Machine{}, stepErr("plan reconfiguration", err)
	}
	if spec != nil {
		cctx, cancel := s.call(ctx)
		t, err := object.NewVirtualMachine(s.vc, ref).Reconfigure(cctx, *spec)
		cancel()
		if err != nil {
			return Machine{}, stepErr("reconfigure", err)
		}
		if _, err := s.wait(ctx, t); err != nil {
			return Machine{}, stepErr("reconfigure", err)
		}
		if err := s.read(ctx, ref, vmProps, &vm); err != nil {
			return Machine{}, stepErr("read VM", err)
		}
	}
	return toMachine(&vm), nil
}

// backings resolves the port groups of m to NIC backings.
func (s *Session) backings(ctx context.Context, m MachineSpec) ([]types.BaseVirtualDeviceBackingInfo, error) {
	var out []types.BaseVirtualDeviceBackingInfo
	for _, n := range m.Networks {
		p, err := under(m.Datacenter, "network", "network", n)
		if err != nil {
			return nil, stepErr("resolve network", err)
		}
		ref, err := s.lookup(ctx, p, "Network", "DistributedVirtualPortgroup", "OpaqueNetwork")
		if err != nil {
			return nil, stepErr("resolve network", err)
		}
		nr, ok := object.NewReference(s.vc, ref).(object.NetworkReference)
		if !ok {
			return nil, stepErr("resolve network", fmt.Errorf("%s is no network", p))
		}
		cctx, cancel := s.call(ctx)
		b, err := nr.EthernetCardBackingInfo(cctx)
		cancel()
		if err != nil {
			return nil, stepErr("resolve network "+n, err)
		}
		out = append(out, b)
	}
	return out, nil
}

// clone creates the VM powered off from the template, carrying the ownership proof and guestinfo
// from its first moment. A linked clone is made when the template has a snapshot and no disk is
// to grow (a child disk cannot be extended).
func (s *Session) clone(ctx context.Context, m MachineSpec, folderPath string, ds types.ManagedObjectReference) (types.ManagedObjectReference, error) {
	none := types.ManagedObjectReference{}
	folder, err := s.lookup(ctx, folderPath, "Folder")
	if err != nil {
		return none, stepErr("resolve folder", err)
	}
	poolPath, err := under(m.Datacenter, "host", "resource pool", m.ResourcePool)
	if err != nil {
		return none, stepErr("resolve resource pool", err)
	}
	pool, err := s.lookup(ctx, poolPath, "ResourcePool")
	if err != nil {
		return none, stepErr("resolve resource pool", err)
	}
	tplPath, err := under(m.Datacenter, "vm", "template", m.Template)
	if err != nil {
		return none, stepErr("resolve template", err)
	}
	tpl, err := s.lookup(ctx, tplPath, "VirtualMachine")
	if err != nil {
		return none, stepErr("resolve template", err)
	}
	var t mo.VirtualMachine
	if err := s.read(ctx, tpl, []string{"config.hardware", "snapshot"}, &t); err != nil {
		return none, stepErr("read template", err)
	}

	extra := []types.BaseOptionValue{}
	want := desiredExtraConfig(m)
	for _, k := range sortedKeys(want) {
		extra = append(extra, &types.OptionValue{Key: k, Value: want[k]})
	}
	spec := types.VirtualMachineCloneSpec{
		Location: types.VirtualMachineRelocateSpec{Pool: &pool, Datastore: &ds},
		PowerOn:  false,
		Template: false,
		Config: &types.VirtualMachineConfigSpec{
			NumCPUs:     m.CPUs,
			MemoryMB:    m.MemoryMiB,
			ExtraConfig: extra,
			ManagedBy:   &types.ManagedByInfo{ExtensionKey: ExtensionKey, Type: managedType},
		},
	}
	if linkedClone(&t, m.DiskGiB) {
		spec.Snapshot = t.Snapshot.CurrentSnapshot
		spec.Location.DiskMoveType = string(types.VirtualMachineRelocateDiskMoveOptionsCreateNewChildDiskBacking)
	}
	release, err := acquire(ctx, s.clones, "clone")
	if err != nil {
		return none, stepErr("clone "+m.Template, err)
	}
	defer release()
	cctx, cancel := s.call(ctx)
	task, err := object.NewVirtualMachine(s.vc, tpl).Clone(cctx, object.NewFolder(s.vc, folder), m.Name, spec)
	cancel()
	if err != nil {
		return none, stepErr("clone "+m.Template, err)
	}
	info, err := s.wait(ctx, task)
	if err != nil {
		if fault.Is(err, &types.DuplicateName{}) {
			// Another pass cloned it meanwhile; ownership is checked by the caller.
			ref, err := s.lookup(ctx, folderPath+"/"+m.Name, "VirtualMachine")
			return ref, stepErr("find VM cloned meanwhile", err)
		}
		return none, stepErr("clone "+m.Template, err)
	}
	ref, ok := info.Result.(types.ManagedObjectReference)
	if !ok {
		return none, stepErr("clone "+m.Template, fmt.Errorf("task result %T is no VM", info.Result))
	}
	return ref, nil
}

// linkedClone decides the clone mode: linked when the template has a current snapshot and every
// asked disk fits the template's.
func linkedClone(t *mo.VirtualMachine, diskGiB []int64) bool {
	if t.Snapshot == nil || t.Snapshot.CurrentSnapshot == nil || t.Config == nil {
		return false
	}
	disks := object.VirtualDeviceList(t.Config.Hardware.Device).SelectByType((*types.VirtualDisk)(nil))
	if len(diskGiB) > len(disks) {
		return false
	}
	for i, want := range diskGiB {
		if want*gib > disks[i].(*types.VirtualDisk).CapacityInBytes {
			return false
		}
	}
	return true
}
