package libvirt

import (
	"slices"
	"strings"
	"testing"

	"libvirt.org/go/libvirtxml"

	infrav1 "banlieue.io/banlieue/api/infrastructure/v1alpha1"
)

var testOwner = Owner{UID: "6c1f4a0e-1b2c-4d5e-8f90-0a1b2c3d4e5f", Namespace: "team", Name: "x-vm", Provider: "lab-host"}

// TestDomainOwnerReadsLibvirtsForm parses the record the way libvirtd hands it back: libvirt
// re-serialises <metadata> children with its own prefix and namespace declaration, so the
// record is matched by namespace URI, never by prefix or by the text banlieue wrote.
func TestDomainOwnerReadsLibvirtsForm(t *testing.T) {
	tests := []struct {
		name     string
		metadata string
		want     Owner
		ok       bool
	}{
		{"as written", mustMetadata(t, testOwner), testOwner, true},
		{"libvirt's prefix and another tool's element first",
			`<nova:instance xmlns:nova="http://openstack.org/xmlns/libvirt/nova/1.1"><nova:name>x</nova:name></nova:instance>` +
				`<other:owner xmlns:other="https://banlieue.io/xmlns/libvirt/owner/v1" uid="u-1" namespace="ns" name="n" provider="p"/>`,
			Owner{UID: "u-1", Namespace: "ns", Name: "n", Provider: "p"}, true},
		{"same element name in another namespace", `<x:owner xmlns:x="urn:someone-else" uid="u-1"/>`, Owner{}, false},
		{"record without a uid", `<b:owner xmlns:b="https://banlieue.io/xmlns/libvirt/owner/v1" name="n"/>`, Owner{}, false},
		{"not well-formed", `<b:owner xmlns:b="https://banlieue.io/xmlns/libvirt/owner/v1" uid="u`, Owner{}, false},
		{"larger than parsed", `<b:owner xmlns:b="https://banlieue.io/xmlns/libvirt/owner/v1" uid="u-1"/>` + strings.Repeat(" ", maxMetadata), Owner{}, false},
		{"none", "", Owner{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := DomainOwner(&libvirtxml.Domain{Metadata: &libvirtxml.DomainMetadata{XML: tt.metadata}})
			if got != tt.want || ok != tt.ok {
				t.Errorf("DomainOwner = %+v, %v; want %+v, %v", got, ok, tt.want, tt.ok)
			}
		})
	}
	if _, ok := DomainOwner(&libvirtxml.Domain{}); ok {
		t.Error("a domain without <metadata> has no owner")
	}
}

// TestOwnerMetadataEscapes: names come from the API, and a record must not become markup.
func TestOwnerMetadataEscapes(t *testing.T) {
	evil := Owner{UID: `u"/><x y="`, Namespace: "a&b", Name: "<n>", Provider: "p'q"}
	got, ok := DomainOwner(&libvirtxml.Domain{Metadata: &libvirtxml.DomainMetadata{XML: mustMetadata(t, evil)}})
	if !ok || got != evil {
		t.Errorf("round trip: %+v %v, want %+v", got, ok, evil)
	}
}

func TestPlanVolumes(t *testing.T) {
	needed := []string{"d-os.qcow2", "d-data.qcow2", "d-cidata.iso"}
	tests := []struct {
		name         string
		exists       []string
		recorded     []string
		wantMissing  []string
		wantStranger string
	}{
		{"first pass: nothing exists, all recorded first", nil, nil, needed, ""},
		{"converged", needed, needed, nil, ""},
		{"crash after recording, before creating", []string{"d-os.qcow2"}, needed, nil, ""},
		{"a new disk in the spec", []string{"d-os.qcow2", "d-cidata.iso"}, []string{"d-os.qcow2", "d-cidata.iso"}, []string{"d-data.qcow2"}, ""},
		{"a stranger's disk under a needed name", []string{"d-data.qcow2"}, nil, nil, "d-data.qcow2"},
		{"a stranger's seed while the disks are ours", needed, []string{"d-os.qcow2", "d-data.qcow2"}, nil, "d-cidata.iso"},
		{"recorded volumes no longer needed are not this pass's concern", nil, []string{"d-old.qcow2"}, needed, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			missing, stranger := planVolumes(needed, func(n string) bool { return slices.Contains(tt.exists, n) }, tt.recorded)
			if !slices.Equal(missing, tt.wantMissing) || stranger != tt.wantStranger {
				t.Errorf("planVolumes = %v, %q; want %v, %q", missing, stranger, tt.wantMissing, tt.wantStranger)
			}
		})
	}
}

func TestConflictMessagesNameTheHolder(t *testing.T) {
	foreign := &libvirtxml.Domain{Name: "team-x-vm"}
	if err := domainConflict(foreign); conflictReason(err) != infrav1.ReasonDomainNameConflict ||
		!strings.Contains(err.Error(), `domain "team-x-vm"`) || !strings.Contains(err.Error(), "not created by banlieue") {
		t.Errorf("foreign domain: %v (%s)", err, conflictReason(err))
	}
	other := &libvirtxml.Domain{Name: "team-x-vm", Metadata: &libvirtxml.DomainMetadata{XML: mustMetadata(t, testOwner)}}
	if err := domainConflict(other); !strings.Contains(err.Error(), "LibvirtMachine team/x-vm (uid "+testOwner.UID+")") {
		t.Errorf("another machine's domain: %v", err)
	}
	if err := volumeConflict("web-data-os.qcow2", "default"); conflictReason(err) != infrav1.ReasonVolumeNameConflict ||
		!strings.Contains(err.Error(), `volume "web-data-os.qcow2" already exists in pool "default"`) {
		t.Errorf("volume: %v (%s)", err, conflictReason(err))
	}
}

func mustMetadata(t *testing.T, o Owner) string {
	t.Helper()
	md, err := o.metadata()
	if err != nil {
		t.Fatal(err)
	}
	return md.XML
}
