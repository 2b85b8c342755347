package controller

import (
	"strings"
	"testing"

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
			got := datastoreShortfall(datastoreNeed(tt.vm, tt.class, &tt.p), tt.p.Status.FailureDomains[0])
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
		{name: "a placed VM stays though its datastore filled up",
			vm: testVM("web-01", func(vm *banlieuev1.VirtualMachine) { p := placedOn("web-01", "a", 2, 2048); vm.Status = p.Status }),
			providers: []banlieuev1.Provider{testProvider("a", onDatastores(map[string]int64{"ds-a": 0}, std)),
				testProvider("b", onDatastores(map[string]int64{"ds-a": 100}, std))},
			want: "a"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, err := schedule(scheduleInput{VM: tt.vm, Class: testClass(), Image: ready, Providers: tt.providers})
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
