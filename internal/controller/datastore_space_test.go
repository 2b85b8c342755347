package controller

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"k8s.io/utils/ptr"

	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
)

// onDatastores maps the Provider's storage classes to vSphere datastores and publishes their
// free space, in GiB, as the vsphere provider does (capacity.datastores).
func onDatastores(free map[string]int64, classes map[string]string) func(*banlieuev1.Provider) {
	return func(p *banlieuev1.Provider) {
		p.Spec.Capabilities.StorageClasses = nil
		for class, ds := range classes {
			p.Spec.Capabilities.StorageClasses = append(p.Spec.Capabilities.StorageClasses,
				banlieuev1.StorageClassMapping{Name: class, Target: map[string]string{"datastore": ds}})
		}
		c := &banlieuev1.FailureDomainCapacity{CPUs: 64, MemoryMiB: 262144}
		for _, name := range []string{"ds-a", "ds-b"} {
			if f, ok := free[name]; ok {
				c.Datastores = append(c.Datastores, banlieuev1.PoolCapacity{Name: name, CapacityGiB: 1024, AvailableGiB: f})
			}
		}
		p.Status.FailureDomains[0].Capacity = c
	}
}

func twoDisks(c *banlieuev1.VMClass) {
	c.Spec.Hardware.Disks = append(c.Spec.Hardware.Disks, banlieuev1.ClassDisk{Name: "data", SizeGiB: 30, StorageClass: "bulk"})
}

func overrideOS(size int32) func(*banlieuev1.VirtualMachine) {
	return func(vm *banlieuev1.VirtualMachine) {
		vm.Spec.HardwareOverride = &banlieuev1.HardwareOverride{DiskOverrides: []banlieuev1.DiskOverride{{Name: "os", SizeGiB: size}}}
	}
}

// TestDatastoreShortfall: the pure decision. The class "small" has one 20 GiB disk of storage
// class standard.
func TestDatastoreShortfall(t *testing.T) {
	both := map[string]string{"standard": "ds-a", "bulk": "ds-a"}
	split := map[string]string{"standard": "ds-a", "bulk": "ds-b"}
	tests := []struct {
		name    string
		vm      *banlieuev1.VirtualMachine
		class   *banlieuev1.VMClass
		p       banlieuev1.Provider
		wantMsg string // "" when it fits
	}{
		{"exactly the free space fits", testVM("a"), testClass(), testProvider("a", onDatastores(map[string]int64{"ds-a": 20}, both)), ""},
		{"one GiB short", testVM("a"), testClass(), testProvider("a", onDatastores(map[string]int64{"ds-a": 19}, both)),
			"datastore ds-a has 19 GiB free, the VM's disks on it need 20 GiB"},
		{"two disks on one datastore add up", testVM("a"), testClass(twoDisks), testProvider("a", onDatastores(map[string]int64{"ds-a": 49}, both)),
			"datastore ds-a has 49 GiB free, the VM's disks on it need 50 GiB"},
		{"two disks on two datastores each fit", testVM("a"), testClass(twoDisks), testProvider("a", onDatastores(map[string]int64{"ds-a": 20, "ds-b": 30}, split)), ""},
		{"the second datastore is short", testVM("a"), testClass(twoDisks), testProvider("a", onDatastores(map[string]int64{"ds-a": 500, "ds-b": 29}, split)),
			"datastore ds-b has 29 GiB free, the VM's disks on it need 30 GiB"},
		{"the VM's disk override counts", testVM("a", overrideOS(60)), testClass(), testProvider("a", onDatastores(map[string]int64{"ds-a": 40}, both)),
			"datastore ds-a has 40 GiB free, the VM's disks on it need 60 GiB"},
		{"a datastore of no published space is not checked", testVM("a"), testClass(), testProvider("a", onDatastores(map[string]int64{"ds-b": 0}, both)), ""},
		{"a negative free space reads as none", testVM("a"), testClass(), testProvider("a", onDatastores(map[string]int64{"ds-a": -3}, both)),
			"datastore ds-a has 0 GiB free"},
		{"a libvirt host publishes no datastores", testVM("a"), testClass(), testProvider("a", sized(8, 16384)), ""},
		{"no capacity at all", testVM("a"), testClass(), testProvider("a"), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := datastoreShortfall(datastoreNeed(tt.vm, tt.class, &tt.p), nil, tt.p.Status.FailureDomains[0])
			if (tt.wantMsg == "") != (got == "") || !strings.HasPrefix(got, tt.wantMsg) {
				t.Errorf("shortfall %q, want %q", got, tt.wantMsg)
			}
		})
	}
}

// TestScheduleByDatastoreSpace: schedule leaves out a failure domain whose datastore cannot hold
// the VM's disks, says so when none can, and never moves a placed VM for it.
func TestScheduleByDatastoreSpace(t *testing.T) {
	ready := testImage(readyRow("a"), readyRow("b"))
	std := map[string]string{"standard": "ds-a"}
	tests := []struct {
		name      string
		vm        *banlieuev1.VirtualMachine
		siblings  []banlieuev1.VirtualMachine
		providers []banlieuev1.Provider
		want      string // the provider chosen, or the reason
		wantInMsg []string
	}{
		{name: "the full datastore's failure domain is passed over", vm: testVM("web-01"),
			providers: []banlieuev1.Provider{testProvider("a", onDatastores(map[string]int64{"ds-a": 5}, std)),
				testProvider("b", onDatastores(map[string]int64{"ds-a": 100}, std))},
			want: "b"},
		{name: "no datastore with room: InsufficientCapacity naming each", vm: testVM("web-01"),
			providers: []banlieuev1.Provider{testProvider("a", onDatastores(map[string]int64{"ds-a": 5}, std)),
				testProvider("b", onDatastores(map[string]int64{"ds-a": 19}, std))},
			want: banlieuev1.ReasonInsufficientCapacity,
			wantInMsg: []string{"has the datastore space for its disks", "a/a: datastore ds-a has 5 GiB free, the VM's disks on it need 20 GiB",
				"b/b: datastore ds-a has 19 GiB free"}},
		{name: "a VM placed and not yet provisioned takes its disks off the free space", vm: testVM("web-02", withStrategy(banlieuev1.PlacementBinpack)),
			siblings: []banlieuev1.VirtualMachine{pendingOn("web-01", "a", "ds-a", 30, false)},
			providers: []banlieuev1.Provider{testProvider("a", onDatastores(map[string]int64{"ds-a": 40}, std)),
				testProvider("b", onDatastores(map[string]int64{"ds-a": 25}, std))},
			want: "b"},
		{name: "a provisioned VM's disks are in the free space already", vm: testVM("web-02", withStrategy(banlieuev1.PlacementBinpack)),
			siblings: []banlieuev1.VirtualMachine{pendingOn("web-01", "a", "ds-a", 30, true)},
			providers: []banlieuev1.Provider{testProvider("a", onDatastores(map[string]int64{"ds-a": 40}, std)),
				testProvider("b", onDatastores(map[string]int64{"ds-a": 25}, std))},
			want: "a"},
		{name: "promised space is named when nothing is left", vm: testVM("web-02"),
			siblings:  []banlieuev1.VirtualMachine{pendingOn("web-01", "a", "ds-a", 30, false)},
			providers: []banlieuev1.Provider{testProvider("a", onDatastores(map[string]int64{"ds-a": 40}, std))},
			want:      banlieuev1.ReasonInsufficientCapacity,
			wantInMsg: []string{"a/a: datastore ds-a has 40 GiB free, 30 GiB of it promised to VMs placed there and not yet provisioned, the VM's disks on it need 20 GiB"}},
		{name: "a placed VM stays though its datastore filled up",
			vm: testVM("web-01", func(vm *banlieuev1.VirtualMachine) { p := placedOn("web-01", "a", 2, 2048); vm.Status = p.Status }),
			providers: []banlieuev1.Provider{testProvider("a", onDatastores(map[string]int64{"ds-a": 0}, std)),
				testProvider("b", onDatastores(map[string]int64{"ds-a": 100}, std))},
			want: "a"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, err := schedule(scheduleInput{VM: tt.vm, Class: testClass(), Image: ready, Providers: tt.providers,
				Siblings: tt.siblings, Classes: map[string]*banlieuev1.VMClass{"small": testClass()}})
			if len(tt.wantInMsg) > 0 {
				se, ok := err.(*scheduleError)
				if !ok || se.Reason != tt.want {
					t.Fatalf("schedule = %+v, %v; want reason %s", d.placement(), err, tt.want)
				}
				for _, s := range tt.wantInMsg {
					if !strings.Contains(se.Message, s) {
						t.Errorf("message %q lacks %q", se.Message, s)
					}
				}
				return
			}
			if err != nil || d.Provider.Name != tt.want {
				t.Fatalf("schedule = %+v, %v; want provider %s", d.placement(), err, tt.want)
			}
		})
	}
}

// pendingOn is a VM of class small placed on provider's failure domain with its one disk of
// sizeGiB on datastore ds, its machine provisioned or not.
func pendingOn(name, provider, ds string, sizeGiB int32, provisioned bool) banlieuev1.VirtualMachine {
	vm := placedOn(name, provider, 2, 2048)
	vm.Spec.HardwareOverride = &banlieuev1.HardwareOverride{DiskOverrides: []banlieuev1.DiskOverride{{Name: "os", SizeGiB: sizeGiB}}}
	vm.Status.Scheduled.ResolvedStorage = []banlieuev1.ResolvedMapping{{ClassName: "standard", BackendID: ds}}
	vm.Status.Initialization = &banlieuev1.InitializationStatus{Provisioned: ptr.To(provisioned)}
	return vm
}

// TestUnprovisioned: the disks counted against a datastore are those of the VMs placed on the
// failure domain whose machines are not provisioned, the VM being decided and VMs of unknown
// class or of a placement that does not match their class left out.
func TestUnprovisioned(t *testing.T) {
	classes := map[string]*banlieuev1.VMClass{"small": testClass(), "two": testClass(twoDisks)}
	twoOn := func(name, ds0, ds1 string) banlieuev1.VirtualMachine {
		vm := pendingOn(name, "a", ds0, 20, false)
		vm.Spec.ClassRef.Name = "two"
		vm.Spec.HardwareOverride = nil
		vm.Status.Scheduled.ResolvedStorage = append(vm.Status.Scheduled.ResolvedStorage, banlieuev1.ResolvedMapping{ClassName: "bulk", BackendID: ds1})
		return vm
	}
	unknown := pendingOn("u", "a", "ds-a", 7, false)
	unknown.Spec.ClassRef.Name = "gone"
	stale := twoOn("s", "ds-a", "ds-b")
	stale.Spec.ClassRef.Name = "small" // two mappings, one disk
	noInit := pendingOn("n", "b", "ds-a", 5, false)
	noInit.Status.Initialization = nil
	tests := []struct {
		name   string
		placed []banlieuev1.VirtualMachine
		want   map[fdKey]map[string]int64
	}{
		{"none placed", nil, map[fdKey]map[string]int64{}},
		{"pending ones add up per datastore",
			[]banlieuev1.VirtualMachine{pendingOn("p1", "a", "ds-a", 10, false), pendingOn("p2", "a", "ds-a", 15, false), pendingOn("p3", "a", "ds-b", 4, false)},
			map[fdKey]map[string]int64{{testNS, "a", "a"}: {"ds-a": 25, "ds-b": 4}}},
		{"provisioned ones and the VM itself are left out",
			[]banlieuev1.VirtualMachine{pendingOn("p1", "a", "ds-a", 10, true), pendingOn("self", "a", "ds-a", 15, false)},
			map[fdKey]map[string]int64{}},
		{"two disks of one VM on two datastores", []banlieuev1.VirtualMachine{twoOn("t", "ds-a", "ds-b")},
			map[fdKey]map[string]int64{{testNS, "a", "a"}: {"ds-a": 20, "ds-b": 30}}},
		{"unknown class and mismatched placement add nothing", []banlieuev1.VirtualMachine{unknown, stale},
			map[fdKey]map[string]int64{{testNS, "a", "a"}: {}}},
		{"a VM with no initialization status yet is pending", []banlieuev1.VirtualMachine{noInit},
			map[fdKey]map[string]int64{{testNS, "b", "b"}: {"ds-a": 5}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := unprovisioned(testVM("self"), tt.placed, classes)
			if fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Errorf("unprovisioned = %v, want %v", got, tt.want)
			}
		})
	}
}

// Random fleets of 1 to 6 failure domains on two datastores, random bursts of up to 120 VMs
// with random disk sizes, each decided on the placements before it; after each, a random
// pending VM may finish provisioning, and the provider's next read then takes its disks off
// the datastore's free space. No datastore is ever promised more than it had free, and a VM is
// refused for datastore space only when no failure domain has that room left.
func TestSchedulePropertyNoDatastoreOverfilled(t *testing.T) {
	classes := map[string]*banlieuev1.VMClass{"small": testClass()}
	for seed := range uint64(50) {
		rng := rand.New(rand.NewPCG(seed, 47))
		var providers []banlieuev1.Provider
		var rows []banlieuev1.ProviderImageStatus
		initial := map[string]int64{} // by provider/datastore
		for i := range 1 + rng.IntN(6) {
			name := fmt.Sprintf("dc-%d", i)
			free := map[string]int64{"ds-a": int64(rng.IntN(400)), "ds-b": int64(rng.IntN(400))}
			ds := "ds-a"
			if rng.IntN(2) == 0 {
				ds = "ds-b"
			}
			providers = append(providers, testProvider(name, onDatastores(free, map[string]string{"standard": ds})))
			rows = append(rows, readyRow(name))
			initial[name] = free[ds]
		}
		image := testImage(rows...)
		var placed []banlieuev1.VirtualMachine
		promisedOrMade := map[string]int64{}
		for i := range rng.IntN(120) {
			size := int32(1 + rng.IntN(80))
			vm := testVM(fmt.Sprintf("vm-%03d", i), overrideOS(size))
			d, err := schedule(scheduleInput{VM: vm, Class: classes["small"], Image: image, Providers: providers,
				Siblings: placed, Classes: classes})
			if err != nil {
				se := err.(*scheduleError)
				if se.Reason != banlieuev1.ReasonInsufficientCapacity {
					t.Fatalf("seed %d, %s: %v", seed, vm.Name, err)
				}
				for name, free := range initial {
					if free-promisedOrMade[name] >= int64(size) {
						t.Fatalf("seed %d, %s (%d GiB) refused though %s has %d GiB left: %s",
							seed, vm.Name, size, name, free-promisedOrMade[name], se.Message)
					}
				}
				continue
			}
			vm.Status.Scheduled = ptrTo(d.placement())
			placed = append(placed, *vm)
			promisedOrMade[d.Provider.Name] += int64(size)
			if promisedOrMade[d.Provider.Name] > initial[d.Provider.Name] {
				t.Fatalf("seed %d: %s promised %d GiB, it had %d free", seed, d.Provider.Name, promisedOrMade[d.Provider.Name], initial[d.Provider.Name])
			}
			if j := rng.IntN(len(placed)); rng.IntN(3) == 0 && !machineProvisioned(&placed[j].Status) {
				done := &placed[j]
				done.Status.Initialization = &banlieuev1.InitializationStatus{Provisioned: ptr.To(true)}
				p := &providers[slices.IndexFunc(providers, func(p banlieuev1.Provider) bool { return p.Name == done.Status.Scheduled.ProviderName })]
				c := p.Status.FailureDomains[0].Capacity
				k := slices.IndexFunc(c.Datastores, func(ds banlieuev1.PoolCapacity) bool {
					return ds.Name == done.Status.Scheduled.ResolvedStorage[0].BackendID
				})
				c.Datastores[k].AvailableGiB -= int64(done.Spec.HardwareOverride.DiskOverrides[0].SizeGiB)
			}
		}
	}
}
