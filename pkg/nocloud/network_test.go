package nocloud

import (
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

func TestNetworkConfigV2(t *testing.T) {
	nics := []NIC{
		{Name: "eth0", MAC: "52:54:00:AB:cd:01", Static: &StaticIP{
			Address: "192.168.10.5", Prefix: 24, Gateway: "192.168.10.1",
			Nameservers: []string{"192.168.10.1", "2001:db8::53"}, Domain: "lab.example.com",
		}},
		{Name: "eth1", MAC: "52-54-00-ab-cd-02"},
		{Name: "data0", Static: &StaticIP{Address: "2001:db8:0:0::10", Prefix: 64, Gateway: "2001:db8::1"}},
		{Name: "eth3", MAC: "52:54:00:ab:cd:03", Static: &StaticIP{Address: "10.0.0.2", Prefix: 8}},
	}
	got, err := NetworkConfigV2(nics)
	if err != nil {
		t.Fatal(err)
	}
	const want = `version: 2
ethernets:
  "eth0":
    match:
      macaddress: "52:54:00:ab:cd:01"
    set-name: "eth0"
    addresses:
      - "192.168.10.5/24"
    routes:
      - to: "default"
        via: "192.168.10.1"
    nameservers:
      addresses:
        - "192.168.10.1"
        - "2001:db8::53"
      search:
        - "lab.example.com"
  "eth1":
    match:
      macaddress: "52:54:00:ab:cd:02"
    set-name: "eth1"
    dhcp4: true
  "data0":
    match:
      name: "data0"
    addresses:
      - "2001:db8::10/64"
    routes:
      - to: "default"
        via: "2001:db8::1"
  "eth3":
    match:
      macaddress: "52:54:00:ab:cd:03"
    set-name: "eth3"
    addresses:
      - "10.0.0.2/8"
`
	if string(got) != want {
		t.Errorf("got:\n%s\nwant:\n%s", got, want)
	}

	// Independently of the exact text, a YAML parser must see the v2 schema.
	var doc struct {
		Version   int
		Ethernets map[string]struct {
			Match struct {
				MACAddress string `yaml:"macaddress"`
				Name       string
			}
			SetName     string `yaml:"set-name"`
			DHCP4       bool
			Addresses   []string
			Routes      []struct{ To, Via string }
			Nameservers struct{ Addresses, Search []string }
		}
	}
	if err := yaml.Unmarshal(got, &doc); err != nil {
		t.Fatalf("not YAML: %v", err)
	}
	eth0 := doc.Ethernets["eth0"]
	if doc.Version != 2 || len(doc.Ethernets) != 4 || eth0.Match.MACAddress != "52:54:00:ab:cd:01" ||
		eth0.Routes[0].Via != "192.168.10.1" || eth0.Nameservers.Search[0] != "lab.example.com" ||
		!doc.Ethernets["eth1"].DHCP4 || doc.Ethernets["data0"].Match.Name != "data0" {
		t.Errorf("parsed %+v", doc)
	}
}

func TestNetworkConfigV2NoStatic(t *testing.T) {
	for _, nics := range [][]NIC{nil, {{Name: "eth0", MAC: "52:54:00:00:00:01"}}} {
		got, err := NetworkConfigV2(nics)
		if got != nil || err != nil {
			t.Errorf("%v: got %q, %v; want nil, nil", nics, got, err)
		}
	}
}

func TestNetworkConfigV2Errors(t *testing.T) {
	static := func(s StaticIP) *StaticIP { return &s }
	ok := static(StaticIP{Address: "10.0.0.2", Prefix: 24})
	tests := []struct {
		name string
		nics []NIC
		want string
	}{
		{"empty name", []NIC{{Static: ok}}, "1-15 bytes"},
		{"long name", []NIC{{Name: "abcdefghijklmnop", Static: ok}}, "1-15 bytes"},
		{"name with colon", []NIC{{Name: "eth0:1", Static: ok}}, "has ':'"},
		{"name with newline", []NIC{{Name: "a\nb", Static: ok}}, `has '\n'`},
		{"duplicate name", []NIC{{Name: "a", Static: ok}, {Name: "a"}}, "duplicate interface name"},
		{"bad MAC", []NIC{{Name: "a", MAC: "52:54:00", Static: ok}}, "not a 48-bit MAC"},
		{"EUI-64", []NIC{{Name: "a", MAC: "02:00:5e:10:00:00:00:01", Static: ok}}, "not a 48-bit MAC"},
		{"duplicate MAC", []NIC{{Name: "a", MAC: "52:54:00:00:00:01", Static: ok}, {Name: "b", MAC: "52:54:00:00:00:01"}}, "duplicate MAC"},
		{"bad address", []NIC{{Name: "a", Static: static(StaticIP{Address: "10.0.0.256", Prefix: 24})}}, "not an IP address"},
		{"zone", []NIC{{Name: "a", Static: static(StaticIP{Address: "fe80::1%eth0", Prefix: 64})}}, "not an IP address"},
		{"v4 prefix", []NIC{{Name: "a", Static: static(StaticIP{Address: "10.0.0.2", Prefix: 33})}}, "prefix length 33"},
		{"v6 prefix", []NIC{{Name: "a", Static: static(StaticIP{Address: "2001:db8::2", Prefix: 129})}}, "prefix length 129"},
		{"bad gateway", []NIC{{Name: "a", Static: static(StaticIP{Address: "10.0.0.2", Prefix: 24, Gateway: "gw"})}}, `gateway "gw"`},
		{"gateway family", []NIC{{Name: "a", Static: static(StaticIP{Address: "10.0.0.2", Prefix: 24, Gateway: "2001:db8::1"})}}, "same family"},
		{"bad nameserver", []NIC{{Name: "a", Static: static(StaticIP{Address: "10.0.0.2", Prefix: 24, Nameservers: []string{"dns"}})}}, `nameserver "dns"`},
		{"bad domain", []NIC{{Name: "a", Static: static(StaticIP{Address: "10.0.0.2", Prefix: 24, Domain: "a..b"})}}, "not a DNS name"},
		{"domain injection", []NIC{{Name: "a", Static: static(StaticIP{Address: "10.0.0.2", Prefix: 24, Domain: "x\"\n  evil: 1"})}}, "not a DNS name"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := NetworkConfigV2(tt.nics)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got %q, err %v; want an error mentioning %q", got, err, tt.want)
			}
		})
	}
}
