package controller

import (
	"cmp"
	"fmt"
	"slices"

	"k8s.io/utils/ptr"

	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
)

// demand is what a VM takes on the failure domain it is placed on.
type demand struct {
	cpus      int64
	memoryMiB int64
}

// fdKey names a failure domain across Providers and namespaces.
type fdKey struct {
	namespace, provider, fd string
}

// allowance is what a failure domain may hold after its Provider's overcommit policy.
type allowance struct {
	cpus      int64 // vCPUs, cpus × cpuAllocationPercent / 100
	memoryMiB int64 // (memory − reservedMemoryMiB) × memoryAllocationPercent / 100
}

// allowed is fd's allowance under p's overcommit policy, and false when fd publishes no
// capacity (a provider that does not read it): such a domain is placed on unchecked.
func allowed(p *banlieuev1.Provider, fd banlieuev1.FailureDomain) (allowance, bool) {
	if fd.Capacity == nil {
		return allowance{}, false
	}
	cpuPct, memPct, reserved := int64(banlieuev1.DefaultCPUAllocationPercent), int64(banlieuev1.DefaultMemoryAllocationPercent),
		int64(banlieuev1.DefaultReservedMemoryMiB)
	if o := p.Spec.Overcommit; o != nil {
		if o.CPUAllocationPercent != nil {
			cpuPct = int64(*o.CPUAllocationPercent)
		}
		if o.MemoryAllocationPercent != nil {
			memPct = int64(*o.MemoryAllocationPercent)
		}
		if o.ReservedMemoryMiB != nil {
			reserved = int64(*o.ReservedMemoryMiB)
		}
	}
	return allowance{
		cpus:      int64(fd.Capacity.CPUs) * cpuPct / 100,
		memoryMiB: max(0, fd.Capacity.MemoryMiB-reserved) * memPct / 100,
	}, true
}

// classDemand is what a VM of class takes.
func classDemand(class *banlieuev1.VMClass) demand {
	return demand{cpus: int64(class.Spec.Hardware.CPUs), memoryMiB: int64(class.Spec.Hardware.MemoryMiB)}
}

// placedDemand is what a placed VM takes: the figures its placement recorded, or, for a
// placement recorded before they were, its class's (classes, by name); unknown, nothing.
func placedDemand(vm *banlieuev1.VirtualMachine, classes map[string]*banlieuev1.VMClass) demand {
	s := vm.Status.Scheduled
	if s.CPUs != 0 || s.MemoryMiB != 0 {
		return demand{cpus: int64(s.CPUs), memoryMiB: int64(s.MemoryMiB)}
	}
	if c, ok := classes[vm.Spec.ClassRef.Name]; ok {
		return classDemand(c)
	}
	return demand{}
}

// allocations sums, per failure domain, what the placed VMs take, the VM being decided (by
// namespace and name) excluded: its own placement is never in its way. A VM listed twice (a
// move assumed but not yet written) counts in both places.
func allocations(self *banlieuev1.VirtualMachine, placed []banlieuev1.VirtualMachine,
	classes map[string]*banlieuev1.VMClass) map[fdKey]demand {
	out := map[fdKey]demand{}
	for i := range placed {
		vm := &placed[i]
		s := vm.Status.Scheduled
		if s == nil || (vm.Namespace == self.Namespace && vm.Name == self.Name) {
			continue
		}
		k := fdKey{namespace: cmp.Or(s.ProviderNamespace, vm.Namespace), provider: s.ProviderName, fd: s.FailureDomain}
		d := placedDemand(vm, classes)
		sum := out[k]
		sum.cpus += d.cpus
		sum.memoryMiB += d.memoryMiB
		out[k] = sum
	}
	return out
}

// fit is one candidate's room for the VM.
type fit struct {
	known     bool // the failure domain publishes its capacity
	free      demand
	allowance allowance
	used      demand
}

func (f fit) holds(need demand) bool {
	return !f.known || (need.cpus <= f.free.cpus && need.memoryMiB <= f.free.memoryMiB)
}

// load is the share of the allowance taken once the VM is placed, the mean of CPU and memory;
// Spread picks the lowest, Binpack the highest. A domain of unknown capacity counts as empty.
func (f fit) load(need demand) float64 {
	if !f.known {
		return 0
	}
	return (share(f.used.cpus+need.cpus, f.allowance.cpus) + share(f.used.memoryMiB+need.memoryMiB, f.allowance.memoryMiB)) / 2
}

func share(used, allowed int64) float64 {
	if allowed <= 0 {
		return 1
	}
	return float64(used) / float64(allowed)
}

func fitOf(c candidate, used map[fdKey]demand) fit {
	a, ok := allowed(c.provider, c.fd)
	if !ok {
		return fit{}
	}
	u := used[fdKey{namespace: c.provider.Namespace, provider: c.provider.Name, fd: c.fd.Name}]
	return fit{known: true, allowance: a, used: u, free: demand{cpus: a.cpus - u.cpus, memoryMiB: a.memoryMiB - u.memoryMiB}}
}

// insufficient explains why no candidate can hold need: for each resource no candidate has
// enough of, the need and the most any has free; when each resource is free somewhere but
// nowhere both, the best candidate for memory.
func insufficient(vm *banlieuev1.VirtualMachine, class *banlieuev1.VMClass, need demand, cands []candidate, fits []fit) *scheduleError {
	bestCPU, bestMem := -1, -1
	for i, f := range fits {
		if bestCPU < 0 || f.free.cpus > fits[bestCPU].free.cpus {
			bestCPU = i
		}
		if bestMem < 0 || f.free.memoryMiB > fits[bestMem].free.memoryMiB {
			bestMem = i
		}
	}
	where := func(i int) string { return providerLabel(vm, cands[i].provider) + "/" + cands[i].fd.Name }
	var parts []string
	if need.memoryMiB > fits[bestMem].free.memoryMiB {
		parts = append(parts, fmt.Sprintf("memory: VMClass %s needs %d MiB, the most free on any failure domain is %d MiB (%s)",
			class.Name, need.memoryMiB, max(0, fits[bestMem].free.memoryMiB), where(bestMem)))
	}
	if need.cpus > fits[bestCPU].free.cpus {
		parts = append(parts, fmt.Sprintf("cpus: VMClass %s needs %d vCPUs, the most free on any failure domain is %d (%s)",
			class.Name, need.cpus, max(0, fits[bestCPU].free.cpus), where(bestCPU)))
	}
	if len(parts) == 0 {
		parts = append(parts, fmt.Sprintf("memory and cpus: VMClass %s needs %d MiB and %d vCPUs, no failure domain has both free; %s has %d MiB and %d vCPUs free",
			class.Name, need.memoryMiB, need.cpus, where(bestMem), fits[bestMem].free.memoryMiB, fits[bestMem].free.cpus))
	}
	msg := "no failure domain has room for the VM (after its Provider's overcommit, counting the VMs placed there): " + parts[0]
	if len(parts) > 1 {
		msg += "; " + parts[1]
	}
	return &scheduleError{banlieuev1.ReasonInsufficientCapacity, msg}
}

// allocatedOn is status.allocated of Provider p from the VMs placed on it (classes, by name,
// for placements recorded without their figures): one entry per failure domain with a VM
// placed on it, in name order, each beside its allowance when the domain publishes its
// capacity. It counts as allocations does, so the status shows what the scheduler sees. A
// Provider with nothing placed gets no entry, so registering a host writes nothing here.
func allocatedOn(p *banlieuev1.Provider, placed []banlieuev1.VirtualMachine,
	classes map[string]*banlieuev1.VMClass) []banlieuev1.FailureDomainAllocation {
	byName := map[string]*banlieuev1.FailureDomainAllocation{}
	entry := func(name string) *banlieuev1.FailureDomainAllocation {
		if a, ok := byName[name]; ok {
			return a
		}
		a := &banlieuev1.FailureDomainAllocation{Name: name}
		byName[name] = a
		return a
	}
	for _, fd := range p.Status.FailureDomains {
		a := entry(fd.Name)
		if allow, ok := allowed(p, fd); ok {
			a.AllowedCPUs, a.AllowedMemoryMiB = &allow.cpus, &allow.memoryMiB
		}
	}
	for i := range placed {
		vm := &placed[i]
		if !onProvider(vm, p) {
			continue
		}
		d := placedDemand(vm, classes)
		a := entry(vm.Status.Scheduled.FailureDomain)
		a.VirtualMachines++
		a.CPUs += d.cpus
		a.MemoryMiB += d.memoryMiB
	}
	out := make([]banlieuev1.FailureDomainAllocation, 0, len(byName))
	for _, a := range byName {
		if a.VirtualMachines > 0 {
			out = append(out, *a)
		}
	}
	slices.SortFunc(out, func(a, b banlieuev1.FailureDomainAllocation) int { return cmp.Compare(a.Name, b.Name) })
	if len(out) > maxAllocated {
		out = out[:maxAllocated]
	}
	return out
}

// maxAllocated bounds status.allocated (its CRD maxItems).
const maxAllocated = 1024

// datastoreNeed is what the VM's disks take on each datastore its class's storage classes map
// to on p, in GiB at their full size (thin disks included: banlieue does not overcommit
// storage), the VM's disk overrides applied.
func datastoreNeed(vm *banlieuev1.VirtualMachine, class *banlieuev1.VMClass, p *banlieuev1.Provider) map[string]int64 {
	return diskNeed(vm, class, resolveStorage(class, p), map[string]int64{})
}

// diskNeed adds to out the GiB of each of the class's disks, the VM's overrides applied, on the
// backend storage[i] names for disk i; storage of another length (a placement recorded for an
// older class) adds nothing, as its disks cannot be matched.
func diskNeed(vm *banlieuev1.VirtualMachine, class *banlieuev1.VMClass, storage []banlieuev1.ResolvedMapping, out map[string]int64) map[string]int64 {
	disks := class.Spec.Hardware.Disks
	if len(storage) != len(disks) {
		return out
	}
	_, _, overrides := machineSize(vm, class)
	for i, d := range disks {
		size := d.SizeGiB
		if j := slices.IndexFunc(overrides, func(o banlieuev1.DiskOverride) bool { return o.Name == d.Name }); j >= 0 {
			size = overrides[j].SizeGiB
		}
		out[storage[i].BackendID] += int64(size)
	}
	return out
}

// unprovisioned sums, per failure domain and backend storage, the disks of the placed VMs whose
// machines are not provisioned yet (the VM being decided excluded; classes by name): a
// datastore's free space as vCenter reports it does not show them until their clones are made.
// A VM whose class is unknown adds nothing.
func unprovisioned(self *banlieuev1.VirtualMachine, placed []banlieuev1.VirtualMachine,
	classes map[string]*banlieuev1.VMClass) map[fdKey]map[string]int64 {
	out := map[fdKey]map[string]int64{}
	for i := range placed {
		vm := &placed[i]
		s := vm.Status.Scheduled
		if s == nil || (vm.Namespace == self.Namespace && vm.Name == self.Name) || machineProvisioned(&vm.Status) {
			continue
		}
		class, ok := classes[vm.Spec.ClassRef.Name]
		if !ok {
			continue
		}
		k := fdKey{namespace: cmp.Or(s.ProviderNamespace, vm.Namespace), provider: s.ProviderName, fd: s.FailureDomain}
		if out[k] == nil {
			out[k] = map[string]int64{}
		}
		diskNeed(vm, class, s.ResolvedStorage, out[k])
	}
	return out
}

// machineProvisioned says whether a VM's machine reported its provisioning done (its disks made).
func machineProvisioned(st *banlieuev1.VirtualMachineStatus) bool {
	return st.Initialization != nil && ptr.Deref(st.Initialization.Provisioned, false)
}

// datastoreShortfall says why fd cannot hold the VM's disks: the first datastore, by name, of
// those fd publishes the free space of (capacity.datastores) with less free than the VM's disks
// on it need, once the disks of the VMs placed there and not yet provisioned (promised, by
// datastore) are taken off; "" when each fits, or fd publishes none (a libvirt host, or a
// provider that does not read it). The free space is as the provider last read it, so a clone
// made since that read and not yet in it is not taken off, and vCenter refuses a clone that no
// longer fits.
func datastoreShortfall(need, promised map[string]int64, fd banlieuev1.FailureDomain) string {
	if fd.Capacity == nil {
		return ""
	}
	for _, ds := range fd.Capacity.Datastores {
		n, ok := need[ds.Name]
		if !ok {
			continue
		}
		p := promised[ds.Name]
		if n <= ds.AvailableGiB-p {
			continue
		}
		if p > 0 {
			return fmt.Sprintf("datastore %s has %d GiB free, %d GiB of it promised to VMs placed there and not yet provisioned, "+
				"the VM's disks on it need %d GiB", ds.Name, max(0, ds.AvailableGiB), p, n)
		}
		return fmt.Sprintf("datastore %s has %d GiB free, the VM's disks on it need %d GiB", ds.Name, max(0, ds.AvailableGiB), n)
	}
	return ""
}
