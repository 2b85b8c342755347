package libvirt

import (
	"errors"
	"strings"
	"testing"

	"libvirt.org/go/libvirtxml"

	infrav1 "banlieue.io/banlieue/api/infrastructure/v1alpha1"
)

// movedDomainXML is a definition as renderDomain makes it for a machine with an OS disk, a
// data disk, the seed and one interface, on pool path /pools/a.
func movedDomainXML(t *testing.T, owner Owner) string {
	t.Helper()
	spec := &infrav1.LibvirtMachineSpec{DomainName: "ns-web", VCPUs: 1, MemoryMiB: 128, Pool: "a",
		BootSource: infrav1.BootSource{Kind: infrav1.BootBackingVolume, Volume: "base-1234.qcow2"},
		Disks:      []infrav1.LibvirtDisk{{Name: "os"}, {Name: "data"}},
		Network:    []infrav1.LibvirtNetworkInterface{{Name: "eth0", Source: infrav1.NetworkSource{Kind: infrav1.SourceNetwork, Name: "net-a"}}}}
	xml, err := renderDomain(domainInputs{spec: spec, owner: owner, domainType: "qemu", uuid: "6f1c0ad2-4bd4-4b54-9d2f-3d1c1b6d7e01",
		diskPaths: []string{"/pools/a/ns-web-os.qcow2", "/pools/a/ns-web-data.qcow2"}, seed: "/pools/a/ns-web-cidata.iso"})
	if err != nil {
		t.Fatal(err)
	}
	return xml
}

func TestMigrationDestXML(t *testing.T) {
	src := Owner{UID: "u-1", Namespace: "ns", Name: "web", Provider: "host-a"}
	dst := Owner{UID: "u-1", Namespace: "ns", Name: "web", Provider: "host-b", ProviderNamespace: "fleet"}
	def := movedDomainXML(t, src)

	got, err := migrationDestXML(def, "/pools/a", "/pools/b/", map[string]string{"net-a": "net-b"}, dst)
	if err != nil {
		t.Fatal(err)
	}
	var dom libvirtxml.Domain
	if err := dom.Unmarshal(got); err != nil {
		t.Fatal(err)
	}
	var files []string
	for _, d := range dom.Devices.Disks {
		if d.Source != nil && d.Source.File != nil {
			files = append(files, d.Source.File.File)
		}
	}
	if want := "/pools/b/ns-web-os.qcow2 /pools/b/ns-web-data.qcow2 /pools/b/ns-web-cidata.iso"; strings.Join(files, " ") != want {
		t.Errorf("disk files %v, want %s", files, want)
	}
	if n := dom.Devices.Interfaces[0].Source.Network.Network; n != "net-b" {
		t.Errorf("interface network %s, want net-b", n)
	}
	if o, ok := DomainOwner(&dom); !ok || o != dst {
		t.Errorf("ownership record %+v (%v), want %+v", o, ok, dst)
	}
	if strings.Contains(got, "/pools/a") || strings.Contains(got, "host-a") {
		t.Errorf("the destination XML still names the source:\n%s", got)
	}

	for _, tc := range []struct {
		name     string
		def      string
		networks map[string]string
		reason   string
	}{
		{"an unmapped network refuses", def, map[string]string{"other": "net-b"}, reasonNetworkUnmapped},
		{"a disk outside the pool refuses", strings.Replace(def, "/pools/a/ns-web-data.qcow2", "/srv/data.qcow2", 1),
			map[string]string{"net-a": "net-b"}, reasonDiskOutsidePool},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := migrationDestXML(tc.def, "/pools/a", "/pools/b", tc.networks, dst)
			var me *moveError
			if !errors.As(err, &me) || me.Reason != tc.reason || me.Step != stepPrepareTarget {
				t.Fatalf("error %v, want %s at %s", err, tc.reason, stepPrepareTarget)
			}
		})
	}
}

// TestWithOwnerKeepsOtherMetadata: another tool's element in <metadata> survives the move.
func TestWithOwnerKeepsOtherMetadata(t *testing.T) {
	old, _ := Owner{UID: "u", Namespace: "n", Name: "m", Provider: "a"}.metadata()
	next, _ := Owner{UID: "u", Namespace: "n", Name: "m", Provider: "b"}.metadata()
	other := `<x:tag xmlns:x="https://example.com/x">keep</x:tag>`
	got := withOwner(&libvirtxml.DomainMetadata{XML: other + old.XML}, next)
	if got.XML != other+next.XML {
		t.Errorf("metadata %q, want %q", got.XML, other+next.XML)
	}
	if got := withOwner(&libvirtxml.DomainMetadata{XML: other}, next); got.XML != other+next.XML {
		t.Errorf("metadata without a record: %q", got.XML)
	}
}

func TestDiskTargets(t *testing.T) {
	def := movedDomainXML(t, Owner{UID: "u", Namespace: "ns", Name: "web", Provider: "a"})
	got, err := diskTargets(def, "/pools/a", []string{"ns-web-os.qcow2", "ns-web-data.qcow2"})
	if err != nil || strings.Join(got, ",") != "vda,vdb" {
		t.Fatalf("targets %v (%v), want vda,vdb: the seed is copied beforehand, not by NBD", got, err)
	}
	if _, err := diskTargets(def, "/pools/a", []string{"ns-web-os.qcow2", "ns-web-gone.qcow2"}); err == nil {
		t.Fatal("a disk volume the definition does not name was accepted")
	}
}

func TestDecideMove(t *testing.T) {
	running, job := hostView{Defined: true, Running: true}, hostView{Defined: true, Running: true, Job: true}
	off, none := hostView{Defined: true}, hostView{}
	for _, tc := range []struct {
		name     string
		src, dst hostView
		want     moveOutcome
	}{
		{"copy under way", job, hostView{Defined: true, Running: true}, moveUnderWay},
		{"the incoming side's job", running, job, moveUnderWay},
		{"never reached the target", running, none, moveStayed},
		{"failed, the target's incoming domain gone", running, none, moveStayed},
		{"done, the source's definition left", off, running, moveDone},
		{"done, the source cleaned", none, running, moveDone},
		{"both run: leave everything", running, running, moveUnclear},
		{"neither runs: leave everything", off, none, moveUnclear},
		{"the source's job over, the target's incoming domain left: stayed", running,
			hostView{Defined: true, Running: true, Incoming: true}, moveStayed},
		{"the target receiving while the source's job runs", job, hostView{Defined: true, Running: true, Incoming: true}, moveUnderWay},
		{"an incoming domain and no source: leave everything", off, hostView{Defined: true, Running: true, Incoming: true}, moveUnclear},
	} {
		if got := decideMove(tc.src, tc.dst); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}
