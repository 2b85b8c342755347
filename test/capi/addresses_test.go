//go:build capi

package capi

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"libvirt.org/go/libvirtxml"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "banlieue.io/banlieue/api/infrastructure/v1alpha1"
	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
	"banlieue.io/banlieue/internal/testenv"
	"banlieue.io/banlieue/internal/testenv/labhost"
)

// cloudBootTimeout bounds the cloud guest's way from its Machine provisioned to an address from
// its agent under software emulation: about 1.5 minutes alone (docs/performance.md,
// TestCloudGuestDHCPOnLab), with room for a loaded machine.
const cloudBootTimeout = 6 * time.Minute

// TestMachineAddressesOnLab: a MachineDeployment of one replica whose LibvirtMachineTemplate
// boots the cloud guest with one NIC on a libvirt NAT network. The guest takes its address by
// DHCP from the network's dnsmasq; the provider reads it from the guest agent into the
// LibvirtMachine's status.addresses, and Cluster API's Machine controller copies it into the
// Machine's, where the network's own lease (libvirt's account, not the provider's) names the
// same address for the domain's MAC. Deleting the Cluster leaves the host as it was.
func TestMachineAddressesOnLab(t *testing.T) {
	ctx, s := newLabSuite(t, cloudGuest)
	bootVol := s.bootVolume(ctx, t)
	before := s.inventory(ctx, t)

	w := newWorkload(s.ns, s.provider, s.pool, bootVol)
	spec := &w.template.Spec.Template.Spec
	spec.Firmware, spec.MemoryMiB = banlieuev1.FirmwareEFI, 512
	spec.Disks = []infrav1.LibvirtDisk{{Name: "os", SizeGiB: 4}}
	spec.Network = []infrav1.LibvirtNetworkInterface{{Name: "nic0", Source: infrav1.NetworkSource{Kind: infrav1.SourceNetwork, Name: s.network.Name}}}
	w.create(ctx, t, s.suite)

	start := time.Now()
	s.scale(ctx, t, w.md, 1)
	m := s.waitMachines(ctx, t, 1, 240*time.Second)[0]
	t.Logf("0 → 1: the Machine infrastructure-provisioned in %s", time.Since(start).Round(time.Millisecond))
	s.checkMachine(ctx, t, m) // providerID, failure domain, InfrastructureReady, the seed

	var addr string
	testenv.Eventually(t, cloudBootTimeout, "the Machine's status.addresses holds an address of "+s.network.Subnet+"0/24", func() error {
		got := s.machineAddresses(ctx, t, m)
		for _, a := range got {
			if strings.HasPrefix(a, s.network.Subnet) {
				addr = a
			}
		}
		return testenv.Unmet(addr != "", fmt.Sprintf("status.addresses %v", got))
	})
	t.Logf("the Machine's address %s %s after it was scaled up", addr, time.Since(start).Round(time.Second))

	// The provider reports the network's lease until the guest agent answers, then the agent's
	// addresses (guestAddresses, internal/provider/libvirt/machine_converge.go): the same address,
	// once the agent is up.
	ref, _, _ := unstructured.NestedString(m.Object, "spec", "infrastructureRef", "name")
	var lm infrav1.LibvirtMachine
	testenv.Eventually(t, cloudBootTimeout, "LibvirtMachine "+ref+": status.addresses holds "+addr+" from the guest agent", func() error {
		if err := s.env.Client.Get(ctx, client.ObjectKey{Namespace: s.ns, Name: ref}, &lm); err != nil {
			return err
		}
		return testenv.Unmet(slices.Contains(lm.Status.Addresses, banlieuev1.MachineAddress{Type: banlieuev1.MachineInternalIP, Address: addr}) &&
			lm.Status.AddressSource == infrav1.AddressFromGuestAgent, fmt.Sprintf("addresses %+v from %q", lm.Status.Addresses, lm.Status.AddressSource))
	})
	t.Logf("the LibvirtMachine's address from the guest agent %s after the scale-up", time.Since(start).Round(time.Second))
	if got := s.machineAddresses(ctx, t, m); !slices.Contains(got, addr) {
		t.Errorf("Machine %s status.addresses %v no longer holds %s", m.GetName(), got, addr)
	}
	mac := s.mac(ctx, t, lm.Spec.DomainName)
	if !slices.Contains(labhost.Leases(t, s.lab, s.network.Name), labhost.Lease{MAC: mac, Address: addr, Prefix: 24}) {
		t.Errorf("network %s leases no %s/24 to the domain's NIC %s", s.network.Name, addr, mac)
	}

	s.deleteCluster(ctx, t, w.cluster, before)
}

// machineAddresses are the InternalIP addresses of the Machine's status.addresses, as Cluster
// API copied them from its LibvirtMachine.
func (s *labSuite) machineAddresses(ctx context.Context, t *testing.T, m *unstructured.Unstructured) []string {
	t.Helper()
	got, err := s.get(ctx, m)
	if err != nil {
		t.Fatal(err)
	}
	addrs, _, _ := unstructured.NestedSlice(got.Object, "status", "addresses")
	var out []string
	for _, a := range addrs {
		a, _ := a.(map[string]any)
		if ip, _ := a["address"].(string); a["type"] == string(banlieuev1.MachineInternalIP) {
			out = append(out, ip)
		}
	}
	return out
}

// mac is the MAC libvirt gave the domain's one NIC, on the suite's network, from its live XML.
func (s *labSuite) mac(ctx context.Context, t *testing.T, domain string) string {
	t.Helper()
	dom, err := s.host.DomainLookupByName(ctx, domain)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := s.host.DomainXMLDesc(ctx, dom, 0)
	if err != nil {
		t.Fatal(err)
	}
	var d libvirtxml.Domain
	if err := d.Unmarshal(raw); err != nil {
		t.Fatal(err)
	}
	if d.Devices == nil || len(d.Devices.Interfaces) != 1 {
		t.Fatalf("domain %s: want one interface: %s", domain, raw)
	}
	i := d.Devices.Interfaces[0]
	if i.Source == nil || i.Source.Network == nil || i.Source.Network.Network != s.network.Name || i.MAC == nil {
		t.Fatalf("domain %s: interface %+v is not on network %s with a MAC", domain, i, s.network.Name)
	}
	return strings.ToLower(i.MAC.Address)
}
