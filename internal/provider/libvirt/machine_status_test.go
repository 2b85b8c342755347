package libvirt

import (
	"fmt"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	infrav1 "banlieue.io/banlieue/api/infrastructure/v1alpha1"
	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
	"banlieue.io/banlieue/pkg/libvirt"
)

// A guest may hold more addresses than the CRD admits (a Kubernetes node in IPVS mode holds
// every Service's): the status keeps the first usable ones, so its write is never refused.
func TestSucceededStatusKeepsAtMostMaxAddresses(t *testing.T) {
	addrs := []libvirt.IPAddress{{Addr: "127.0.0.1"}, {Addr: "fe80::1"}}
	for i := range 300 {
		addrs = append(addrs, libvirt.IPAddress{Addr: fmt.Sprintf("10.96.%d.%d", i/256, i%256)})
	}
	m := &infrav1.LibvirtMachine{}
	st := succeededStatus(m, observation{state: libvirt.DomainRunning, power: powerOutcome{state: libvirt.DomainRunning}, addresses: addrs})
	if len(st.Addresses) != banlieuev1.MaxMachineAddresses {
		t.Fatalf("%d addresses, want %d", len(st.Addresses), banlieuev1.MaxMachineAddresses)
	}
	if first, last := st.Addresses[0].Address, st.Addresses[len(st.Addresses)-1].Address; first != "10.96.0.0" || last != "10.96.0.31" {
		t.Errorf("kept %s..%s, want the first usable ones 10.96.0.0..10.96.0.31", first, last)
	}
}

// A grow refusal is its own condition, DisksGrown, beside a Ready the refusal leaves alone, and
// goes once the disks have their size; status.diskSizes is what growDisks recorded.
func TestSucceededStatusDisksGrown(t *testing.T) {
	m := &infrav1.LibvirtMachine{}
	m.Generation = 2
	running := observation{state: libvirt.DomainRunning, power: powerOutcome{state: libvirt.DomainRunning}}
	refused := running
	refused.grow = growOutcome{sizes: []infrav1.DiskSize{{Name: "os", SizeGiB: 20}}, refusal: "the host cannot grow spec.disks[0] (os)"}
	st := succeededStatus(m, refused)
	c := meta.FindStatusCondition(st.Conditions, infrav1.ConditionDisksGrown)
	if c == nil || c.Status != metav1.ConditionFalse || c.Reason != infrav1.ReasonDiskGrowUnsupported || c.ObservedGeneration != 2 ||
		c.Message != refused.grow.refusal {
		t.Fatalf("DisksGrown = %+v, want False DiskGrowUnsupported for generation 2", c)
	}
	if r := meta.FindStatusCondition(st.Conditions, banlieuev1.ConditionReady); r == nil || r.Reason != infrav1.ReasonDomainRunning {
		t.Errorf("Ready = %+v, want DomainRunning: the domain runs on", r)
	}
	if len(st.DiskSizes) != 1 || st.DiskSizes[0] != refused.grow.sizes[0] {
		t.Errorf("diskSizes = %+v, want %+v", st.DiskSizes, refused.grow.sizes)
	}

	m.Status = st
	grown := running
	grown.grow = growOutcome{sizes: []infrav1.DiskSize{{Name: "os", SizeGiB: 40}}}
	st = succeededStatus(m, grown)
	if c := meta.FindStatusCondition(st.Conditions, infrav1.ConditionDisksGrown); c != nil {
		t.Errorf("DisksGrown = %+v after the disks grew, want it gone", c)
	}
	if len(st.DiskSizes) != 1 || st.DiskSizes[0].SizeGiB != 40 {
		t.Errorf("diskSizes = %+v, want os at 40", st.DiskSizes)
	}
}
