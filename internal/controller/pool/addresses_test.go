package pool

import (
	"net/netip"
	"slices"
	"testing"
)

func TestParseAddressPool(t *testing.T) {
	tests := []struct {
		entry       string
		first, last string
	}{
		{"192.0.2.10", "192.0.2.10", "192.0.2.10"},
		{" 192.0.2.10 - 192.0.2.19 ", "192.0.2.10", "192.0.2.19"},
		{"198.51.100.0/29", "198.51.100.0", "198.51.100.7"},
		{"198.51.100.7/32", "198.51.100.7", "198.51.100.7"},
		{"10.255.255.254/31", "10.255.255.254", "10.255.255.255"},
		{"0.0.0.0/0", "0.0.0.0", "255.255.255.255"},
	}
	for _, tc := range tests {
		got, err := parseAddressPool([]string{tc.entry})
		if err != nil {
			t.Errorf("%q: %v", tc.entry, err)
			continue
		}
		want := addressRange{toUint32(netip.MustParseAddr(tc.first)), toUint32(netip.MustParseAddr(tc.last))}
		if got[0] != want {
			t.Errorf("%q = %v..%v, want %s..%s", tc.entry, fromUint32(got[0].first), fromUint32(got[0].last), tc.first, tc.last)
		}
	}
}

func TestParseAddressPoolErrors(t *testing.T) {
	tests := []struct{ entry, want string }{
		{"10.0.0.x", `invalid addressing.pool[1] "10.0.0.x": not an IPv4 address, a-b range or CIDR block`},
		{"2001:db8::1", `invalid addressing.pool[1] "2001:db8::1": not an IPv4 address, a-b range or CIDR block`},
		{"10.0.0.9-10.0.0.1", `invalid addressing.pool[1] "10.0.0.9-10.0.0.1": range starts at 10.0.0.9, after its end 10.0.0.1`},
		{"10.0.0.1-", `invalid addressing.pool[1] "10.0.0.1-": a range must be two IPv4 addresses, first-last`},
		{"10.0.1.7/24", `invalid addressing.pool[1] "10.0.1.7/24": host bits are set; the block is 10.0.1.0/24`},
		{"10.0.0.0/33", `invalid addressing.pool[1] "10.0.0.0/33": not an IPv4 CIDR block`},
		{"2001:db8::/64", `invalid addressing.pool[1] "2001:db8::/64": not an IPv4 CIDR block`},
	}
	for _, tc := range tests {
		_, err := parseAddressPool([]string{"192.0.2.1", tc.entry})
		if err == nil || err.Error() != tc.want {
			t.Errorf("%q: error %v, want %q", tc.entry, err, tc.want)
		}
	}
}

func TestDrawAddresses(t *testing.T) {
	ranges := mustRanges(t, "10.0.0.3-10.0.0.5", "10.0.0.4", "10.0.0.0/30", "255.255.255.255")
	inUse := map[netip.Addr]bool{netip.MustParseAddr("10.0.0.4"): true, netip.MustParseAddr("10.0.0.1"): true}
	got := drawAddresses(ranges, inUse, 10)
	want := addrs("10.0.0.3", "10.0.0.5", "10.0.0.0", "10.0.0.2", "255.255.255.255")
	if !slices.Equal(got, want) {
		t.Errorf("drawn %v, want %v (list order, no repeats, none in use, no wrap past the top)", got, want)
	}
	if got := drawAddresses(mustRanges(t, "0.0.0.0/0"), nil, 2); !slices.Equal(got, addrs("0.0.0.0", "0.0.0.1")) {
		t.Errorf("a huge block drew %v; it must stop as soon as enough are found", got)
	}
	if got := drawAddresses(ranges, nil, 0); len(got) != 0 {
		t.Errorf("drew %v when none were wanted", got)
	}
}

func TestParseAddressPoolGuideExample(t *testing.T) {
	// examples/18: ten addresses from the range, then all eight of the /29.
	r := mustRanges(t, "192.0.2.10-192.0.2.19", "198.51.100.0/29")
	got := drawAddresses(r, nil, 100)
	if len(got) != 18 || got[0].String() != "192.0.2.10" || got[9].String() != "192.0.2.19" ||
		got[10].String() != "198.51.100.0" || got[17].String() != "198.51.100.7" {
		t.Errorf("drew %v", got)
	}
}
