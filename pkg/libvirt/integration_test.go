package libvirt

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// uniqueName keeps objects of concurrent or repeated runs apart.
func uniqueName(prefix string) string {
	return fmt.Sprintf("%s-%d", prefix, time.Now().UnixNano()%1e9)
}

// testPool creates a transient dir pool in a fresh directory that libvirtd (and QEMU, which
// runs as libvirt-qemu) can reach; it is destroyed at cleanup.
func testPool(t *testing.T, l lab, c *Client) StoragePool {
	t.Helper()
	dir, err := os.MkdirTemp(l.dir, "pool-")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	name := uniqueName("pool")
	xml := fmt.Sprintf(`<pool type='dir'><name>%s</name><target><path>%s</path></target></pool>`, name, dir)
	pool, err := c.StoragePoolCreateXML(testContext(t), xml, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx := testContext(t)
		if vols, err := c.StoragePoolListAllVolumes(ctx, pool); err == nil {
			for _, v := range vols {
				_ = c.StorageVolDelete(ctx, v)
			}
		}
		_ = c.StoragePoolDestroy(ctx, pool)
		_ = os.RemoveAll(dir) // best effort, like the rest of the cleanup
	})
	return pool
}

func createVol(t *testing.T, c *Client, pool StoragePool, name string, capacity int64) StorageVol {
	t.Helper()
	xml := fmt.Sprintf(`<volume><name>%s</name><capacity unit='bytes'>%d</capacity><allocation unit='bytes'>0</allocation><target><format type='raw'/></target></volume>`, name, capacity)
	v, err := c.StorageVolCreateXML(testContext(t), pool, xml, 0)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestStorageRoundTrip(t *testing.T) {
	l := needLab(t)
	c := l.dial(t, "qemu:///system")
	ctx := testContext(t)
	pool := testPool(t, l, c)

	got, err := c.StoragePoolLookupByName(ctx, pool.Name)
	if err != nil || got != pool {
		t.Fatalf("StoragePoolLookupByName = %+v, %v; want %+v", got, err, pool)
	}
	pools, err := c.ListAllStoragePools(ctx)
	if err != nil || !containsName(pools, pool.Name, func(p StoragePool) string { return p.Name }) {
		t.Fatalf("ListAllStoragePools = %v, %v", pools, err)
	}
	xml, err := c.storagePoolXMLDesc(ctx, pool)
	if err != nil || !strings.Contains(xml, "<name>"+pool.Name+"</name>") {
		t.Fatalf("storagePoolXMLDesc = %q, %v", xml, err)
	}

	vol := createVol(t, c, pool, "disk.raw", 1<<20)
	if vol.Pool != pool.Name || vol.Name != "disk.raw" || !filepath.IsAbs(vol.Key) {
		t.Fatalf("created %+v", vol)
	}
	if err := c.StoragePoolRefresh(ctx, pool); err != nil {
		t.Fatal(err)
	}
	if got, err := c.StorageVolLookupByName(ctx, pool, "disk.raw"); err != nil || got != vol {
		t.Fatalf("StorageVolLookupByName = %+v, %v", got, err)
	}
	vols, err := c.StoragePoolListAllVolumes(ctx, pool)
	if err != nil || len(vols) != 1 || vols[0] != vol {
		t.Fatalf("StoragePoolListAllVolumes = %+v, %v", vols, err)
	}
	info, err := c.StorageVolGetInfo(ctx, vol)
	if err != nil || info.Capacity != 1<<20 || info.Type != storageVolFile {
		t.Fatalf("storageVolInfo = %+v, %v", info, err)
	}
	if err := c.StorageVolDelete(ctx, vol); err != nil {
		t.Fatal(err)
	}
	if _, err := c.StorageVolLookupByName(ctx, pool, "disk.raw"); !IsNotFound(err) {
		t.Fatalf("deleted volume lookup: %v, want not found", err)
	}
	if err := c.StoragePoolDestroy(ctx, pool); err != nil {
		t.Fatal(err)
	}
	if _, err := c.StoragePoolLookupByName(ctx, pool.Name); !IsNotFound(err) {
		t.Fatalf("destroyed transient pool lookup: %v, want not found", err)
	}
}

func TestPersistentPoolLifecycle(t *testing.T) {
	l := needLab(t)
	c := l.dial(t, "qemu:///system")
	ctx := testContext(t)
	dir, err := os.MkdirTemp(l.dir, "ppool-")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = os.RemoveAll(dir) }() // best-effort cleanup of the pool's directory
	name := uniqueName("ppool")
	pool, err := c.StoragePoolDefineXML(ctx, fmt.Sprintf(`<pool type='dir'><name>%s</name><target><path>%s</path></target></pool>`, name, dir), 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.StoragePoolCreate(ctx, pool, 0); err != nil {
		t.Fatal(err)
	}
	if err := c.StoragePoolDestroy(ctx, pool); err != nil {
		t.Fatal(err)
	}
	if _, err := c.StoragePoolLookupByName(ctx, name); err != nil {
		t.Fatalf("a stopped persistent pool is still defined: %v", err)
	}
	if err := c.storagePoolUndefine(ctx, pool); err != nil {
		t.Fatal(err)
	}
	if _, err := c.StoragePoolLookupByName(ctx, name); !IsNotFound(err) {
		t.Fatalf("undefined pool lookup: %v", err)
	}
}

const domainXML = `<domain type='qemu'>
  <name>%s</name>
  <memory unit='MiB'>64</memory>
  <vcpu>1</vcpu>
  <os><type arch='x86_64' machine='pc'>hvm</type><boot dev='hd'/></os>
  <devices>
    <disk type='file' device='disk'><driver name='qemu' type='raw'/><source file='%s'/><target dev='vda' bus='virtio'/></disk>
    <disk type='file' device='cdrom'><driver name='qemu' type='raw'/><target dev='sda' bus='sata'/><readonly/></disk>
    <channel type='unix'><target type='virtio' name='org.qemu.guest_agent.0'/></channel>
  </devices>
</domain>`

func TestDomainRoundTrip(t *testing.T) {
	l := needLab(t)
	c := l.dial(t, "qemu:///system")
	ctx := testContext(t)
	pool := testPool(t, l, c)
	disk := createVol(t, c, pool, "root.raw", 1<<20)
	iso := createVol(t, c, pool, "seed.iso", 1<<20)

	name := uniqueName("dom")
	dom, err := c.DomainDefineXML(ctx, fmt.Sprintf(domainXML, name, disk.Key), 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.DomainDestroy(testContext(t), dom)
		_ = c.DomainUndefine(testContext(t), dom, UndefineManagedSave|UndefineNVRAM|UndefineTPM)
	})
	if dom.Name != name || dom.ID != -1 || dom.UUID == (UUID{}) {
		t.Fatalf("defined %+v", dom)
	}
	if got, err := c.DomainLookupByName(ctx, name); err != nil || got != dom {
		t.Fatalf("DomainLookupByName = %+v, %v", got, err)
	}
	if st, _, err := c.DomainState(ctx, dom); err != nil || st != DomainShutOff {
		t.Fatalf("state = %v, %v; want ShutOff", st, err)
	}
	xml, err := c.DomainXMLDesc(ctx, dom, 0)
	if err != nil || !strings.Contains(xml, dom.UUID.String()) {
		t.Fatalf("DomainXMLDesc lacks uuid %s: %v\n%s", dom.UUID, err, xml)
	}

	running, err := c.DomainCreate(ctx, dom, 0)
	if err != nil {
		t.Fatal(err)
	}
	if running.ID < 1 {
		t.Fatalf("started domain has ID %d", running.ID)
	}
	if st, _, err := c.DomainState(ctx, running); err != nil || st != DomainRunning {
		t.Fatalf("state = %v, %v; want Running", st, err)
	}
	all, err := c.ListAllDomains(ctx)
	if err != nil || !containsName(all, name, func(d Domain) string { return d.Name }) {
		t.Fatalf("ListAllDomains = %v, %v", all, err)
	}

	// Insert then eject install media, live and in the persistent config.
	insert := fmt.Sprintf(`<disk type='file' device='cdrom'><driver name='qemu' type='raw'/><source file='%s'/><target dev='sda' bus='sata'/><readonly/></disk>`, iso.Key)
	if err := c.DomainUpdateDevice(ctx, running, insert, DeviceModifyLive|DeviceModifyConfig); err != nil {
		t.Fatal(err)
	}
	if xml, _ := c.DomainXMLDesc(ctx, running, 0); !strings.Contains(xml, iso.Key) {
		t.Fatal("inserted media not in the domain XML")
	}
	eject := `<disk type='file' device='cdrom'><driver name='qemu' type='raw'/><target dev='sda' bus='sata'/><readonly/></disk>`
	if err := c.DomainUpdateDevice(ctx, running, eject, DeviceModifyLive|DeviceModifyConfig); err != nil {
		t.Fatal(err)
	}

	ifaces, err := c.DomainInterfaceAddresses(ctx, running, AddressSourceLease)
	if err != nil || len(ifaces) != 0 {
		t.Fatalf("DomainInterfaceAddresses = %v, %v; want none (no NICs)", ifaces, err)
	}
	// No agent runs in this guest: libvirtd must answer with an error, over the QEMU program.
	_, err = c.DomainAgentCommand(ctx, running, `{"execute":"guest-ping"}`, 1)
	var le *Error
	if !asError(err, &le) {
		t.Fatalf("DomainAgentCommand without an agent: %v, want a libvirt error", err)
	}

	if err := c.DomainDestroy(ctx, running); err != nil {
		t.Fatal(err)
	}
	if st, _, err := c.DomainState(ctx, dom); err != nil || st != DomainShutOff {
		t.Fatalf("state after destroy = %v, %v", st, err)
	}
	if err := c.domainShutdown(ctx, dom); err == nil {
		t.Fatal("domainShutdown of a stopped domain succeeded")
	}
	if err := c.DomainUndefine(ctx, dom, UndefineManagedSave|UndefineNVRAM|UndefineTPM); err != nil {
		t.Fatal(err)
	}
	if _, err := c.DomainLookupByName(ctx, name); !IsNotFound(err) {
		t.Fatalf("undefined domain lookup: %v, want not found", err)
	}
}

func TestNetworkRoundTrip(t *testing.T) {
	l := needLab(t)
	c := l.dial(t, "qemu:///system")
	ctx := testContext(t)
	name := uniqueName("net")
	bridge := fmt.Sprintf("bl%d", time.Now().UnixNano()%1e6)
	xml := fmt.Sprintf(`<network><name>%s</name><bridge name='%s'/><ip address='192.168.251.1' netmask='255.255.255.0'><dhcp><range start='192.168.251.10' end='192.168.251.20'/></dhcp></ip></network>`, name, bridge)
	n, err := c.NetworkDefineXML(ctx, xml)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.networkDestroy(testContext(t), n)
		_ = c.NetworkUndefine(testContext(t), n)
	})
	if got, err := c.NetworkLookupByName(ctx, name); err != nil || got != n {
		t.Fatalf("NetworkLookupByName = %+v, %v", got, err)
	}
	if err := c.networkCreate(ctx, n); err != nil {
		t.Fatal(err)
	}
	nets, err := c.ListAllNetworks(ctx)
	if err != nil || !containsName(nets, name, func(n Network) string { return n.Name }) {
		t.Fatalf("ListAllNetworks = %v, %v", nets, err)
	}
	ifaces, err := c.ListAllInterfaces(ctx)
	if err != nil || !containsName(ifaces, bridge, func(i Interface) string { return i.Name }) {
		t.Fatalf("ListAllInterfaces = %v, %v; want bridge %s", ifaces, err, bridge)
	}
	if leases, err := c.networkDHCPLeases(ctx, n, ""); err != nil || len(leases) != 0 {
		t.Fatalf("networkDHCPLeases = %v, %v", leases, err)
	}
	if err := c.networkDestroy(ctx, n); err != nil {
		t.Fatal(err)
	}
	if err := c.NetworkUndefine(ctx, n); err != nil {
		t.Fatal(err)
	}
	if _, err := c.NetworkLookupByName(ctx, name); !IsNotFound(err) {
		t.Fatalf("undefined network lookup: %v", err)
	}
}

// The test driver is served remotely too; it starts with one running domain "test", a pool
// "default-pool" and a network "default".
func TestTestDriver(t *testing.T) {
	l := needLab(t)
	c := l.dial(t, "test:///default")
	ctx := testContext(t)
	dom, err := c.DomainLookupByName(ctx, "test")
	if err != nil {
		t.Fatal(err)
	}
	if st, _, err := c.DomainState(ctx, dom); err != nil || st != DomainRunning {
		t.Fatalf("test domain state = %v, %v", st, err)
	}
	if _, err := c.StoragePoolLookupByName(ctx, "default-pool"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.NetworkLookupByName(ctx, "default"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.NetworkLookupByName(ctx, "absent"); !IsNotFound(err) {
		t.Fatalf("absent network: %v", err)
	}
	if _, err := c.StoragePoolLookupByName(ctx, "absent"); !IsNotFound(err) {
		t.Fatalf("absent pool: %v", err)
	}
	caps, err := c.Capabilities(ctx)
	if err != nil || !strings.Contains(caps, "<capabilities>") {
		t.Fatalf("Capabilities = %.80q, %v", caps, err)
	}
}

func TestCapabilitiesDomainType(t *testing.T) {
	l := needLab(t)
	c := l.dial(t, "qemu:///system")
	caps, err := c.Capabilities(testContext(t))
	if err != nil {
		t.Fatal(err)
	}
	ty, err := DomainType(caps, "x86_64")
	if err != nil || (ty != "kvm" && ty != "qemu") {
		t.Fatalf("DomainType = %q, %v", ty, err)
	}
	_, hasKVM := os.Stat("/dev/kvm")
	t.Logf("domain type %s (/dev/kvm present: %v)", ty, hasKVM == nil)
}

func containsName[T any](xs []T, name string, nameOf func(T) string) bool {
	for _, x := range xs {
		if nameOf(x) == name {
			return true
		}
	}
	return false
}

func asError(err error, target **Error) bool { return errors.As(err, target) }
