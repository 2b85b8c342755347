// Package vsphere runs the same VirtualMachine, VMClass and VMImage a libvirt host serves on a
// vsphere Provider, end to end: banlieue-controller and banlieue-provider-vsphere in one manager
// on the real API server, over an in-process vcsim whose TLS is verified against its own CA.
package vsphere

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "banlieue.io/banlieue/api/infrastructure/v1alpha1"
	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
	"banlieue.io/banlieue/internal/controller"
	"banlieue.io/banlieue/internal/provider/vsphere"
	"banlieue.io/banlieue/internal/provider/vsphere/vcsimtest"
	"banlieue.io/banlieue/internal/testenv"
)

// wait bounds every wait: generous, for a loaded 2-core machine.
const wait = 2 * time.Minute

const (
	ns       = "vs-e2e"
	provider = "vcenter-sim"
	folder   = "/DC0/vm/" + vcsimtest.Folder
)

// TestVirtualMachineOnVSphere: a VirtualMachine of a VMClass and a VMImage whose vsphere source
// is a Template is scheduled onto a vsphere Provider (from the failure domain and image row the
// provider publishes), realised as a VSphereMachine cloned in vcsim, and Ready with the
// vsphere://<bios-uuid> provider ID and the address VMware Tools report; a VM whose disk does
// not fit the datastore's free space the provider publishes is not placed. Deleting it leaves
// nothing in vcsim that banlieue made, and what it did not make (the template, a person's
// virtual machine in the same folder) untouched.
func TestVirtualMachineOnVSphere(t *testing.T) {
	env := testenv.Start(t)
	sim := vcsimtest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()

	mgr := env.NewManager(t)
	if err := controller.Setup(mgr, controller.Options{}); err != nil {
		t.Fatal(err)
	}
	if err := vsphere.Setup(mgr, vsphere.Options{ProviderName: provider, ProviderNamespace: ns, Folder: vcsimtest.Folder}); err != nil {
		t.Fatal(err)
	}
	testenv.StartManager(t, mgr)

	sim.CreateForeign(t, folder, "persons-vm")
	env.Create(ctx, t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	env.Create(ctx, t, sim.ProviderObjects(ns, provider, banlieuev1.ProviderCapabilities{
		StorageClasses: []banlieuev1.StorageClassMapping{{Name: "standard", Target: map[string]string{"datastore": vcsimtest.Datastore}}},
		NetworkClasses: []banlieuev1.NetworkClassMapping{{Name: "prod", Target: map[string]string{"portGroup": vcsimtest.Network}}},
	})...)
	env.Create(ctx, t,
		&banlieuev1.VMClass{ObjectMeta: metav1.ObjectMeta{Name: "vs-small"}, Spec: banlieuev1.VMClassSpec{
			Hardware: banlieuev1.ClassHardware{CPUs: 2, MemoryMiB: 256,
				Disks: []banlieuev1.ClassDisk{{Name: "os", SizeGiB: sim.TemplateDiskGiB(t) + 1, StorageClass: "standard"}}},
			Network: banlieuev1.ClassNetwork{Interfaces: []banlieuev1.ClassInterface{{Name: "nic0", NetworkClass: "prod"}}}}},
		&banlieuev1.VMImage{ObjectMeta: metav1.ObjectMeta{Name: "vs-ubuntu"}, Spec: banlieuev1.VMImageSpec{
			OSFamily: "linux", OSDistribution: "ubuntu", OSVersion: "24.04", Architecture: "amd64", GuestAgent: "cloud-init",
			Sources: []banlieuev1.ImageSource{{ProviderClass: vsphere.ClassName, Kind: banlieuev1.SourceTemplate, Ref: vcsimtest.Template}}}},
		&banlieuev1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns}, Spec: banlieuev1.VirtualMachineSpec{
			ClassRef: banlieuev1.LocalObjectReference{Name: "vs-small"}, ImageRef: banlieuev1.LocalObjectReference{Name: "vs-ubuntu"},
			DesiredPowerState: banlieuev1.PoweredOn}})

	vmKey := client.ObjectKey{Namespace: ns, Name: "web"}
	getVM := func() *banlieuev1.VirtualMachine {
		var vm banlieuev1.VirtualMachine
		if err := env.Client.Get(ctx, vmKey, &vm); err != nil {
			t.Fatal(err)
		}
		return &vm
	}
	vmName := ns + "-web"

	t.Run("scheduled and cloned", func(t *testing.T) {
		testenv.Eventually(t, wait, "VM scheduled on the vsphere Provider", func() error {
			s := getVM().Status.Scheduled
			return testenv.Unmet(s != nil && s.ProviderName == provider && s.FailureDomain == vcsimtest.FailureDomain,
				fmt.Sprintf("scheduled %+v, conditions %+v", s, getVM().Status.Conditions))
		})
		testenv.Eventually(t, wait, "the clone in vcsim, powered on", func() error {
			vm := sim.VM(t, folder+"/"+vmName)
			if vm == nil {
				return fmt.Errorf("no %s in %v", vmName, sim.Names(t, folder))
			}
			return testenv.Unmet(vm.Runtime.PowerState == "poweredOn", "power "+string(vm.Runtime.PowerState))
		})
	})

	t.Run("ready with its provider ID and address", func(t *testing.T) {
		sim.ReportGuest(t, folder+"/"+vmName, "192.0.2.20")
		testenv.Eventually(t, wait, "VM Ready with the address", func() error {
			vm := getVM()
			c := meta.FindStatusCondition(vm.Status.Conditions, banlieuev1.ConditionReady)
			ok := c != nil && c.Status == metav1.ConditionTrue && vm.Status.ObservedPowerState == banlieuev1.PoweredOn &&
				len(vm.Status.Addresses) > 0 && vm.Status.Addresses[0].Address == "192.0.2.20"
			return testenv.Unmet(ok, fmt.Sprintf("Ready %+v, power %s, addresses %v", c, vm.Status.ObservedPowerState, vm.Status.Addresses))
		})
		var m infrav1.VSphereMachine
		if err := env.Client.Get(ctx, vmKey, &m); err != nil {
			t.Fatal(err)
		}
		vm := sim.VM(t, folder+"/"+vmName)
		if want := "vsphere://" + vm.Config.Uuid; m.Spec.ProviderID != want || m.Status.BIOSUUID != vm.Config.Uuid {
			t.Errorf("providerID %q, biosUuid %q; want %s, the clone's BIOS UUID", m.Spec.ProviderID, m.Status.BIOSUUID, want)
		}
	})

	t.Run("a disk larger than the datastore's free space is not placed", func(t *testing.T) {
		// vcsim's datastore holds 1 TiB per host: a 64 TiB disk fits nowhere.
		env.Create(ctx, t, &banlieuev1.VMClass{ObjectMeta: metav1.ObjectMeta{Name: "vs-huge"}, Spec: banlieuev1.VMClassSpec{
			Hardware: banlieuev1.ClassHardware{CPUs: 1, MemoryMiB: 256,
				Disks: []banlieuev1.ClassDisk{{Name: "os", SizeGiB: 65536, StorageClass: "standard"}}},
			Network: banlieuev1.ClassNetwork{Interfaces: []banlieuev1.ClassInterface{{Name: "nic0", NetworkClass: "prod"}}}}},
			&banlieuev1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Name: "huge", Namespace: ns}, Spec: banlieuev1.VirtualMachineSpec{
				ClassRef: banlieuev1.LocalObjectReference{Name: "vs-huge"}, ImageRef: banlieuev1.LocalObjectReference{Name: "vs-ubuntu"}}})
		key := client.ObjectKey{Namespace: ns, Name: "huge"}
		testenv.Eventually(t, wait, "huge not scheduled for its datastore", func() error {
			var vm banlieuev1.VirtualMachine
			if err := env.Client.Get(ctx, key, &vm); err != nil {
				return err
			}
			c := meta.FindStatusCondition(vm.Status.Conditions, banlieuev1.ConditionScheduled)
			return testenv.Unmet(c != nil && c.Status == metav1.ConditionFalse && c.Reason == banlieuev1.ReasonInsufficientCapacity &&
				strings.Contains(c.Message, "datastore "+vcsimtest.Datastore+" has") && strings.Contains(c.Message, "need 65536 GiB"),
				fmt.Sprintf("Scheduled %+v", c))
		})
		if err := env.Client.Get(ctx, key, &infrav1.VSphereMachine{}); !apierrors.IsNotFound(err) {
			t.Errorf("a VSphereMachine exists for an unplaced VM: %v", err)
		}
		if err := env.Client.Delete(ctx, &banlieuev1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "huge"}}); err != nil {
			t.Fatal(err)
		}
		testenv.WaitGone(ctx, t, env.Client, &banlieuev1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "huge"}}, wait)
	})

	t.Run("deleted leaves nothing banlieue made", func(t *testing.T) {
		if err := env.Client.Delete(ctx, getVM()); err != nil {
			t.Fatal(err)
		}
		testenv.WaitGone(ctx, t, env.Client, &banlieuev1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}}, wait)
		testenv.WaitGone(ctx, t, env.Client, &infrav1.VSphereMachine{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}}, wait)
		if got := sim.Names(t, folder); !slices.Equal(got, []string{"persons-vm"}) {
			t.Errorf("folder holds %v after the deletion, want only the person's virtual machine", got)
		}
		other := sim.VM(t, folder+"/persons-vm")
		if ec := vcsimtest.ExtraConfig(other); ec["person.marker"] != "mine" || other.Config.Hardware.NumCPU != 1 {
			t.Errorf("the person's virtual machine was changed: extraConfig %v, cpus %d", ec, other.Config.Hardware.NumCPU)
		}
		if tpl := sim.VM(t, vcsimtest.Template); tpl == nil || !tpl.Config.Template {
			t.Error("the template is gone or no longer a template")
		}
	})
}
