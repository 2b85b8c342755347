package labhost

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"banlieue.io/banlieue/internal/testenv"
)

// NATNetwork is a libvirt network with NAT and DHCP on the lab libvirtd: guests on it get their
// address from its dnsmasq, which leases from .100 to .199 of its /24.
type NATNetwork struct {
	Name   string
	Bridge string // the host bridge libvirtd makes for it (at most 15 characters)
	// Subnet is the /24's first three octets and a dot, e.g. "198.18.64.": inside 198.18.0.0/15,
	// reserved for benchmarking (RFC 2544), so it is nobody's real network. Suites that run one
	// after another on the lab may share one; two networks alive at once need two. The lab's own
	// (hack/lab.sh, alive while the lab is up) is 198.18.66.; taken by suites: 198.18.64.
	// (test/e2e/cloudguest), 198.18.65. (test/capi), 198.18.67. (test/e2e/migration), 198.18.68.
	// (internal/provider/libvirt's moves through the providers, on the migration lab).
	Subnet string
}

// Gateway is the host's address on the network.
func (n NATNetwork) Gateway() string { return n.Subnet + "1" }

// StartNATNetwork starts n as a transient network on the lab libvirtd (in the lab's namespaces:
// libvirtd makes the bridge, runs its dnsmasq and adds its NAT rules), and destroys it when t
// ends: a transient network leaves no definition behind. virsh starts it because banlieue never
// starts networks (pkg/libvirt has no such call outside its tests). Start it before the Provider
// that names it, so the Provider finds it, and register it before the domains' cleanup, so it is
// removed after them.
func StartNATNetwork(t testing.TB, lab testenv.LibvirtLab, n NATNetwork) {
	t.Helper()
	xml := fmt.Sprintf(`<network><name>%s</name><forward mode='nat'/><bridge name='%s' stp='off'/>`+
		`<ip address='%s' netmask='255.255.255.0'><dhcp><range start='%s100' end='%s199'/></dhcp></ip></network>`,
		n.Name, n.Bridge, n.Gateway(), n.Subnet, n.Subnet)
	file := filepath.Join(t.TempDir(), "network.xml")
	if err := os.WriteFile(file, []byte(xml), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := virsh(lab, "net-create", file); err != nil {
		testenv.MissingPrerequisite(t, "starting a libvirt NAT network on the lab (virsh, dnsmasq): "+err.Error())
	}
	t.Cleanup(func() {
		if _, err := virsh(lab, "net-destroy", n.Name); err != nil {
			t.Error(err)
		}
	})
}

// Lease is one DHCP lease of a libvirt network, as its dnsmasq handed it out.
type Lease struct {
	MAC     string // lower case
	Address string
	Prefix  int
}

// Leases are the network's current DHCP leases, read with virsh net-dhcp-leases: libvirt's own
// account, independent of the provider's.
func Leases(t testing.TB, lab testenv.LibvirtLab, network string) []Lease {
	t.Helper()
	out, err := virsh(lab, "net-dhcp-leases", network)
	if err != nil {
		t.Fatal(err)
	}
	var leases []Lease
	for _, line := range strings.Split(out, "\n") {
		// Expiry date and time, MAC, protocol, address/prefix, hostname, client id.
		f := strings.Fields(line)
		if len(f) < 5 || (f[3] != "ipv4" && f[3] != "ipv6") {
			continue // the header, its rule, blank lines
		}
		addr, prefix, ok := strings.Cut(f[4], "/")
		p, err := strconv.Atoi(prefix)
		if !ok || err != nil {
			t.Fatalf("net-dhcp-leases %s: address %q has no prefix:\n%s", network, f[4], out)
		}
		leases = append(leases, Lease{MAC: strings.ToLower(f[2]), Address: addr, Prefix: p})
	}
	t.Logf("network %s leases %+v", network, leases)
	return leases
}

// virsh runs virsh against the lab libvirtd with the lab's client certificate, under a deadline.
func virsh(lab testenv.LibvirtLab, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	args = append([]string{"--connect", lab.Endpoint + "?pkipath=" + lab.PKI}, args...)
	out, err := exec.CommandContext(ctx, "virsh", args...).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("virsh %s: %v: %s", strings.Join(args[2:], " "), err, out)
	}
	return string(out), nil
}
