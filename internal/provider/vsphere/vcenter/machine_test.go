package vcenter

import (
	"context"
	"encoding/base64"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"
)

const tplName = "DC0_C0_RP0_VM0"

// machineSim is one datacenter with a template (the model's first VM, powered off and marked)
// and an empty folder "banlieue".
func machineSim(t *testing.T) (*sim, MachineSpec) {
	t.Helper()
	m := simulator.VPX()
	m.ClusterHost, m.Host, m.Machine = 2, 0, 1
	s := startSim(t, m)
	ctx := ctxT(t)
	tpl := object.NewVirtualMachine(s.admin.vc, s.ref(t, "/DC0/vm/"+tplName))
	if task, err := tpl.PowerOff(ctx); err != nil || task.Wait(ctx) != nil {
		t.Fatalf("power off template: %v", err)
	}
	if err := tpl.MarkAsTemplate(ctx); err != nil {
		t.Fatal(err)
	}
	root := object.NewFolder(s.admin.vc, s.ref(t, "/DC0/vm"))
	if _, err := root.CreateFolder(ctx, "banlieue"); err != nil {
		t.Fatal(err)
	}
	var tm mo.VirtualMachine
	if err := s.admin.read(ctx, tpl.Reference(), []string{"config.hardware"}, &tm); err != nil {
		t.Fatal(err)
	}
	disks := object.VirtualDeviceList(tm.Config.Hardware.Device).SelectByType((*types.VirtualDisk)(nil))
	if len(disks) != 1 {
		t.Fatalf("template has %d disks, the tests assume 1", len(disks))
	}
	first := disks[0].(*types.VirtualDisk).CapacityInBytes/gib + 1
	return s, MachineSpec{
		Name: "web-0", OwnerUID: "6c1f0e52-uid-1", OwnerRef: "team-a/web-0",
		Datacenter: "DC0", Folder: "banlieue", ResourcePool: "DC0_C0/Resources", Datastore: "LocalDS_0",
		Template: tplName, CPUs: 2, MemoryMiB: 2048, DiskGiB: []int64{first, 2},
		Networks:    []string{"VM Network", "DC0_DVPG0"},
		MetadataB64: base64.StdEncoding.EncodeToString([]byte("instance-id: web-0\nlocal-hostname: web-0\n")),
		UserDataB64: base64.StdEncoding.EncodeToString([]byte("#cloud-config\npackages: [nginx]\n")),
	}
}

// vmInFolder lists the VM names directly in the banlieue folder.
func vmsInFolder(t *testing.T, s *sim) []string {
	t.Helper()
	var f mo.Folder
	if err := s.admin.read(ctxT(t), s.ref(t, "/DC0/vm/banlieue"), []string{"childEntity"}, &f); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, c := range f.ChildEntity {
		var e mo.ManagedEntity
		if err := s.admin.read(ctxT(t), c, []string{"name"}, &e); err != nil {
			t.Fatal(err)
		}
		names = append(names, e.Name)
	}
	return names
}

func readVM(t *testing.T, s *sim, ref string) *mo.VirtualMachine {
	t.Helper()
	var vm mo.VirtualMachine
	if err := s.admin.read(ctxT(t), *object.ReferenceFromString(ref), vmProps, &vm); err != nil {
		t.Fatal(err)
	}
	return &vm
}

// failMethods makes every call of the methods fail until the returned func is called.
func failMethods(s *sim, fault simulator.FaultType, methods ...string) func() {
	for _, m := range methods {
		s.model.Service.AddFaultRule(&simulator.FaultInjectionRule{
			MethodName: m, ObjectType: "*", ObjectName: "*", Probability: 1, FaultType: fault,
			Message: "injected", Enabled: true,
		})
	}
	return s.model.Service.ClearFaultRules
}

// ensured starts a timed test on machineSim with its machine made: the simulator, the
// machine's spec, a session, the test's context and the machine.
func ensured(t *testing.T) (*sim, MachineSpec, *Session, context.Context, Machine) {
	t.Helper()
	timed(t)
	s, spec := machineSim(t)
	sess := s.dial(t)
	ctx := ctxT(t)
	m, err := sess.Ensure(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	return s, spec, sess, ctx, m
}

func TestEnsureCreatesConfiguresAndIsIdempotent(t *testing.T) {
	s, spec, sess, ctx, m := ensured(t)
	if m.PowerState != "poweredOff" || m.OwnerUID != spec.OwnerUID || m.BIOSUUID == "" || !strings.HasPrefix(m.Ref, "VirtualMachine:") {
		t.Fatalf("after Ensure: %+v; want powered off, owned, with a BIOS UUID and a VM ref", m)
	}
	vm := readVM(t, s, m.Ref)
	hw := vm.Config.Hardware
	if hw.NumCPU != 2 || hw.MemoryMB != 2048 {
		t.Errorf("hardware %d CPUs %d MiB, want 2 and 2048", hw.NumCPU, hw.MemoryMB)
	}
	devs := object.VirtualDeviceList(hw.Device)
	disks := devs.SelectByType((*types.VirtualDisk)(nil))
	if len(disks) != 2 {
		t.Fatalf("%d disks, want 2", len(disks))
	}
	for i, d := range disks {
		if got := d.(*types.VirtualDisk).CapacityInBytes; got != spec.DiskGiB[i]*gib {
			t.Errorf("disk %d: %d bytes, want %d GiB", i, got, spec.DiskGiB[i])
		}
	}
	nics := devs.SelectByType((*types.VirtualEthernetCard)(nil))
	if len(nics) != 2 {
		t.Fatalf("%d NICs, want 2", len(nics))
	}
	if b, ok := nics[0].GetVirtualDevice().Backing.(*types.VirtualEthernetCardNetworkBackingInfo); !ok || b.DeviceName != "VM Network" {
		t.Errorf("NIC 0 backing %#v, want VM Network", nics[0].GetVirtualDevice().Backing)
	}
	if _, ok := nics[1].GetVirtualDevice().Backing.(*types.VirtualEthernetCardDistributedVirtualPortBackingInfo); !ok {
		t.Errorf("NIC 1 backing %#v, want the DC0_DVPG0 port group", nics[1].GetVirtualDevice().Backing)
	}
	ec := extraConfig(vm)
	for k, v := range map[string]string{
		KeyMetadata: spec.MetadataB64, KeyMetadataEncoding: "base64",
		KeyUserData: spec.UserDataB64, KeyUserDataEncoding: "base64",
		KeyOwnerUID: spec.OwnerUID, KeyOwnerRef: spec.OwnerRef,
	} {
		if ec[k] != v {
			t.Errorf("extraConfig %s = %q, want %q", k, ec[k], v)
		}
	}
	if vm.Config.ManagedBy == nil || vm.Config.ManagedBy.ExtensionKey != ExtensionKey {
		t.Errorf("managedBy %+v, want extension %s", vm.Config.ManagedBy, ExtensionKey)
	}

	// The second Ensure must neither clone nor reconfigure: both would fail now.
	var before mo.VirtualMachine
	_ = s.admin.read(ctx, vm.Self, []string{"config.changeVersion"}, &before)
	clear := failMethods(s, simulator.FaultTypeGeneric, "CloneVM_Task", "ReconfigVM_Task")
	m2, err := sess.Ensure(ctx, spec)
	clear()
	if err != nil {
		t.Fatalf("second Ensure changed something: %v", err)
	}
	var after mo.VirtualMachine
	_ = s.admin.read(ctx, vm.Self, []string{"config.changeVersion"}, &after)
	if m2.Ref != m.Ref || after.Config.ChangeVersion != before.Config.ChangeVersion {
		t.Errorf("second Ensure: ref %s -> %s, changeVersion %s -> %s", m.Ref, m2.Ref, before.Config.ChangeVersion, after.Config.ChangeVersion)
	}
	if names := vmsInFolder(t, s); len(names) != 1 || names[0] != "web-0" {
		t.Errorf("folder holds %v, want [web-0]", names)
	}

	// A changed spec is converged in place; a smaller disk is refused and nothing changes.
	spec.CPUs, spec.Networks, spec.VTPM = 4, spec.Networks[:1], true
	spec.UserDataB64 = base64.StdEncoding.EncodeToString([]byte("#cloud-config\n"))
	for range 2 { // the second pass must not add a second vTPM
		if _, err := sess.Ensure(ctx, spec); err != nil {
			t.Fatal(err)
		}
	}
	vm = readVM(t, s, m.Ref)
	if n := len(object.VirtualDeviceList(vm.Config.Hardware.Device).SelectByType((*types.VirtualTPM)(nil))); n != 1 {
		t.Errorf("%d vTPM devices, want 1", n)
	}
	if vm.Config.Hardware.NumCPU != 4 || len(object.VirtualDeviceList(vm.Config.Hardware.Device).SelectByType((*types.VirtualEthernetCard)(nil))) != 1 || extraConfig(vm)[KeyUserData] != spec.UserDataB64 {
		t.Errorf("converge: %d CPUs, NICs %v, userdata changed %v; want 4, 1, true", vm.Config.Hardware.NumCPU,
			len(object.VirtualDeviceList(vm.Config.Hardware.Device).SelectByType((*types.VirtualEthernetCard)(nil))), extraConfig(vm)[KeyUserData] == spec.UserDataB64)
	}
	spec.DiskGiB = []int64{spec.DiskGiB[0], 1}
	_, err = sess.Ensure(ctx, spec)
	var se *StepError
	if !errors.As(err, &se) || se.Step != "plan reconfiguration" || !strings.Contains(err.Error(), "shrink") {
		t.Errorf("shrinking disk 1: %v, want a plan reconfiguration step error about shrinking", err)
	}
}

func TestOwnershipRefusals(t *testing.T) {
	timed(t)
	s, spec := machineSim(t)
	sess := s.dial(t)
	ctx := ctxT(t)

	// Someone else's VM of the same name, made by hand in the folder.
	tpl := object.NewVirtualMachine(s.admin.vc, s.ref(t, "/DC0/vm/"+tplName))
	pool := s.ref(t, "/DC0/host/DC0_C0/Resources")
	task, err := tpl.Clone(ctx, object.NewFolder(s.admin.vc, s.ref(t, "/DC0/vm/banlieue")), spec.Name, types.VirtualMachineCloneSpec{
		Location: types.VirtualMachineRelocateSpec{Pool: &pool}, PowerOn: true,
	})
	if err != nil || task.Wait(ctx) != nil {
		t.Fatalf("clone the foreign VM: %v", err)
	}
	foreign := readVM(t, s, s.ref(t, "/DC0/vm/banlieue/"+spec.Name).String())
	ref := foreign.Self.String()

	if _, err := sess.Ensure(ctx, spec); !errors.Is(err, ErrNotOwned) {
		t.Errorf("Ensure over a foreign VM: %v, want ErrNotOwned", err)
	}
	if _, err := sess.Get(ctx, "DC0", "banlieue", spec.Name, spec.OwnerUID); !errors.Is(err, ErrNotOwned) {
		t.Errorf("Get of a foreign VM: %v, want ErrNotOwned", err)
	}
	if err := sess.Delete(ctx, ref, spec.OwnerUID); !errors.Is(err, ErrNotOwned) {
		t.Errorf("Delete of a foreign VM: %v, want ErrNotOwned", err)
	}
	if _, err := sess.PowerOff(ctx, ref, spec.OwnerUID, false, time.Second); !errors.Is(err, ErrNotOwned) {
		t.Errorf("PowerOff of a foreign VM: %v, want ErrNotOwned", err)
	}
	after := readVM(t, s, ref)
	if after.Config.ChangeVersion != foreign.Config.ChangeVersion || after.Runtime.PowerState != "poweredOn" || len(vmsInFolder(t, s)) != 1 {
		t.Errorf("the foreign VM was touched: changeVersion %s -> %s, power %s, folder %v",
			foreign.Config.ChangeVersion, after.Config.ChangeVersion, after.Runtime.PowerState, vmsInFolder(t, s))
	}

	// Ours for one owner is not ours for another, and the template is nobody's.
	spec.Name = "web-1"
	m, err := sess.Ensure(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	other := spec
	other.OwnerUID = "another-uid"
	if _, err := sess.Ensure(ctx, other); !errors.Is(err, ErrNotOwned) {
		t.Errorf("Ensure by another owner: %v, want ErrNotOwned", err)
	}
	if err := sess.Delete(ctx, m.Ref, other.OwnerUID); !errors.Is(err, ErrNotOwned) {
		t.Errorf("Delete by another owner: %v, want ErrNotOwned", err)
	}
	if err := sess.PowerOn(ctx, tpl.Reference().String(), spec.OwnerUID); !errors.Is(err, ErrNotOwned) {
		t.Errorf("PowerOn of the template: %v, want ErrNotOwned", err)
	}

	// A name is an inventory path, never a managed-object reference.
	byRef := spec
	byRef.Name, byRef.Template = "web-2", tpl.Reference().Value
	if _, err := sess.Ensure(ctx, byRef); !errors.Is(err, ErrNotFound) {
		t.Errorf("template given as %q: %v, want ErrNotFound", byRef.Template, err)
	}
	byRef.Template = tpl.Reference().String()
	if _, err := sess.Ensure(ctx, byRef); !errors.Is(err, ErrNotFound) {
		t.Errorf("template given as %q: %v, want ErrNotFound", byRef.Template, err)
	}
	if err := sess.Delete(ctx, "Datastore:"+s.ref(t, "/DC0/datastore/LocalDS_0").Value, spec.OwnerUID); err == nil {
		t.Error("Delete of a datastore reference succeeded")
	}
}

func TestDeleteLeavesNothing(t *testing.T) {
	s, spec, sess, ctx, m := ensured(t)
	if err := sess.PowerOn(ctx, m.Ref, spec.OwnerUID); err != nil {
		t.Fatal(err)
	}
	var ds mo.Datastore
	if err := s.admin.read(ctx, s.ref(t, "/DC0/datastore/LocalDS_0"), []string{"info"}, &ds); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(ds.Info.GetDatastoreInfo().Url, spec.Name)
	if _, err := os.Stat(dir); err != nil {
		t.Fatalf("the VM's directory %s is not where the test looks: %v", dir, err)
	}
	if err := sess.Delete(ctx, m.Ref, spec.OwnerUID); err != nil {
		t.Fatal(err)
	}
	if _, err := sess.Get(ctx, "DC0", "banlieue", spec.Name, spec.OwnerUID); !errors.Is(err, ErrNotFound) {
		t.Errorf("Get after Delete: %v, want ErrNotFound", err)
	}
	if names := vmsInFolder(t, s); len(names) != 0 {
		t.Errorf("folder holds %v after Delete", names)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("the VM's files are left at %s: %v", dir, err)
	}
	if err := sess.Delete(ctx, m.Ref, spec.OwnerUID); err != nil {
		t.Errorf("a second Delete: %v, want nil (already gone)", err)
	}
}

func TestPowerOffFallsBackToHard(t *testing.T) {
	s, spec, sess, ctx, m := ensured(t)
	on := func() {
		t.Helper()
		if err := sess.PowerOn(ctx, m.Ref, spec.OwnerUID); err != nil {
			t.Fatal(err)
		}
	}

	// vCenter does not answer the guest shutdown in time: nothing is cut, the error says so.
	on()
	s.model.Service.AddFaultRule(&simulator.FaultInjectionRule{
		MethodName: "ShutdownGuest", ObjectType: "*", ObjectName: "*", Probability: 1,
		FaultType: simulator.FaultTypeCustom, Fault: new(types.ToolsUnavailable), Delay: 4000, Enabled: true,
	})
	_, err := s.dial(t, WithCallTimeout(2*time.Second)).PowerOff(ctx, m.Ref, spec.OwnerUID, true, 30*time.Second)
	s.model.Service.ClearFaultRules()
	wantStep(t, "unanswered guest shutdown", err, "ask the guest to shut down")
	if got := readVM(t, s, m.Ref).Runtime.PowerState; got != "poweredOn" {
		t.Fatalf("power state %s after an unanswered guest shutdown; the power must not be cut", got)
	}

	// Tools refuses: the power is cut at once, not after the timeout.
	s.model.Service.AddFaultRule(&simulator.FaultInjectionRule{
		MethodName: "ShutdownGuest", ObjectType: "*", ObjectName: "*", Probability: 1,
		FaultType: simulator.FaultTypeCustom, Fault: new(types.ToolsUnavailable), Enabled: true,
	})
	start := time.Now()
	path, err := sess.PowerOff(ctx, m.Ref, spec.OwnerUID, true, 30*time.Second)
	s.model.Service.ClearFaultRules()
	if err != nil || path != PowerOffHard || time.Since(start) > 20*time.Second {
		t.Fatalf("PowerOff with Tools unavailable: %s, %v after %s; want Hard at once", path, err, time.Since(start))
	}
	if got := readVM(t, s, m.Ref).Runtime.PowerState; got != "poweredOff" {
		t.Fatalf("power state %s after PowerOff", got)
	}

	// Tools takes it: the guest shuts down.
	on()
	if path, err := sess.PowerOff(ctx, m.Ref, spec.OwnerUID, true, 30*time.Second); err != nil || path != PowerOffGuest {
		t.Fatalf("PowerOff with Tools: %s, %v; want GuestShutdown", path, err)
	}

	// The guest takes longer than the timeout: the power is cut after it.
	on()
	setTaskDelay(t, s, map[string]int{"ShutdownGuest": 3000, "LockHandoff": 0}, "VirtualMachine.shutdownGuest")
	path, err = sess.PowerOff(ctx, m.Ref, spec.OwnerUID, true, time.Second)
	if err != nil || path != PowerOffHardAfterTimeout {
		t.Fatalf("PowerOff of a slow guest: %s, %v; want HardAfterTimeout", path, err)
	}
	if path, err := sess.PowerOff(ctx, m.Ref, spec.OwnerUID, true, time.Second); err != nil || path != PowerOffAlreadyOff {
		t.Fatalf("PowerOff when off: %s, %v; want AlreadyOff", path, err)
	}
}
