package controller

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/equality"

	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
)

// sized gives the Provider's failure domain a host of cpus logical CPUs and memoryMiB.
func sized(cpus int32, memoryMiB int64) func(*banlieuev1.Provider) {
	return func(p *banlieuev1.Provider) {
		p.Status.FailureDomains[0].Capacity = &banlieuev1.FailureDomainCapacity{CPUs: cpus, MemoryMiB: memoryMiB}
	}
}

func cordoned(p *banlieuev1.Provider) { p.Spec.Unschedulable = true }

// placedOn is a VM of another name already placed on provider's failure domain, taking cpus
// and memoryMiB.
func placedOn(name, provider string, cpus, memoryMiB int32) banlieuev1.VirtualMachine {
	vm := scheduledOn(name, provider)
	vm.Status.Scheduled.ProviderNamespace = testNS
	vm.Status.Scheduled.CPUs, vm.Status.Scheduled.MemoryMiB = cpus, memoryMiB
	return vm
}

func withStrategy(s string) func(*banlieuev1.VirtualMachine) {
	return func(vm *banlieuev1.VirtualMachine) {
		if vm.Spec.Placement == nil {
			vm.Spec.Placement = &banlieuev1.Placement{}
		}
		vm.Spec.Placement.Strategy = s
	}
}

// The class "small" takes 2 vCPUs and 2048 MiB; the default reserve is 1024 MiB, the default
// ratios 400 % CPU and 100 % memory.
func TestScheduleByCapacity(t *testing.T) {
	ready := testImage(readyRow("a"), readyRow("b"), readyRow("c"))
	tests := []struct {
		name       string
		vm         *banlieuev1.VirtualMachine
		class      *banlieuev1.VMClass
		providers  []banlieuev1.Provider
		siblings   []banlieuev1.VirtualMachine
		elsewhere  []banlieuev1.VirtualMachine
		want       string // the provider chosen, or the reason
		wantInMsg  []string
		wantReason bool
	}{
		{
			name:      "spread: the least allocated host, not the first by name",
			vm:        testVM("web-01"),
			providers: []banlieuev1.Provider{testProvider("a", sized(8, 16384)), testProvider("b", sized(8, 16384)), testProvider("c", sized(8, 16384))},
			siblings:  []banlieuev1.VirtualMachine{placedOn("x", "a", 2, 4096), placedOn("y", "c", 2, 2048)},
			want:      "b",
		},
		{
			name:      "spread counts the share of each host, so a larger host takes more",
			vm:        testVM("web-01"),
			providers: []banlieuev1.Provider{testProvider("a", sized(8, 9216)), testProvider("b", sized(64, 132096))},
			siblings:  []banlieuev1.VirtualMachine{placedOn("x", "b", 8, 16384)},
			want:      "b",
		},
		{
			name:      "binpack: the most allocated host that still fits",
			vm:        testVM("web-01", withStrategy(banlieuev1.PlacementBinpack)),
			providers: []banlieuev1.Provider{testProvider("a", sized(8, 16384)), testProvider("b", sized(8, 16384)), testProvider("c", sized(8, 16384))},
			siblings:  []banlieuev1.VirtualMachine{placedOn("x", "a", 2, 4096), placedOn("y", "c", 2, 13312)},
			want:      "c",
		},
		{
			name:      "a host without room is filtered out (13312 + 2048 > 15360 allowed)",
			vm:        testVM("web-01", withStrategy(banlieuev1.PlacementBinpack)),
			providers: []banlieuev1.Provider{testProvider("a", sized(8, 16384)), testProvider("c", sized(8, 16384))},
			siblings:  []banlieuev1.VirtualMachine{placedOn("x", "a", 2, 4096), placedOn("y", "c", 2, 13313)},
			want:      "a",
		},
		{
			name:      "VMs of other namespaces on a shared host count",
			vm:        testVM("web-01"),
			providers: []banlieuev1.Provider{testProvider("a", sized(8, 16384)), testProvider("b", sized(8, 16384))},
			elsewhere: []banlieuev1.VirtualMachine{func() banlieuev1.VirtualMachine {
				vm := placedOn("z", "a", 2, 8192)
				vm.Namespace = "team-b"
				return vm
			}()},
			siblings: []banlieuev1.VirtualMachine{placedOn("x", "b", 2, 4096)},
			want:     "b",
		},
		{
			name:       "too large for every host: the reason names memory, the need and the best host's free memory",
			vm:         testVM("big"),
			class:      testClass(func(c *banlieuev1.VMClass) { c.Spec.Hardware.MemoryMiB = 200000 }),
			providers:  []banlieuev1.Provider{testProvider("a", sized(8, 24576)), testProvider("b", sized(8, 16384))},
			siblings:   []banlieuev1.VirtualMachine{placedOn("x", "a", 2, 4096)},
			want:       banlieuev1.ReasonInsufficientCapacity,
			wantReason: true,
			wantInMsg:  []string{"memory: VMClass small needs 200000 MiB", "the most free on any failure domain is 19456 MiB (a/a)"},
		},
		{
			name: "out of CPUs under the ratio: 8 CPUs at 100 % hold 8 vCPUs",
			vm:   testVM("web-09"),
			providers: []banlieuev1.Provider{testProvider("a", sized(8, 65536), func(p *banlieuev1.Provider) {
				p.Spec.Overcommit = &banlieuev1.ProviderOvercommit{CPUAllocationPercent: ptrTo[int32](100)}
			})},
			siblings:   []banlieuev1.VirtualMachine{placedOn("x", "a", 4, 1024), placedOn("y", "a", 3, 1024)},
			want:       banlieuev1.ReasonInsufficientCapacity,
			wantReason: true,
			wantInMsg:  []string{"cpus: VMClass small needs 2 vCPUs, the most free on any failure domain is 1 (a/a)"},
		},
		{
			name: "reserve and memory ratio: 4096 MiB host, 512 reserved, 50 % holds 1792 MiB",
			vm:   testVM("web-01"),
			providers: []banlieuev1.Provider{testProvider("a", sized(8, 4096), func(p *banlieuev1.Provider) {
				p.Spec.Overcommit = &banlieuev1.ProviderOvercommit{MemoryAllocationPercent: ptrTo[int32](50), ReservedMemoryMiB: ptrTo[int32](512)}
			})},
			want:       banlieuev1.ReasonInsufficientCapacity,
			wantReason: true,
			wantInMsg:  []string{"needs 2048 MiB", "is 1792 MiB"},
		},
		{
			name:      "a host that publishes no capacity is placed on unchecked",
			vm:        testVM("big"),
			class:     testClass(func(c *banlieuev1.VMClass) { c.Spec.Hardware.MemoryMiB = 200000 }),
			providers: []banlieuev1.Provider{testProvider("a", sized(8, 16384)), testProvider("b")},
			want:      "b",
		},
		{
			name:      "the VM's own recorded placement is not in its way, and it stays on a full host",
			vm:        testVM("web-01", func(vm *banlieuev1.VirtualMachine) { p := placedOn("web-01", "a", 2, 2048); vm.Status = p.Status }),
			providers: []banlieuev1.Provider{testProvider("a", sized(2, 3072)), testProvider("b", sized(64, 262144))},
			siblings:  []banlieuev1.VirtualMachine{placedOn("web-01", "a", 2, 2048)},
			want:      "a",
		},
		{
			name:      "cordoned: no new placement there",
			vm:        testVM("web-01"),
			providers: []banlieuev1.Provider{testProvider("a", sized(8, 16384), cordoned), testProvider("b", sized(8, 16384))},
			siblings:  []banlieuev1.VirtualMachine{placedOn("x", "b", 6, 12288)},
			want:      "b",
		},
		{
			name:      "cordoned: a VM already there stays",
			vm:        testVM("web-01", func(vm *banlieuev1.VirtualMachine) { p := placedOn("web-01", "a", 2, 2048); vm.Status = p.Status }),
			providers: []banlieuev1.Provider{testProvider("a", sized(8, 16384), cordoned), testProvider("b", sized(8, 16384))},
			want:      "a",
		},
		{
			name:       "every candidate cordoned",
			vm:         testVM("web-01"),
			providers:  []banlieuev1.Provider{testProvider("a", cordoned), testProvider("b", cordoned)},
			want:       banlieuev1.ReasonProviderUnschedulable,
			wantReason: true,
			wantInMsg:  []string{"cordoned", "a", "b"},
		},
		{
			name:      "required anti-affinity still filters before capacity",
			vm:        testVM("web-02", withAntiAffinity("required")),
			providers: []banlieuev1.Provider{testProvider("a", sized(64, 262144)), testProvider("b", sized(4, 8192))},
			siblings:  []banlieuev1.VirtualMachine{placedOn("web-01", "a", 2, 2048)},
			want:      "b",
		},
		{
			name:      "preferred anti-affinity outranks the load",
			vm:        testVM("web-02", withAntiAffinity("preferred")),
			providers: []banlieuev1.Provider{testProvider("a", sized(64, 262144)), testProvider("b", sized(4, 8192))},
			siblings: []banlieuev1.VirtualMachine{placedOn("web-01", "a", 2, 2048), func() banlieuev1.VirtualMachine {
				vm := placedOn("db", "b", 2, 4096)
				vm.Labels = map[string]string{"app": "db"}
				return vm
			}()},
			want: "b",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			class := tt.class
			if class == nil {
				class = testClass()
			}
			d, err := schedule(scheduleInput{VM: tt.vm, Class: class, Image: ready, Providers: tt.providers,
				Siblings: tt.siblings, Elsewhere: tt.elsewhere})
			if tt.wantReason {
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
			if err != nil {
				t.Fatalf("schedule: %v; want %s", err, tt.want)
			}
			if d.Provider.Name != tt.want {
				t.Errorf("placed on %s, want %s", d.Provider.Name, tt.want)
			}
		})
	}
}

func ptrTo[T any](v T) *T { return &v }

// Random fleets (1 to 12 hosts of different sizes and overcommit policies, some cordoned, some
// sharing), random bursts of up to 200 VMs of mixed classes and strategies, each decided on the
// placements before it as the controller's assumed placements give them: no host ever holds
// more than its allowance, a VM is refused InsufficientCapacity only when no open host has room
// for it, and the same burst over the same fleet is placed the same way.
func TestSchedulePropertyNoHostOverfilled(t *testing.T) {
	classes := []*banlieuev1.VMClass{
		testClass(func(c *banlieuev1.VMClass) { c.Name, c.Spec.Hardware.CPUs, c.Spec.Hardware.MemoryMiB = "tiny", 1, 512 }),
		testClass(),
		testClass(func(c *banlieuev1.VMClass) {
			c.Name, c.Spec.Hardware.CPUs, c.Spec.Hardware.MemoryMiB = "large", 8, 16384
		}),
		testClass(func(c *banlieuev1.VMClass) {
			c.Name, c.Spec.Hardware.CPUs, c.Spec.Hardware.MemoryMiB = "huge", 32, 131072
		}),
	}
	for seed := range uint64(50) {
		rng := rand.New(rand.NewPCG(seed, 44))
		var providers []banlieuev1.Provider
		var rows []banlieuev1.ProviderImageStatus
		for i := range 1 + rng.IntN(12) {
			name := fmt.Sprintf("kvm-%02d", i)
			mem := int64(4096 << rng.IntN(7)) // 4 GiB to 256 GiB
			p := testProvider(name, sized(int32(4<<rng.IntN(5)), mem))
			if rng.IntN(3) == 0 {
				p.Spec.Overcommit = &banlieuev1.ProviderOvercommit{CPUAllocationPercent: ptrTo(int32(50 + rng.IntN(800))),
					MemoryAllocationPercent: ptrTo(int32(50 + rng.IntN(150))), ReservedMemoryMiB: ptrTo(int32(rng.IntN(4096)))}
			}
			p.Spec.Unschedulable = rng.IntN(8) == 0
			providers = append(providers, p)
			rows = append(rows, readyRow(name))
		}
		image := testImage(rows...)
		type vmSpec struct {
			class    int
			strategy string
		}
		burst := make([]vmSpec, rng.IntN(200))
		for i := range burst {
			burst[i].class = rng.IntN(len(classes))
			if rng.IntN(2) == 0 {
				burst[i].strategy = banlieuev1.PlacementBinpack
			}
		}
		run := func() []string {
			var placed []banlieuev1.VirtualMachine
			var out []string
			for i, spec := range burst {
				vm := testVM(fmt.Sprintf("vm-%03d", i), withStrategy(spec.strategy))
				class := classes[spec.class]
				d, err := schedule(scheduleInput{VM: vm, Class: class, Image: image, Providers: providers, Siblings: placed})
				if err != nil {
					se := err.(*scheduleError)
					if se.Reason != banlieuev1.ReasonInsufficientCapacity && se.Reason != banlieuev1.ReasonProviderUnschedulable {
						t.Fatalf("seed %d, %s: %v", seed, vm.Name, err)
					}
					if se.Reason == banlieuev1.ReasonInsufficientCapacity {
						assertNoRoom(t, seed, providers, placed, classDemand(class))
					}
					out = append(out, se.Reason)
					continue
				}
				if d.Provider.Spec.Unschedulable {
					t.Fatalf("seed %d: %s placed on cordoned %s", seed, vm.Name, d.Provider.Name)
				}
				vm.Status.Scheduled = ptrTo(d.placement())
				placed = append(placed, *vm)
				out = append(out, d.Provider.Name)
			}
			for _, p := range providers {
				a, _ := allowed(&p, p.Status.FailureDomains[0])
				u := allocations(testVM("none"), placed, nil)[fdKey{testNS, p.Name, p.Name}]
				if u.cpus > a.cpus || u.memoryMiB > a.memoryMiB {
					t.Fatalf("seed %d: %s holds %+v, more than its allowance %+v", seed, p.Name, u, a)
				}
			}
			return out
		}
		first, second := run(), run()
		if strings.Join(first, ",") != strings.Join(second, ",") {
			t.Fatalf("seed %d: the same burst was placed differently:\n%v\n%v", seed, first, second)
		}
	}
}

// assertNoRoom fails unless every open host lacks room for need.
func assertNoRoom(t *testing.T, seed uint64, providers []banlieuev1.Provider, placed []banlieuev1.VirtualMachine, need demand) {
	t.Helper()
	used := allocations(testVM("none"), placed, nil)
	for i := range providers {
		p := &providers[i]
		if p.Spec.Unschedulable {
			continue
		}
		f := fitOf(candidate{provider: p, fd: p.Status.FailureDomains[0]}, used)
		if f.holds(need) {
			t.Fatalf("seed %d: refused InsufficientCapacity, but %s has %+v free for %+v", seed, p.Name, f.free, need)
		}
	}
}

func TestAllocatedOn(t *testing.T) {
	small := &banlieuev1.VMClass{Spec: banlieuev1.VMClassSpec{Hardware: banlieuev1.ClassHardware{CPUs: 2, MemoryMiB: 2048}}}
	classes := map[string]*banlieuev1.VMClass{"small": small}
	unrecorded := func(name, class string) banlieuev1.VirtualMachine {
		vm := placedOn(name, "kvm-a", 0, 0)
		vm.Spec.ClassRef.Name = class
		return vm
	}
	elsewhere := placedOn("other-ns", "kvm-a", 8, 8192)
	elsewhere.Status.Scheduled.ProviderNamespace = "tenant-b" // a Provider of the same name in another namespace
	retired := placedOn("on-retired-fd", "kvm-a", 1, 512)
	retired.Status.Scheduled.FailureDomain = "kvm-a-old"
	for _, tc := range []struct {
		name   string
		p      banlieuev1.Provider
		placed []banlieuev1.VirtualMachine
		want   []banlieuev1.FailureDomainAllocation
	}{
		{"an empty host: no entry", testProvider("kvm-a", sized(8, 16384)), nil, nil},
		{"a host whose VMs are all elsewhere: no entry", testProvider("kvm-a", sized(8, 16384)),
			[]banlieuev1.VirtualMachine{placedOn("c", "kvm-b", 2, 2048)}, nil},
		{"placed VMs summed; another Provider's and another namespace's not", testProvider("kvm-a", sized(8, 16384)),
			[]banlieuev1.VirtualMachine{placedOn("a", "kvm-a", 2, 2048), placedOn("b", "kvm-a", 4, 4096), placedOn("c", "kvm-b", 16, 1024), elsewhere},
			[]banlieuev1.FailureDomainAllocation{{Name: "kvm-a", VirtualMachines: 2, CPUs: 6, MemoryMiB: 6144,
				AllowedCPUs: ptrTo[int64](32), AllowedMemoryMiB: ptrTo[int64](15360)}}},
		{"a placement recorded without figures counts its class's; an unknown class counts the VM alone",
			testProvider("kvm-a"), []banlieuev1.VirtualMachine{unrecorded("old", "small"), unrecorded("gone", "deleted-class")},
			[]banlieuev1.FailureDomainAllocation{{Name: "kvm-a", VirtualMachines: 2, CPUs: 2, MemoryMiB: 2048}}},
		{"the Provider's overcommit policy sets the allowance", testProvider("kvm-a", sized(8, 16384), func(p *banlieuev1.Provider) {
			p.Spec.Overcommit = &banlieuev1.ProviderOvercommit{CPUAllocationPercent: ptrTo[int32](100),
				MemoryAllocationPercent: ptrTo[int32](150), ReservedMemoryMiB: ptrTo[int32](0)}
		}), []banlieuev1.VirtualMachine{placedOn("a", "kvm-a", 2, 2048)},
			[]banlieuev1.FailureDomainAllocation{{Name: "kvm-a", VirtualMachines: 1, CPUs: 2, MemoryMiB: 2048,
				AllowedCPUs: ptrTo[int64](8), AllowedMemoryMiB: ptrTo[int64](24576)}}},
		{"a VM on a failure domain no longer published keeps its own entry, in name order", testProvider("kvm-a", sized(8, 16384)),
			[]banlieuev1.VirtualMachine{retired, placedOn("a", "kvm-a", 2, 2048)},
			[]banlieuev1.FailureDomainAllocation{
				{Name: "kvm-a", VirtualMachines: 1, CPUs: 2, MemoryMiB: 2048, AllowedCPUs: ptrTo[int64](32), AllowedMemoryMiB: ptrTo[int64](15360)},
				{Name: "kvm-a-old", VirtualMachines: 1, CPUs: 1, MemoryMiB: 512}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := allocatedOn(&tc.p, tc.placed, classes)
			if !equality.Semantic.DeepEqual(got, tc.want) {
				t.Errorf("allocatedOn =\n%s\nwant\n%s", allocString(got), allocString(tc.want))
			}
		})
	}
}

func allocString(as []banlieuev1.FailureDomainAllocation) string {
	var b strings.Builder
	for _, a := range as {
		fmt.Fprintf(&b, "  %s: %d VMs, %d vCPUs, %d MiB, allowed %v vCPUs %v MiB\n", a.Name, a.VirtualMachines, a.CPUs, a.MemoryMiB,
			deref(a.AllowedCPUs), deref(a.AllowedMemoryMiB))
	}
	return b.String()
}

func deref(p *int64) any {
	if p == nil {
		return "unset"
	}
	return *p
}
