package controller

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "banlieue.io/banlieue/api/infrastructure/v1alpha1"
	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
	"banlieue.io/banlieue/internal/ssa"
	"banlieue.io/banlieue/internal/testenv"
)

// sizedProvider is the guide's Provider whose failure domain publishes a host of cpus and
// memoryMiB, as the libvirt provider does after its probe.
func (s *suite) sizedProvider(ctx context.Context, t *testing.T, ns, name string, cpus int32, memoryMiB int64) {
	t.Helper()
	s.provider(ctx, t, ns, name, "libvirt")
	var p banlieuev1.Provider
	if err := s.c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &p); err != nil {
		t.Fatal(err)
	}
	status := p.Status.DeepCopy()
	status.Workload = nil
	status.FailureDomains[0].Capacity = &banlieuev1.FailureDomainCapacity{CPUs: cpus, MemoryMiB: memoryMiB}
	if err := ssa.ApplyStatus(ctx, s.c, &p, status, providerManager); err != nil {
		t.Fatal(err)
	}
}

// testCapacity: a VM too large for every host is refused InsufficientCapacity; a burst of six
// VMs over three equal hosts is spread two per host; a cordoned host takes no new VM and keeps
// its own.
func (s *suite) testCapacity(ctx context.Context, t *testing.T) {
	ns := "ns-m"
	s.namespace(ctx, t, ns)
	hosts := []string{"kvm-c", "kvm-a", "kvm-b"}
	var rows []banlieuev1.ProviderImageStatus
	for _, h := range hosts {
		s.sizedProvider(ctx, t, ns, h, 8, 16384)
		rows = append(rows, readyRowIn(ns, h))
	}
	s.image(ctx, t, "img-m", banlieuev1.InstallImmediate, rows...)
	huge := guideClass("huge-m", false)
	huge.Spec.Hardware.MemoryMiB = 200000
	s.create(ctx, t, huge)

	s.create(ctx, t, guideVM(ns, "big", "huge-m", "img-m", nil))
	vm := s.waitVM(ctx, t, ns, "big", "Scheduled=False InsufficientCapacity", func(vm *banlieuev1.VirtualMachine) bool {
		return hasCondition(vm.Status.Conditions, banlieuev1.ConditionScheduled, metav1.ConditionFalse, banlieuev1.ReasonInsufficientCapacity)
	})
	msg := meta.FindStatusCondition(vm.Status.Conditions, banlieuev1.ConditionScheduled).Message
	for _, want := range []string{"memory", "needs 200000 MiB", "15360 MiB"} {
		if !strings.Contains(msg, want) {
			t.Errorf("InsufficientCapacity message %q lacks %q", msg, want)
		}
	}
	s.expectNoMachine(ctx, t, ns, "big")

	for i := range 6 {
		s.create(ctx, t, guideVM(ns, fmt.Sprintf("web-%02d", i), "small", "img-m", nil))
	}
	per := s.placements(ctx, t, ns, "web-", 6)
	for _, h := range hosts {
		if per[h] != 2 {
			t.Fatalf("placements per host = %v, want two on each of %v", per, hosts)
		}
	}
	// Each host's status.allocated shows its two VMs beside its allowance (8 CPUs at 400 %,
	// 16384 MiB less the 1024 MiB reserve); the refused VM is allocated nowhere.
	var small banlieuev1.VMClass
	if err := s.c.Get(ctx, client.ObjectKey{Name: "small"}, &small); err != nil {
		t.Fatal(err)
	}
	for _, h := range hosts {
		want := banlieuev1.FailureDomainAllocation{Name: h, VirtualMachines: 2, CPUs: 2 * int64(small.Spec.Hardware.CPUs),
			MemoryMiB: 2 * int64(small.Spec.Hardware.MemoryMiB), AllowedCPUs: ptr.To[int64](32), AllowedMemoryMiB: ptr.To[int64](15360)}
		poll(ctx, t, s.c, client.ObjectKey{Namespace: ns, Name: h}, &banlieuev1.Provider{}, fmt.Sprintf("status.allocated %+v", want),
			func(p *banlieuev1.Provider) bool {
				return len(p.Status.Allocated) == 1 && equality.Semantic.DeepEqual(p.Status.Allocated[0], want)
			})
	}

	// Cordoned, all three: a new VM is refused, which also shows the controller's cache has
	// seen the cordons before kvm-b and kvm-c are opened again.
	for _, h := range hosts {
		s.patchProvider(ctx, t, ns, h, func(p *banlieuev1.Provider) { p.Spec.Unschedulable = true })
	}
	s.create(ctx, t, guideVM(ns, "late-00", "small", "img-m", nil))
	s.waitVM(ctx, t, ns, "late-00", "Scheduled=False ProviderUnschedulable", func(vm *banlieuev1.VirtualMachine) bool {
		return hasCondition(vm.Status.Conditions, banlieuev1.ConditionScheduled, metav1.ConditionFalse, banlieuev1.ReasonProviderUnschedulable)
	})
	for _, h := range []string{"kvm-b", "kvm-c"} {
		s.patchProvider(ctx, t, ns, h, func(p *banlieuev1.Provider) { p.Spec.Unschedulable = false })
	}
	for i := 1; i < 4; i++ {
		s.create(ctx, t, guideVM(ns, fmt.Sprintf("late-%02d", i), "small", "img-m", nil))
	}
	if late := s.placements(ctx, t, ns, "late-", 4); late["kvm-a"] != 0 {
		t.Fatalf("placements after cordoning kvm-a = %v, want none on kvm-a", late)
	}
	if per := s.placements(ctx, t, ns, "web-", 6); per["kvm-a"] != 2 {
		t.Fatalf("the VMs on cordoned kvm-a moved: %v", per)
	}
}

// datastoreProvider publishes the free GiB of the datastore "default" (where class small's 20
// GiB disk goes) on Provider ns/name's failure domain, as the vsphere provider's probe does.
func (s *suite) datastoreProvider(ctx context.Context, t *testing.T, ns, name string, freeGiB int64) {
	t.Helper()
	var p banlieuev1.Provider
	if err := s.c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &p); err != nil {
		t.Fatal(err)
	}
	status := p.Status.DeepCopy()
	status.Workload = nil
	status.FailureDomains[0].Capacity = &banlieuev1.FailureDomainCapacity{CPUs: 64, MemoryMiB: 262144,
		Datastores: []banlieuev1.PoolCapacity{{Name: "default", CapacityGiB: 1024, AvailableGiB: freeGiB}}}
	if err := ssa.ApplyStatus(ctx, s.c, &p, status, providerManager); err != nil {
		t.Fatal(err)
	}
}

// testDatastorePromised: a VM placed and not yet provisioned holds its disks' space on the
// datastore, so the next VM that would overfill it is refused, naming the promise; once the
// first is provisioned and the provider's read shows its disk, it is not counted twice; more
// free space places the second.
func (s *suite) testDatastorePromised(ctx context.Context, t *testing.T) {
	ns := "ns-ds"
	s.namespace(ctx, t, ns)
	s.provider(ctx, t, ns, "vc", "libvirt")
	s.datastoreProvider(ctx, t, ns, "vc", 30)
	s.image(ctx, t, "img-ds", banlieuev1.InstallImmediate, readyRowIn(ns, "vc"))

	s.create(ctx, t, guideVM(ns, "first", "small", "img-ds", nil))
	m := s.waitMachine(ctx, t, ns, "first")
	s.create(ctx, t, guideVM(ns, "second", "small", "img-ds", nil))
	refused := func(msg string) {
		t.Helper()
		s.waitVM(ctx, t, ns, "second", "InsufficientCapacity: "+msg, func(vm *banlieuev1.VirtualMachine) bool {
			c := meta.FindStatusCondition(vm.Status.Conditions, banlieuev1.ConditionScheduled)
			return c != nil && c.Status == metav1.ConditionFalse && c.Reason == banlieuev1.ReasonInsufficientCapacity && strings.HasSuffix(c.Message, msg)
		})
	}
	refused("vc/vc: datastore default has 30 GiB free, 20 GiB of it promised to VMs placed there and not yet provisioned, the VM's disks on it need 20 GiB")
	s.expectNoMachine(ctx, t, ns, "second")

	s.machineStatus(ctx, t, m, infrav1.LibvirtMachineStatus{Initialization: &banlieuev1.InitializationStatus{Provisioned: ptr.To(true)}})
	s.waitVM(ctx, t, ns, "first", "initialization.provisioned", func(vm *banlieuev1.VirtualMachine) bool { return machineProvisioned(&vm.Status) })
	s.datastoreProvider(ctx, t, ns, "vc", 10)
	refused("vc/vc: datastore default has 10 GiB free, the VM's disks on it need 20 GiB")

	s.datastoreProvider(ctx, t, ns, "vc", 40)
	s.waitVM(ctx, t, ns, "second", "Scheduled=True on vc", func(vm *banlieuev1.VirtualMachine) bool {
		return hasCondition(vm.Status.Conditions, banlieuev1.ConditionScheduled, metav1.ConditionTrue, banlieuev1.ReasonScheduled) &&
			vm.Status.Scheduled != nil && vm.Status.Scheduled.ProviderName == "vc"
	})
}

func (s *suite) patchProvider(ctx context.Context, t *testing.T, ns, name string, mutate func(*banlieuev1.Provider)) {
	t.Helper()
	testenv.Patch(ctx, t, s.c, client.ObjectKey{Namespace: ns, Name: name}, &banlieuev1.Provider{}, mutate)
}

// placements waits until n VMs named prefix* of ns are scheduled and counts them per Provider.
func (s *suite) placements(ctx context.Context, t *testing.T, ns, prefix string, n int) map[string]int {
	t.Helper()
	var per map[string]int
	testenv.Eventually(t, 3*waitTimeout, fmt.Sprintf("%d VMs %s* scheduled", n, prefix), func() error {
		var vms banlieuev1.VirtualMachineList
		if err := s.c.List(ctx, &vms, client.InNamespace(ns)); err != nil {
			return err
		}
		per = map[string]int{}
		placed := 0
		for _, vm := range vms.Items {
			if !strings.HasPrefix(vm.Name, prefix) || vm.Status.Scheduled == nil ||
				!hasCondition(vm.Status.Conditions, banlieuev1.ConditionScheduled, metav1.ConditionTrue, banlieuev1.ReasonScheduled) {
				continue
			}
			per[vm.Status.Scheduled.ProviderName]++
			placed++
		}
		if placed != n {
			return fmt.Errorf("%d of %d scheduled: %v", placed, n, per)
		}
		return nil
	})
	return per
}

// testRetiredRows: the rows a deleted Provider's process wrote into an image are removed; the
// rows of Providers that exist stay.
func (s *suite) testRetiredRows(ctx context.Context, t *testing.T) {
	ns := "ns-n"
	s.namespace(ctx, t, ns)
	s.provider(ctx, t, ns, "stays", "libvirt")
	s.provider(ctx, t, ns, "retired", "libvirt")
	s.image(ctx, t, "img-n", banlieuev1.InstallImmediate, readyRowIn(ns, "stays"), readyRowIn(ns, "retired"))
	// A row of a Provider that has existed in no namespace the cache knows, too.
	s.imageRows(ctx, t, "img-n", readyRowIn(ns, "stays"), readyRowIn(ns, "retired"), readyRowIn("ns-n-gone", "elsewhere"))
	if err := s.c.Delete(ctx, &banlieuev1.Provider{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "retired"}}); err != nil {
		t.Fatal(err)
	}
	img := s.waitImage(ctx, t, "img-n", func(img *banlieuev1.VMImage) bool {
		return len(img.Status.PerProvider) == 1
	})
	if row := img.Status.PerProvider[0]; row.ProviderName != "stays" || row.ProviderNamespace != ns {
		t.Fatalf("rows left = %+v, want the row of %s/stays", img.Status.PerProvider, ns)
	}
}
