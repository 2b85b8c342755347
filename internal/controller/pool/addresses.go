package pool

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"strings"
)

// addressRange is an inclusive run of IPv4 addresses. Kept as two numbers rather than a list so
// a large CIDR costs nothing until addresses are drawn from it.
type addressRange struct {
	first, last uint32
}

// parseAddressPool parses addressing.pool (ADR-0056): each entry is a single IPv4 address, an
// inclusive "a-b" range or a CIDR block, network and broadcast addresses included.
func parseAddressPool(entries []string) ([]addressRange, error) {
	ranges := make([]addressRange, 0, len(entries))
	for i, entry := range entries {
		r, err := parseAddressEntry(strings.TrimSpace(entry))
		if err != nil {
			return nil, fmt.Errorf("invalid addressing.pool[%d] %q: %s", i, entry, err)
		}
		ranges = append(ranges, r)
	}
	return ranges, nil
}

func parseAddressEntry(s string) (addressRange, error) {
	switch {
	case strings.Contains(s, "/"):
		p, err := netip.ParsePrefix(s)
		if err != nil || !p.Addr().Is4() {
			return addressRange{}, fmt.Errorf("not an IPv4 CIDR block")
		}
		// A typo such as 10.0.1.7/24 is refused rather than silently widened to 10.0.1.0/24.
		if p.Masked() != p {
			return addressRange{}, fmt.Errorf("host bits are set; the block is %s", p.Masked())
		}
		first := toUint32(p.Addr())
		return addressRange{first: first, last: first | ^uint32(0)>>p.Bits()}, nil
	case strings.Contains(s, "-"):
		lo, hi, _ := strings.Cut(s, "-")
		a, errA := parseIPv4(strings.TrimSpace(lo))
		b, errB := parseIPv4(strings.TrimSpace(hi))
		if errA != nil || errB != nil {
			return addressRange{}, fmt.Errorf("a range must be two IPv4 addresses, first-last")
		}
		if toUint32(a) > toUint32(b) {
			return addressRange{}, fmt.Errorf("range starts at %s, after its end %s", a, b)
		}
		return addressRange{first: toUint32(a), last: toUint32(b)}, nil
	default:
		a, err := parseIPv4(s)
		if err != nil {
			return addressRange{}, fmt.Errorf("not an IPv4 address, a-b range or CIDR block")
		}
		return addressRange{first: toUint32(a), last: toUint32(a)}, nil
	}
}

func parseIPv4(s string) (netip.Addr, error) {
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Addr{}, err
	}
	if !a.Is4() {
		return netip.Addr{}, fmt.Errorf("%s is not IPv4", s)
	}
	return a, nil
}

// drawAddresses returns up to n addresses that are not in use, in list order and low to high
// within each range; fewer when the ranges run out. Overlapping entries never yield an address
// twice.
func drawAddresses(ranges []addressRange, inUse map[netip.Addr]bool, n int) []netip.Addr {
	taken := make(map[netip.Addr]bool, n)
	drawn := make([]netip.Addr, 0, n)
	for _, r := range ranges {
		for v := r.first; len(drawn) < n; v++ {
			a := fromUint32(v)
			if !inUse[a] && !taken[a] {
				taken[a] = true
				drawn = append(drawn, a)
			}
			if v == r.last {
				break
			}
		}
	}
	return drawn
}

func toUint32(a netip.Addr) uint32 {
	b := a.As4()
	return binary.BigEndian.Uint32(b[:])
}

func fromUint32(v uint32) netip.Addr {
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], v)
	return netip.AddrFrom4(b)
}
