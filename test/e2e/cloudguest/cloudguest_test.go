package cloudguest

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	infrav1 "banlieue.io/banlieue/api/infrastructure/v1alpha1"
	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
	"banlieue.io/banlieue/internal/testenv"
	"banlieue.io/banlieue/internal/testenv/labhost"
	"banlieue.io/banlieue/pkg/libvirt"
)

// marker is where the user-data's write_files and runcmd leave their traces.
const marker = "/var/lib/banlieue-e2e/marker"

// objects are what a user declares: the image already on the host (BackingFile), classes small
// enough for software emulation (one NIC-less, one with a NIC on the suite's isolated bridge and
// a static address), and user-data whose effects are visible only if cloud-init ran it.
const objects = imageObject + `
---
apiVersion: banlieue.io/v1alpha1
kind: VMClass
metadata:
  name: cloud-small
spec:
  firmware: efi
  hardware:
    cpus: 1
    memoryMiB: 512
    disks:
      - name: os
        sizeGiB: 4
        storageClass: standard
---
apiVersion: banlieue.io/v1alpha1
kind: VMClass
metadata:
  name: cloud-static
spec:
  firmware: efi
  hardware:
    cpus: 1
    memoryMiB: 512
    disks:
      - name: os
        sizeGiB: 4
        storageClass: standard
  network:
    interfaces:
      - name: nic0
        networkClass: isolated
        ipam:
          static: {prefix: 24}
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: with-data-user-data
data:
  user-data: |
    #cloud-config
    write_files:
      - path: ` + marker + `
        content: "written by write_files\n"
    runcmd:
      - [sh, -c, 'echo "runcmd on $(hostname)" >>` + marker + `']
---
apiVersion: banlieue.io/v1alpha1
kind: VirtualMachine
metadata:
  name: with-data
spec:
  classRef: {name: cloud-small}
  imageRef: {name: debian-12-cloud}
  desiredPowerState: PoweredOn
  migrationPolicy: never
  userData:
    configMapRef: {name: with-data-user-data}
---
apiVersion: banlieue.io/v1alpha1
kind: VirtualMachine
metadata:
  name: bare
spec:
  classRef: {name: cloud-small}
  imageRef: {name: debian-12-cloud}
  desiredPowerState: PoweredOn
  migrationPolicy: never
---
apiVersion: banlieue.io/v1alpha1
kind: VirtualMachine
metadata:
  name: static
spec:
  classRef: {name: cloud-static}
  imageRef: {name: debian-12-cloud}
  desiredPowerState: PoweredOn
  migrationPolicy: never
  networkOverrides:
    - name: nic0
      static: {address: ` + staticAddress + `, prefix: 24}
`

// dhcpObjects are the DHCP guest's: a class whose NIC is on the suite's libvirt NAT network
// without a static address, and a VM of it. It boots in a test of its own: four emulated guests
// at once on two shared cores miss the boot timeout.
const dhcpObjects = imageObject + `
---
apiVersion: banlieue.io/v1alpha1
kind: VMClass
metadata:
  name: cloud-dhcp
spec:
  firmware: efi
  hardware:
    cpus: 1
    memoryMiB: 512
    disks:
      - name: os
        sizeGiB: 4
        storageClass: standard
  network:
    interfaces:
      - name: nic0
        networkClass: nat
        ipam: {}
---
apiVersion: banlieue.io/v1alpha1
kind: VirtualMachine
metadata:
  name: dhcp
spec:
  classRef: {name: cloud-dhcp}
  imageRef: {name: debian-12-cloud}
  desiredPowerState: PoweredOn
  migrationPolicy: never
`

// imageObject is the cloud guest's image, already on the host.
const imageObject = `
apiVersion: banlieue.io/v1alpha1
kind: VMImage
metadata:
  name: debian-12-cloud
spec:
  osFamily: linux
  osDistribution: debian
  osVersion: "12"
  architecture: amd64
  guestAgent: cloud-init
  sources:
    - providerClass: libvirt
      kind: BackingFile
      ref: /images/VOLUME
`

// staticAddress is the static VM's address (TEST-NET-1), on the suite's isolated bridge.
const staticAddress = "192.0.2.10"

// bootTimeout bounds one guest's way from VirtualMachine created to GuestReady=True under
// software emulation (measured: docs/performance.md), with three guests sharing two cores
// beside the suite's other streams' guests. It catches a guest that never gets there, not a
// slow one: no promise of banlieue's is about how fast QEMU emulates a boot.
const bootTimeout = 15 * time.Minute

func TestCloudGuestOnLab(t *testing.T) {
	ctx, s := newSuite(t)
	vms := s.boot(ctx, t, objects)

	t.Run("cloud-init finished from the NoCloud seed, without errors", func(t *testing.T) {
		for _, vm := range vms {
			s.checkCloudInitResult(ctx, t, s.domain(ctx, t, vm))
		}
	})
	t.Run("user-data: the hostname is the domain name, write_files and runcmd ran", func(t *testing.T) {
		dom := s.domain(ctx, t, vms[0])
		if got := s.hostname(ctx, t, dom); got != dom.Name {
			t.Errorf("guest hostname %q, want the domain name %q", got, dom.Name)
		}
		got, err := s.readFile(ctx, dom, marker)
		if err != nil {
			t.Fatalf("reading %s through the agent: %v", marker, err)
		}
		if want := "written by write_files\nruncmd on " + dom.Name + "\n"; got != want {
			t.Errorf("%s holds %q, want %q", marker, got, want)
		}
	})
	t.Run("no user-data: the hostname is still the domain name", func(t *testing.T) {
		dom := s.domain(ctx, t, vms[1])
		if got := s.hostname(ctx, t, dom); got != dom.Name {
			t.Errorf("guest hostname %q, want the domain name %q", got, dom.Name)
		}
		if got, err := s.readFile(ctx, dom, marker); err == nil {
			t.Errorf("%s exists without user-data: %q", marker, got)
		}
	})
	t.Run("networkOverrides: the static address is on nic0, and in status.addresses from the agent", func(t *testing.T) {
		found := false
		for _, i := range s.interfaces(ctx, t, s.domain(ctx, t, vms[2])) {
			for _, a := range i.IPs {
				found = found || (i.Name == "nic0" && a.Address == staticAddress && a.Prefix == 24)
			}
		}
		if !found {
			t.Errorf("the guest has no %s/24 on nic0", staticAddress)
		}
		s.waitAgentAddress(ctx, t, vms[2], staticAddress)
	})
	t.Run("a raised diskOverrides size: the running guest sees its disk grow, without a reboot", func(t *testing.T) {
		s.growDisk(ctx, t, vms[0])
	})
	// Last: it powers the VM off.
	t.Run("stop (TrySoft): the guest agent shuts the guest down; libvirt says shutdown, not destroyed", func(t *testing.T) {
		s.stopGracefully(ctx, t, vms[1])
	})
}

// growDisk raises the running vm's OS disk from the class's 4 GiB to 6 GiB and reads the size
// the guest's kernel has for vda from sysfs through the agent, until it is the new one. The
// guest's boot_id and the domain's ID show it was not restarted.
func (s *suite) growDisk(ctx context.Context, t *testing.T, vm *banlieuev1.VirtualMachine) {
	dom := s.domain(ctx, t, vm)
	bootID, err := s.readFile(ctx, dom, "/proc/sys/kernel/random/boot_id")
	if err != nil {
		t.Fatalf("reading the guest's boot_id: %v", err)
	}
	if size, err := s.readFile(ctx, dom, "/sys/block/vda/size"); err != nil || strings.TrimSpace(size) != fmt.Sprint(4<<30/512) {
		t.Fatalf("/sys/block/vda/size before: %q, %v; want the class's 4 GiB in 512-byte sectors", size, err)
	}
	start := time.Now()
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var cur banlieuev1.VirtualMachine
		if err := s.env.Client.Get(ctx, client.ObjectKeyFromObject(vm), &cur); err != nil {
			return err
		}
		cur.Spec.HardwareOverride = &banlieuev1.HardwareOverride{DiskOverrides: []banlieuev1.DiskOverride{{Name: "os", SizeGiB: 6}}}
		return s.env.Client.Update(ctx, &cur)
	}); err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprint(6 << 30 / 512)
	testenv.Eventually(t, 2*time.Minute, "the guest's vda at 6 GiB", func() error {
		size, err := s.readFile(ctx, dom, "/sys/block/vda/size")
		return testenv.Unmet(err == nil && strings.TrimSpace(size) == want, fmt.Sprintf("/sys/block/vda/size %q (%v)", size, err))
	})
	t.Logf("the guest saw its disk grow %v after the VM was changed", time.Since(start).Round(time.Millisecond))
	if now, err := s.readFile(ctx, dom, "/proc/sys/kernel/random/boot_id"); err != nil || now != bootID {
		t.Errorf("boot_id %q (%v), was %q: the guest must not have rebooted", now, err, bootID)
	}
	if now := s.domain(ctx, t, vm); now.ID != dom.ID {
		t.Errorf("domain ID %d, was %d: the domain must not have restarted", now.ID, dom.ID)
	}
}

// stopGracefully powers vm off as `kubectl banlieue stop` does (spec.desiredPowerState
// PoweredOff, powerOffMode left at its default TrySoft) and checks from libvirt that the guest
// shut itself down: the domain's shut-off reason is shutdown, not destroyed (a power cut after
// spec.powerOffTimeout, 2 minutes by default, which the wait outlasts so that it shows).
func (s *suite) stopGracefully(ctx context.Context, t *testing.T, vm *banlieuev1.VirtualMachine) {
	t.Helper()
	dom := s.domain(ctx, t, vm)
	var got banlieuev1.VirtualMachine
	if err := s.env.Client.Get(ctx, client.ObjectKeyFromObject(vm), &got); err != nil {
		t.Fatal(err)
	}
	if got.Spec.PowerOffMode != "" && got.Spec.PowerOffMode != banlieuev1.PowerOffTrySoft {
		t.Fatalf("%s: powerOffMode %s, want the default TrySoft", vm.Name, got.Spec.PowerOffMode)
	}
	patch := client.MergeFrom(got.DeepCopy())
	got.Spec.DesiredPowerState = banlieuev1.PoweredOff
	if err := s.env.Client.Patch(ctx, &got, patch); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	var reason libvirt.DomainStateReason
	testenv.Eventually(t, 150*time.Second, dom.Name+" shut off", func() error {
		state, r, err := s.host.DomainState(ctx, dom)
		if err != nil {
			return testenv.Unmet(false, err.Error())
		}
		reason = r
		return testenv.Unmet(state == libvirt.DomainShutOff, fmt.Sprintf("%s (reason %d)", state, r))
	})
	t.Logf("%s: shut off %s after spec.desiredPowerState PoweredOff", dom.Name, time.Since(start).Round(100*time.Millisecond))
	if reason != libvirt.DomainShutoffShutdown {
		t.Errorf("%s: shut off with reason %d, want %d (shutdown); %d is destroyed", dom.Name, reason, libvirt.DomainShutoffShutdown, libvirt.DomainShutoffDestroyed)
	}
	testenv.Eventually(t, 30*time.Second, "a ShuttingDown event naming the guest agent", func() error {
		notes := s.eventNotes(ctx, t, vm, infrav1.ReasonShuttingDown)
		return testenv.Unmet(slices.ContainsFunc(notes, func(n string) bool { return strings.HasPrefix(n, "guest agent asked to shut down") }),
			fmt.Sprintf("%q", notes))
	})
	if notes := s.eventNotes(ctx, t, vm, infrav1.ReasonShutdownTimedOut); len(notes) != 0 {
		t.Errorf("%s: ShutdownTimedOut events %q for a guest that shut down", vm.Name, notes)
	}
}

// eventNotes are the notes of the events about the VM's LibvirtMachine with reason.
func (s *suite) eventNotes(ctx context.Context, t *testing.T, vm *banlieuev1.VirtualMachine, reason string) []string {
	t.Helper()
	var list eventsv1.EventList
	if err := s.env.Client.List(ctx, &list, client.InNamespace(s.ns)); err != nil {
		t.Fatal(err)
	}
	var notes []string
	for _, e := range list.Items {
		if e.Regarding.Kind == "LibvirtMachine" && e.Regarding.Name == vm.Name && e.Reason == reason {
			notes = append(notes, e.Note)
		}
	}
	return notes
}

// TestCloudGuestDHCPOnLab: a VM without a static address, on a libvirt NAT network, gets its
// address from the network's dnsmasq through cloud-init's fallback DHCP; the provider reports it
// from the guest agent, and the network's lease names the same address and MAC.
func TestCloudGuestDHCPOnLab(t *testing.T) {
	ctx, s := newSuite(t)
	vm := s.boot(ctx, t, dhcpObjects)[0]
	s.checkCloudInitResult(ctx, t, s.domain(ctx, t, vm))
	var addr, mac string
	for _, i := range s.interfaces(ctx, t, s.domain(ctx, t, vm)) {
		for _, a := range i.IPs {
			if a.Type == "ipv4" && strings.HasPrefix(a.Address, s.network.Subnet) && a.Prefix == 24 {
				addr, mac = a.Address, i.MAC
			}
		}
	}
	if addr == "" {
		t.Fatalf("the guest has no address in %s0/24", s.network.Subnet)
	}
	if !slices.ContainsFunc(labhost.Leases(t, s.lab, s.network.Name), func(l labhost.Lease) bool {
		return l.MAC == strings.ToLower(mac) && l.Address == addr && l.Prefix == 24
	}) {
		t.Errorf("network %s leases no %s/24 to %s", s.network.Name, addr, mac)
	}
	s.waitAgentAddress(ctx, t, vm, addr)
}

// boot creates the objects of docs (VOLUME standing for the suite's disk volume) in the suite's
// namespace and waits for every VirtualMachine among them to be GuestReady, in order.
func (s *suite) boot(ctx context.Context, t *testing.T, docs string) []*banlieuev1.VirtualMachine {
	t.Helper()
	var vms []*banlieuev1.VirtualMachine
	for _, doc := range strings.Split(strings.ReplaceAll(docs, "VOLUME", s.diskVol), "\n---\n") {
		obj := decode(t, doc)
		obj.SetNamespace(s.ns)
		if vm, ok := obj.(*banlieuev1.VirtualMachine); ok {
			vms = append(vms, vm)
		}
		if err := s.env.Client.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	start := time.Now()
	for _, vm := range vms {
		s.waitGuestReady(ctx, t, vm)
		t.Logf("%s: GuestReady=True %s after the VirtualMachines were created", vm.Name, time.Since(start).Round(time.Second))
	}
	return vms
}

// guestInterface is one interface as the guest agent reports it.
type guestInterface struct {
	Name string `json:"name"`
	MAC  string `json:"hardware-address"`
	IPs  []struct {
		Type    string `json:"ip-address-type"`
		Address string `json:"ip-address"`
		Prefix  int    `json:"prefix"`
	} `json:"ip-addresses"`
}

// interfaces are the guest's interfaces and addresses, read through the agent.
func (s *suite) interfaces(ctx context.Context, t *testing.T, dom libvirt.Domain) []guestInterface {
	t.Helper()
	var ifaces []guestInterface
	if err := s.agent(ctx, dom, `{"execute":"guest-network-get-interfaces"}`, &ifaces); err != nil {
		t.Fatalf("%s: guest-network-get-interfaces: %v", dom.Name, err)
	}
	t.Logf("%s: interfaces %+v", dom.Name, ifaces)
	return ifaces
}

// waitAgentAddress waits until the VM's status.addresses holds addr and its LibvirtMachine says
// the addresses came from the guest agent.
func (s *suite) waitAgentAddress(ctx context.Context, t *testing.T, vm *banlieuev1.VirtualMachine, addr string) {
	t.Helper()
	testenv.Eventually(t, 60*time.Second, vm.Name+": status.addresses holds "+addr, func() error {
		var got banlieuev1.VirtualMachine
		if err := s.env.Client.Get(ctx, client.ObjectKeyFromObject(vm), &got); err != nil {
			return testenv.Unmet(false, err.Error())
		}
		var m infrav1.LibvirtMachine
		if err := s.env.Client.Get(ctx, client.ObjectKeyFromObject(vm), &m); err != nil {
			return testenv.Unmet(false, err.Error())
		}
		has := slices.ContainsFunc(got.Status.Addresses, func(a banlieuev1.MachineAddress) bool { return a.Address == addr })
		return testenv.Unmet(has && m.Status.AddressSource == infrav1.AddressFromGuestAgent,
			fmt.Sprintf("VM addresses %+v, LibvirtMachine addressSource %q", got.Status.Addresses, m.Status.AddressSource))
	})
}

// checkCloudInitResult reads cloud-init's own verdict, /run/cloud-init/result.json, written when
// its final stage ends: the datasource it used and the errors of every stage.
func (s *suite) checkCloudInitResult(ctx context.Context, t *testing.T, dom libvirt.Domain) {
	t.Helper()
	data, err := s.readFile(ctx, dom, "/run/cloud-init/result.json")
	if err != nil {
		t.Errorf("%s: reading cloud-init's result: %v", dom.Name, err)
		return
	}
	var r struct {
		V1 struct {
			Datasource string   `json:"datasource"`
			Errors     []string `json:"errors"`
		} `json:"v1"`
	}
	if err := json.Unmarshal([]byte(data), &r); err != nil {
		t.Errorf("%s: cloud-init result %q: %v", dom.Name, data, err)
		return
	}
	if !strings.HasPrefix(r.V1.Datasource, "DataSourceNoCloud ") || len(r.V1.Errors) != 0 {
		t.Errorf("%s: cloud-init used %q with errors %q, want the NoCloud seed and none", dom.Name, r.V1.Datasource, r.V1.Errors)
	}
}

func decode(t *testing.T, doc string) client.Object {
	t.Helper()
	var head struct{ Kind string }
	if err := yaml.Unmarshal([]byte(doc), &head); err != nil {
		t.Fatal(err)
	}
	var obj client.Object
	switch head.Kind {
	case "VMImage":
		obj = &banlieuev1.VMImage{}
	case "VMClass":
		obj = &banlieuev1.VMClass{}
	case "ConfigMap":
		obj = &corev1.ConfigMap{}
	case "VirtualMachine":
		obj = &banlieuev1.VirtualMachine{}
	default:
		t.Fatalf("unexpected kind %q", head.Kind)
	}
	if err := yaml.UnmarshalStrict([]byte(doc), obj); err != nil {
		t.Fatalf("%s: %v", head.Kind, err)
	}
	return obj
}

// waitGuestReady waits for GuestReady=True on the VirtualMachine: the provider read
// `installed` from /run/banlieue/phase through the real agent, which the image writes once
// cloud-init's final stage is over.
func (s *suite) waitGuestReady(ctx context.Context, t *testing.T, vm *banlieuev1.VirtualMachine) {
	t.Helper()
	testenv.WaitVMCondition(ctx, t, s.env.Client, client.ObjectKeyFromObject(vm), banlieuev1.ConditionGuestReady, bootTimeout)
}

func (s *suite) domain(ctx context.Context, t *testing.T, vm *banlieuev1.VirtualMachine) libvirt.Domain {
	t.Helper()
	dom, err := s.host.DomainLookupByName(ctx, s.ns+"-"+vm.Name)
	if err != nil {
		t.Fatalf("domain of %s: %v", vm.Name, err)
	}
	return dom
}

// agent sends one command to the guest agent (labhost.AgentCommand).
func (s *suite) agent(ctx context.Context, dom libvirt.Domain, cmd string, reply any) error {
	return labhost.AgentCommand(ctx, s.host, dom, cmd, reply)
}

func (s *suite) hostname(ctx context.Context, t *testing.T, dom libvirt.Domain) string {
	t.Helper()
	var r struct {
		HostName string `json:"host-name"`
	}
	if err := s.agent(ctx, dom, `{"execute":"guest-get-host-name"}`, &r); err != nil {
		t.Fatalf("guest-get-host-name: %v", err)
	}
	return r.HostName
}

// readFile reads a small guest file through the agent.
func (s *suite) readFile(ctx context.Context, dom libvirt.Domain, path string) (string, error) {
	return labhost.ReadGuestFile(ctx, s.host, dom, path)
}
