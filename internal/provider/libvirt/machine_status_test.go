package libvirt

import (
	"fmt"
	"testing"

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
