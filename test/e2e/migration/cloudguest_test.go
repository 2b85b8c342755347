package migration

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
	"banlieue.io/banlieue/internal/testenv"
	"banlieue.io/banlieue/internal/testenv/labhost"
	"banlieue.io/banlieue/pkg/libvirt"
)

const (
	// countFile is where the guest's counter writes the seconds it has counted, once a second.
	countFile = "/run/banlieue-count"
	// dataFile is what the test writes on the guest's disk before a move and reads after it.
	dataFile = "/var/lib/banlieue-move-data"
	// guestBootTimeout bounds the cloud guest's way to GuestReady under software emulation
	// beside the other streams' guests: it catches a guest that never gets there.
	guestBootTimeout = 15 * time.Minute
)

// counterUserData starts a counter as a unit of its own (so it outlives cloud-init's final
// stage): it writes the seconds it has counted to countFile, and to the console.
const counterUserData = `#cloud-config
runcmd:
  - [systemd-run, --unit=banlieue-count, sh, -c, 'i=0; while :; do i=$((i+1)); echo $i >` + countFile + `.new; mv ` + countFile + `.new ` + countFile + `; echo "count $i" >/dev/console; sleep 1; done']
`

// guestState is what the test reads of the running guest through its agent.
type guestState struct {
	bootID  string
	uptime  float64
	count   int
	address string
}

// TestCloudGuestMovesLive moves the real cloud guest (hack/cloud-guest.sh: Debian 12, UEFI,
// cloud-init, qemu-guest-agent) live between the two hosts of hack/migration-lab.sh and back,
// with VirtualMachineMigrations, through banlieue-controller and the libvirt provider. Its NIC is
// on a NAT network of host a's libvirtd that both hosts reach by its bridge, as two hosts reach
// one VLAN; a counter started by its user-data counts seconds. At each move: the migration ends
// Succeeded with its downtime; the guest did not restart (same boot_id, its uptime and its count
// went on); it keeps its DHCP address and GuestReady; a file written and flushed to its disk
// before the move is read back after the guest's page cache is dropped, so from the target's
// disk; the source keeps nothing (no domain, no overlay, no seed, no NVRAM).
func TestCloudGuestMovesLive(t *testing.T) {
	if testing.Short() {
		t.Skip("boots the cloud guest")
	}
	imageDir := labhost.CloudGuest(t)
	run := testenv.RunID()
	nat := labhost.NATNetwork{Name: "mv-guest-" + run, Bridge: "mvnat" + run, Subnet: "198.18.67."}
	ctx, ch := startChain(t, "chain-guest", &nat)
	env, name := ch.env, ch.name
	base := "debian-12-cloud-" + run + ".raw"

	img := &banlieuev1.VMImage{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: banlieuev1.VMImageSpec{OSFamily: "linux", OSDistribution: "debian", OSVersion: "12", Architecture: "amd64", GuestAgent: "cloud-init",
			Sources: []banlieuev1.ImageSource{{ProviderClass: "libvirt", Kind: banlieuev1.SourceBackingFile, Ref: base}}}}
	env.Create(ctx, t, img)
	for _, p := range []string{"lab-a", "lab-b"} {
		h := ch.hosts[p]
		start := time.Now()
		labhost.UploadRaw(ctx, t, h.c, h.pool.Name, base, filepath.Join(imageDir, "cloud.raw"))
		t.Logf("%s: the cloud guest's disk uploaded in %v", p, time.Since(start).Round(time.Second))
		ch.provider(ctx, t, p, banlieuev1.ProviderCapabilities{
			StorageClasses: []banlieuev1.StorageClassMapping{{Name: "standard", Target: map[string]string{"pool": h.pool.Name}}},
			NetworkClasses: []banlieuev1.NetworkClassMapping{{Name: "nat", Target: map[string]string{"bridge": nat.Bridge}}}})
	}
	ch.imageOnHosts(ctx, t, base)
	env.Create(ctx, t, &banlieuev1.VMClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: banlieuev1.VMClassSpec{
		Firmware: banlieuev1.FirmwareEFI,
		Hardware: banlieuev1.ClassHardware{CPUs: 1, MemoryMiB: 512, Disks: []banlieuev1.ClassDisk{{Name: "os", SizeGiB: 4, StorageClass: "standard"}}},
		Network:  banlieuev1.ClassNetwork{Interfaces: []banlieuev1.ClassInterface{{Name: "nic0", NetworkClass: "nat"}}}}})
	env.Create(ctx, t, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name + "-user-data", Namespace: ch.ns},
		Data: map[string]string{"user-data": counterUserData}})
	env.Create(ctx, t, &banlieuev1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ch.ns},
		Spec: banlieuev1.VirtualMachineSpec{ClassRef: banlieuev1.LocalObjectReference{Name: name}, ImageRef: banlieuev1.LocalObjectReference{Name: name},
			DesiredPowerState: banlieuev1.PoweredOn, MigrationPolicy: "live",
			UserData: &banlieuev1.UserDataSource{ConfigMapRef: &banlieuev1.KeySelector{Name: name + "-user-data"}}}})

	start := time.Now()
	waitGuestReady(ctx, t, ch, "the cloud guest GuestReady")
	vm := ch.ready(ctx, t, "the cloud guest running")
	t.Logf("GuestReady %v after the VM was created", time.Since(start).Round(time.Second))
	host := ch.hosts[vm.Status.Scheduled.ProviderName]
	before := readGuest(ctx, t, host.c, ch.lookup(ctx, t, host), nat.Subnet)
	t.Cleanup(func() {
		if t.Failed() {
			ch.logGuestLogs(t)
		}
	})
	for i := range 2 {
		token := writeFlushed(ctx, t, host.c, ch.lookup(ctx, t, host))
		wall := time.Now()
		m, moved := ch.move(ctx, t, vm, i+1, base)
		vm = moved
		host = ch.hosts[vm.Status.Scheduled.ProviderName]
		waitGuestReady(ctx, t, ch, m.Name+": GuestReady on "+vm.Status.Scheduled.ProviderName)
		dom := ch.lookup(ctx, t, host)
		after := readGuest(ctx, t, host.c, dom, nat.Subnet)
		elapsed := time.Since(wall).Seconds()
		t.Logf("%s: before %+v, after %+v, %.1f s apart", m.Name, before, after, elapsed)
		if after.bootID != before.bootID {
			t.Errorf("%s: boot_id %s, was %s: the guest restarted", m.Name, after.bootID, before.bootID)
		}
		// The guest's clocks stop for the downtime alone; the agent's reads bracket the move.
		if after.uptime <= before.uptime || after.count <= before.count {
			t.Errorf("%s: uptime %.1f s and count %d after, %.1f s and %d before: the guest or its counter restarted",
				m.Name, after.uptime, after.count, before.uptime, before.count)
		}
		if after.address != before.address {
			t.Errorf("%s: the guest's address is %s, was %s", m.Name, after.address, before.address)
		}
		if !slices.ContainsFunc(vm.Status.Addresses, func(a banlieuev1.MachineAddress) bool { return a.Address == after.address }) {
			t.Errorf("%s: the VM's status.addresses %+v lack the guest's %s", m.Name, vm.Status.Addresses, after.address)
		}
		// Dropping the guest's page cache makes the read come from the disk now under it.
		if err := labhost.WriteGuestFile(ctx, host.c, dom, "/proc/sys/vm/drop_caches", "3\n"); err != nil {
			t.Fatalf("%s: dropping the guest's caches: %v", m.Name, err)
		}
		if got, err := labhost.ReadGuestFile(ctx, host.c, dom, dataFile); err != nil || got != token {
			t.Errorf("%s: %s holds %q (%v) after the move, want %q written before it", m.Name, dataFile, got, err, token)
		}
		from := other[vm.Status.Scheduled.ProviderName]
		nvram := ch.lab.HostPath(ch.hosts[from].name, "/var/lib/libvirt/qemu/nvram/"+ch.domain().Name+"_VARS.fd")
		if _, err := os.Stat(nvram); !os.IsNotExist(err) {
			t.Errorf("%s: the source %s keeps the guest's NVRAM %s (%v)", m.Name, from, nvram, err)
		}
		if _, err := os.Stat(ch.lab.HostPath(host.name, "/var/lib/libvirt/qemu/nvram/"+ch.domain().Name+"_VARS.fd")); err != nil {
			t.Errorf("%s: the target has no NVRAM for the guest: %v", m.Name, err)
		}
		before = after
	}
}

// waitGuestReady waits for the VM's GuestReady=True: the provider read the image's
// /run/banlieue/phase through the guest agent.
func waitGuestReady(ctx context.Context, t *testing.T, ch *chain, what string) {
	t.Helper()
	t.Log(what)
	testenv.WaitVMCondition(ctx, t, ch.env.Client, client.ObjectKey{Namespace: ch.ns, Name: ch.name}, banlieuev1.ConditionGuestReady, guestBootTimeout)
}

// readGuest reads the guest's boot_id, uptime, count and its address on the NAT network through
// the agent on host, waiting for the counter's first second and the DHCP lease.
func readGuest(ctx context.Context, t *testing.T, host *libvirt.Client, dom libvirt.Domain, subnet string) guestState {
	t.Helper()
	var g guestState
	testenv.Eventually(t, 2*time.Minute, "the guest's count and address", func() error {
		g = guestState{}
		id, err := labhost.ReadGuestFile(ctx, host, dom, "/proc/sys/kernel/random/boot_id")
		if err != nil {
			return testenv.Unmet(false, "boot_id: "+err.Error())
		}
		g.bootID = strings.TrimSpace(id)
		up, err := labhost.ReadGuestFile(ctx, host, dom, "/proc/uptime")
		if err != nil {
			return testenv.Unmet(false, "uptime: "+err.Error())
		}
		if f := strings.Fields(up); len(f) > 0 {
			g.uptime, _ = strconv.ParseFloat(f[0], 64)
		}
		if c, err := labhost.ReadGuestFile(ctx, host, dom, countFile); err == nil {
			g.count, _ = strconv.Atoi(strings.TrimSpace(c))
		}
		var ifaces []struct {
			IPs []struct {
				Address string `json:"ip-address"`
			} `json:"ip-addresses"`
		}
		if err := labhost.AgentCommand(ctx, host, dom, `{"execute":"guest-network-get-interfaces"}`, &ifaces); err != nil {
			return testenv.Unmet(false, "interfaces: "+err.Error())
		}
		for _, i := range ifaces {
			for _, a := range i.IPs {
				if strings.HasPrefix(a.Address, subnet) {
					g.address = a.Address
				}
			}
		}
		return testenv.Unmet(g.count > 0 && g.address != "", fmt.Sprintf("%+v", g))
	})
	return g
}

// writeFlushed writes a random token to dataFile through the agent and flushes the guest's
// filesystems to its disk (the agent's freeze and thaw), and returns the token.
func writeFlushed(ctx context.Context, t *testing.T, host *libvirt.Client, dom libvirt.Domain) string {
	t.Helper()
	var b [16]byte
	_, _ = rand.Read(b[:])
	token := hex.EncodeToString(b[:])
	if err := labhost.WriteGuestFile(ctx, host, dom, dataFile, token); err != nil {
		t.Fatalf("writing %s: %v", dataFile, err)
	}
	var n int
	if err := labhost.AgentCommand(ctx, host, dom, `{"execute":"guest-fsfreeze-freeze"}`, &n); err != nil {
		t.Fatalf("guest-fsfreeze-freeze: %v", err)
	}
	if err := labhost.AgentCommand(ctx, host, dom, `{"execute":"guest-fsfreeze-thaw"}`, &n); err != nil {
		t.Fatalf("guest-fsfreeze-thaw: %v", err)
	}
	return token
}

// logGuestLogs logs the end of the guest's QEMU log and serial console on both hosts: the
// counter's lines there say whether the guest ran on while its agent did not answer.
func (ch *chain) logGuestLogs(t *testing.T) {
	for _, h := range ch.hosts {
		for _, suffix := range []string{".log", "-serial.log"} {
			path := ch.lab.HostPath(h.name, "/var/log/libvirt/qemu/"+ch.domain().Name+suffix)
			data, err := os.ReadFile(path)
			if err != nil {
				t.Logf("%s: %v", path, err)
				continue
			}
			lines := strings.Split(strings.TrimSpace(string(data)), "\n")
			t.Logf("%s, its last lines:\n%s", path, strings.Join(lines[max(0, len(lines)-15):], "\n"))
		}
	}
}
