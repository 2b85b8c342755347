package nocloud

import (
	"fmt"
	"net"
	"net/netip"
	"strings"
)

// NIC is a guest network interface as the LibvirtMachine spec describes it.
type NIC struct {
	// Name is the interface name in the guest, applied with set-name when
	// MAC is known. It must be a valid Linux interface name.
	Name string
	// MAC identifies the interface. When empty the interface is matched by
	// Name instead, so the guest must already call it that (for instance
	// eth0 on a kernel without predictable names); MAC is empty when the
	// spec leaves the address to libvirt.
	MAC string
	// Static is the static IPAM configuration; nil means DHCPv4.
	Static *StaticIP
}

// StaticIP is a static address with its routing and DNS settings.
type StaticIP struct {
	Address string
	Prefix  uint8
	// Gateway, when set, becomes the default route; it must be of the
	// address's family.
	Gateway     string
	Nameservers []string
	// Domain, when set, is the DNS search domain.
	Domain string
}

// NetworkConfigV2 renders a cloud-init network config version 2 for nics,
// in their order. It returns nil when no NIC is static: without a
// network-config file cloud-init configures DHCP on its own.
//
// Every value is validated and then written double-quoted, so no input can
// change the document's structure or be read as another YAML type (a MAC
// like 52:54:00:12:34:56 is a base-60 integer to a YAML 1.1 parser).
func NetworkConfigV2(nics []NIC) ([]byte, error) {
	static := false
	for _, n := range nics {
		static = static || n.Static != nil
	}
	if !static {
		return nil, nil
	}
	var b strings.Builder
	b.WriteString("version: 2\nethernets:\n")
	names, macs := map[string]bool{}, map[string]bool{}
	for _, n := range nics {
		if err := checkInterfaceName(n.Name); err != nil {
			return nil, err
		}
		if names[n.Name] {
			return nil, fmt.Errorf("nocloud: duplicate interface name %q", n.Name)
		}
		names[n.Name] = true
		fmt.Fprintf(&b, "  %q:\n    match:\n", n.Name)
		if n.MAC == "" {
			fmt.Fprintf(&b, "      name: %q\n", n.Name)
		} else {
			mac, err := net.ParseMAC(n.MAC)
			if err != nil || len(mac) != 6 {
				return nil, fmt.Errorf("nocloud: interface %q: MAC address %q is not a 48-bit MAC", n.Name, n.MAC)
			}
			if macs[mac.String()] {
				return nil, fmt.Errorf("nocloud: interface %q: duplicate MAC address %s", n.Name, mac)
			}
			macs[mac.String()] = true
			fmt.Fprintf(&b, "      macaddress: %q\n    set-name: %q\n", mac, n.Name)
		}
		if n.Static == nil {
			b.WriteString("    dhcp4: true\n")
			continue
		}
		if err := writeStatic(&b, n.Static); err != nil {
			return nil, fmt.Errorf("nocloud: interface %q: %w", n.Name, err)
		}
	}
	return []byte(b.String()), nil
}

// writeStatic renders the addresses, routes and nameservers of one NIC.
// Addresses are re-rendered from their parsed form, which both canonicalises
// them and guarantees they need no escaping.
func writeStatic(b *strings.Builder, s *StaticIP) error {
	addr, err := netip.ParseAddr(s.Address)
	if err != nil || addr.Zone() != "" {
		return fmt.Errorf("address %q is not an IP address", s.Address)
	}
	addr = addr.Unmap()
	if int(s.Prefix) > addr.BitLen() {
		return fmt.Errorf("prefix length %d is too long for %s", s.Prefix, addr)
	}
	fmt.Fprintf(b, "    addresses:\n      - %q\n", netip.PrefixFrom(addr, int(s.Prefix)))
	if s.Gateway != "" {
		gw, err := parseIP(s.Gateway, "gateway")
		if err != nil {
			return err
		}
		if gw.Is4() != addr.Is4() {
			return fmt.Errorf("gateway %s is not of the same family as %s", gw, addr)
		}
		fmt.Fprintf(b, "    routes:\n      - to: \"default\"\n        via: %q\n", gw)
	}
	if len(s.Nameservers) == 0 && s.Domain == "" {
		return nil
	}
	b.WriteString("    nameservers:\n")
	if len(s.Nameservers) > 0 {
		b.WriteString("      addresses:\n")
		for _, ns := range s.Nameservers {
			ip, err := parseIP(ns, "nameserver")
			if err != nil {
				return err
			}
			fmt.Fprintf(b, "        - %q\n", ip)
		}
	}
	if s.Domain != "" {
		if err := checkDomain(s.Domain); err != nil {
			return err
		}
		fmt.Fprintf(b, "      search:\n        - %q\n", s.Domain)
	}
	return nil
}

func parseIP(s, what string) (netip.Addr, error) {
	ip, err := netip.ParseAddr(s)
	if err != nil || ip.Zone() != "" {
		return netip.Addr{}, fmt.Errorf("%s %q is not an IP address", what, s)
	}
	return ip.Unmap(), nil
}

// checkInterfaceName applies the kernel's rules (dev_valid_name: at most 15
// bytes, not "." or "..", no '/', ':' or whitespace), narrowed to a set that
// needs no YAML escaping.
func checkInterfaceName(name string) error {
	if name == "" || len(name) > 15 || name == "." || name == ".." {
		return fmt.Errorf("nocloud: interface name %q must be 1-15 bytes and not \".\" or \"..\"", name)
	}
	for i := 0; i < len(name); i++ {
		if c := name[i]; !isAlnum(c) && c != '-' && c != '_' && c != '.' {
			return fmt.Errorf("nocloud: interface name %q has %q; only letters, digits, '-', '_' and '.' are allowed", name, c)
		}
	}
	return nil
}

// checkDomain accepts a DNS name: dot-separated labels of 1-63 letters,
// digits and hyphens, not starting or ending with a hyphen, 253 bytes at
// most.
func checkDomain(d string) error {
	if len(d) > 253 {
		return fmt.Errorf("search domain %q is longer than 253 bytes", d)
	}
	for label := range strings.SplitSeq(d, ".") {
		ok := label != "" && len(label) <= 63 && label[0] != '-' && label[len(label)-1] != '-'
		for i := 0; ok && i < len(label); i++ {
			ok = isAlnum(label[i]) || label[i] == '-'
		}
		if !ok {
			return fmt.Errorf("search domain %q is not a DNS name", d)
		}
	}
	return nil
}

func isAlnum(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
}
