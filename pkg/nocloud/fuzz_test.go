package nocloud

import (
	"bytes"
	"flag"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"go.yaml.in/yaml/v3"
)

// FuzzSeed feeds arbitrary identifiers and payloads to Build. It must never
// panic, and whatever it accepts must give a meta-data that parses back to
// exactly the two values given. Run as a normal test, the committed corpus
// is also read back with isoinfo.
func FuzzSeed(f *testing.F) {
	fuzzing := flag.Lookup("test.fuzz").Value.String() != ""
	f.Fuzz(func(t *testing.T, instanceID, hostname string, userData, networkConfig []byte) {
		s := Seed{InstanceID: instanceID, Hostname: hostname, UserData: userData, NetworkConfig: networkConfig}
		im, err := s.Build()
		if err != nil {
			return
		}
		var meta map[string]string
		if err := yaml.Unmarshal(s.MetaData(), &meta); err != nil {
			t.Fatalf("meta-data %q is not YAML: %v", s.MetaData(), err)
		}
		if len(meta) != 2 || meta["instance-id"] != instanceID || meta["local-hostname"] != hostname {
			t.Fatalf("meta-data %q parses as %v", s.MetaData(), meta)
		}
		var buf bytes.Buffer
		if n, err := im.WriteTo(&buf); err != nil || n != im.Size() || int64(buf.Len()) != n {
			t.Fatalf("WriteTo wrote %d of %d bytes: %v", n, im.Size(), err)
		}
		if fuzzing {
			return
		}
		if _, err := exec.LookPath("isoinfo"); err != nil {
			return // TestSeedReadBack reports the missing tool
		}
		path := filepath.Join(t.TempDir(), "seed.iso")
		if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		want := map[string][]byte{"meta-data": s.MetaData(), "user-data": userData, "network-config": networkConfig}
		for name, data := range want {
			if data == nil {
				continue
			}
			if got := run(t, "isoinfo", "-J", "-i", path, "-x", "/"+name); !bytes.Equal(got, data) {
				t.Errorf("%s: isoinfo extracted %q, want %q", name, got, data)
			}
		}
	})
}

// FuzzNetworkConfigV2 renders one static NIC from arbitrary fields. Anything
// accepted must be YAML whose single interface carries the values given.
func FuzzNetworkConfigV2(f *testing.F) {
	f.Fuzz(func(t *testing.T, name, mac, address string, prefix uint8, gateway, nameserver, domain string) {
		nic := NIC{Name: name, MAC: mac, Static: &StaticIP{
			Address: address, Prefix: prefix, Gateway: gateway, Domain: domain,
		}}
		if nameserver != "" {
			nic.Static.Nameservers = []string{nameserver}
		}
		out, err := NetworkConfigV2([]NIC{nic})
		if err != nil {
			return
		}
		var doc struct {
			Version   int
			Ethernets map[string]struct {
				Addresses   []string
				Routes      []struct{ To, Via string }
				Nameservers struct{ Addresses, Search []string }
			}
		}
		if err := yaml.Unmarshal(out, &doc); err != nil {
			t.Fatalf("not YAML: %v\n%s", err, out)
		}
		eth, ok := doc.Ethernets[name]
		if doc.Version != 2 || len(doc.Ethernets) != 1 || !ok || len(eth.Addresses) != 1 {
			t.Fatalf("unexpected structure %+v\n%s", doc, out)
		}
		p, err := netip.ParsePrefix(eth.Addresses[0])
		if want, _ := netip.ParseAddr(address); err != nil || p.Addr() != want.Unmap() || p.Bits() != int(prefix) {
			t.Fatalf("address %q from %q/%d", eth.Addresses[0], address, prefix)
		}
		if (gateway != "") != (len(eth.Routes) == 1) || domain != "" && eth.Nameservers.Search[0] != domain {
			t.Fatalf("routes or search lost\n%s", out)
		}
	})
}
