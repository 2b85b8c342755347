package vcenter

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"
)

// converged is a configuration that matches spec() exactly.
func converged() *types.VirtualMachineConfigInfo {
	s := spec()
	var extra []types.BaseOptionValue
	for k, v := range desiredExtraConfig(s) {
		if v != "" { // vCenter keeps no empty value
			extra = append(extra, &types.OptionValue{Key: k, Value: v})
		}
	}
	return &types.VirtualMachineConfigInfo{
		ExtraConfig: extra,
		ManagedBy:   &types.ManagedByInfo{ExtensionKey: ExtensionKey, Type: managedType},
		Hardware: types.VirtualHardware{NumCPU: 2, MemoryMB: 1024, Device: []types.BaseVirtualDevice{
			&types.VirtualLsiLogicController{VirtualSCSIController: types.VirtualSCSIController{VirtualController: types.VirtualController{VirtualDevice: types.VirtualDevice{Key: 1000}, BusNumber: 0}}},
			&types.VirtualDisk{VirtualDevice: types.VirtualDevice{Key: 2000, ControllerKey: 1000, UnitNumber: types.NewInt32(0),
				Backing: &types.VirtualDiskFlatVer2BackingInfo{}}, CapacityInBytes: 10 * gib},
			&types.VirtualVmxnet3{VirtualVmxnet: types.VirtualVmxnet{VirtualEthernetCard: types.VirtualEthernetCard{VirtualDevice: types.VirtualDevice{
				Key: 4000, Backing: &types.VirtualEthernetCardNetworkBackingInfo{VirtualDeviceDeviceBackingInfo: types.VirtualDeviceDeviceBackingInfo{DeviceName: "pg-a"}}}}}},
		}},
	}
}

func spec() MachineSpec {
	return MachineSpec{Name: "m", OwnerUID: "uid", OwnerRef: "ns/m", CPUs: 2, MemoryMiB: 1024, DiskGiB: []int64{10},
		Template: "t", MetadataB64: "bWV0YQ==", UserDataB64: ""}
}

func pg(name string) types.BaseVirtualDeviceBackingInfo {
	return &types.VirtualEthernetCardNetworkBackingInfo{VirtualDeviceDeviceBackingInfo: types.VirtualDeviceDeviceBackingInfo{DeviceName: name}}
}

func TestPlan(t *testing.T) {
	ds := types.ManagedObjectReference{Type: "Datastore", Value: "ds-1"}
	ops := func(c *types.VirtualMachineConfigSpec) string {
		var s []string
		for _, d := range c.DeviceChange {
			ds := d.GetVirtualDeviceConfigSpec()
			s = append(s, string(ds.Operation)+":"+strings.TrimPrefix(fmt.Sprintf("%T", ds.Device), "*types.Virtual"))
		}
		return strings.Join(s, ",")
	}
	for _, tt := range []struct {
		name     string
		mutate   func(*MachineSpec)
		backings []types.BaseVirtualDeviceBackingInfo
		want     string // "" = no change; else the device operations, or "error"
		check    func(*types.VirtualMachineConfigSpec) bool
	}{
		{name: "converged", backings: []types.BaseVirtualDeviceBackingInfo{pg("pg-a")}},
		{name: "cpu", mutate: func(m *MachineSpec) { m.CPUs = 4 }, backings: []types.BaseVirtualDeviceBackingInfo{pg("pg-a")},
			want: "", check: func(c *types.VirtualMachineConfigSpec) bool { return c.NumCPUs == 4 && c.MemoryMB == 0 }},
		{name: "userdata set", mutate: func(m *MachineSpec) { m.UserDataB64 = "dQ==" }, backings: []types.BaseVirtualDeviceBackingInfo{pg("pg-a")},
			check: func(c *types.VirtualMachineConfigSpec) bool {
				return len(c.ExtraConfig) == 1 && c.ExtraConfig[0].GetOptionValue().Key == KeyUserData
			}},
		{name: "grow disk", mutate: func(m *MachineSpec) { m.DiskGiB = []int64{20} }, backings: []types.BaseVirtualDeviceBackingInfo{pg("pg-a")}, want: "edit:Disk"},
		{name: "shrink disk", mutate: func(m *MachineSpec) { m.DiskGiB = []int64{5} }, backings: []types.BaseVirtualDeviceBackingInfo{pg("pg-a")}, want: "error"},
		{name: "add two disks", mutate: func(m *MachineSpec) { m.DiskGiB = []int64{10, 1, 2} }, backings: []types.BaseVirtualDeviceBackingInfo{pg("pg-a")}, want: "add:Disk,add:Disk"},
		{name: "move NIC", backings: []types.BaseVirtualDeviceBackingInfo{pg("pg-b")}, want: "edit:Vmxnet3"},
		{name: "add NIC", backings: []types.BaseVirtualDeviceBackingInfo{pg("pg-a"), pg("pg-b")}, want: "add:Vmxnet3"},
		{name: "remove NIC", want: "remove:Vmxnet3"},
		{name: "vtpm", mutate: func(m *MachineSpec) { m.VTPM = true }, backings: []types.BaseVirtualDeviceBackingInfo{pg("pg-a")}, want: "add:TPM"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			m := spec()
			if tt.mutate != nil {
				tt.mutate(&m)
			}
			got, err := plan(m, converged(), tt.backings, ds)
			switch {
			case tt.want == "error":
				if err == nil {
					t.Fatalf("plan = %+v, want an error", got)
				}
				return
			case err != nil:
				t.Fatal(err)
			case tt.want == "" && tt.check == nil:
				if got != nil {
					t.Fatalf("plan = %+v, want no change", got)
				}
				return
			case got == nil:
				t.Fatal("plan = nil, want a change")
			}
			if o := ops(got); o != tt.want {
				t.Errorf("device operations %q, want %q", o, tt.want)
			}
			if tt.check != nil && !tt.check(got) {
				t.Errorf("plan %+v fails the check", got)
			}
		})
	}
	// Two added disks take different unit numbers.
	m := spec()
	m.DiskGiB = []int64{10, 1, 2}
	got, _ := plan(m, converged(), []types.BaseVirtualDeviceBackingInfo{pg("pg-a")}, ds)
	u1 := got.DeviceChange[0].GetVirtualDeviceConfigSpec().Device.GetVirtualDevice().UnitNumber
	u2 := got.DeviceChange[1].GetVirtualDeviceConfigSpec().Device.GetVirtualDevice().UnitNumber
	if u1 == nil || u2 == nil || *u1 == *u2 || *u1 == 0 {
		t.Errorf("added disks on units %v and %v", u1, u2)
	}
}

func TestCheckOwned(t *testing.T) {
	vm := func(template bool, extra map[string]string) *mo.VirtualMachine {
		v := &mo.VirtualMachine{Config: &types.VirtualMachineConfigInfo{Template: template}}
		v.Name = "m"
		for k, val := range extra {
			v.Config.ExtraConfig = append(v.Config.ExtraConfig, &types.OptionValue{Key: k, Value: val})
		}
		return v
	}
	for _, tt := range []struct {
		name  string
		vm    *mo.VirtualMachine
		owner string
		ok    bool
	}{
		{"ours", vm(false, map[string]string{KeyOwnerUID: "u1"}), "u1", true},
		{"another owner", vm(false, map[string]string{KeyOwnerUID: "u2"}), "u1", false},
		{"no proof", vm(false, nil), "u1", false},
		{"proof only in guestinfo", vm(false, map[string]string{"guestinfo." + KeyOwnerUID: "u1"}), "u1", false},
		{"a template", vm(true, map[string]string{KeyOwnerUID: "u1"}), "u1", false},
		{"no configuration", &mo.VirtualMachine{}, "u1", false},
		{"empty owner asked", vm(false, map[string]string{KeyOwnerUID: ""}), "", false},
	} {
		err := checkOwned(tt.vm, tt.owner)
		if (err == nil) != tt.ok {
			t.Errorf("%s: %v, want ok=%v", tt.name, err, tt.ok)
		}
		if err != nil && tt.owner != "" && !errors.Is(err, ErrNotOwned) {
			t.Errorf("%s: %v is no ErrNotOwned", tt.name, err)
		}
	}
}

func TestLinkedClone(t *testing.T) {
	tpl := func(snap bool) *mo.VirtualMachine {
		v := &mo.VirtualMachine{Config: converged()}
		if snap {
			v.Snapshot = &types.VirtualMachineSnapshotInfo{CurrentSnapshot: &types.ManagedObjectReference{Type: "VirtualMachineSnapshot", Value: "s-1"}}
		}
		return v
	}
	for _, tt := range []struct {
		name  string
		snap  bool
		disks []int64
		want  bool
	}{
		{"no snapshot", false, []int64{10}, false},
		{"snapshot, same size", true, []int64{10}, true},
		{"snapshot, no disks asked", true, nil, true},
		{"snapshot, disk grows", true, []int64{11}, false},
		{"snapshot, disk added", true, []int64{10, 1}, false},
	} {
		if got := linkedClone(tpl(tt.snap), tt.disks); got != tt.want {
			t.Errorf("%s: linkedClone = %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestGuestIPs(t *testing.T) {
	got := guestIPs("10.0.0.1", []types.GuestNicInfo{{IpAddress: []string{"10.0.0.1", "fe80::1"}}, {IpAddress: []string{"10.0.1.1"}}})
	if strings.Join(got, ",") != "10.0.0.1,fe80::1,10.0.1.1" {
		t.Errorf("guestIPs = %v", got)
	}
	if got := guestIPs("192.0.2.1", nil); len(got) != 1 || got[0] != "192.0.2.1" {
		t.Errorf("guestIPs without NICs = %v", got)
	}
}
