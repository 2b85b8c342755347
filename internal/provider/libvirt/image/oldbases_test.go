package image

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	infrav1 "banlieue.io/banlieue/api/infrastructure/v1alpha1"
	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
	"banlieue.io/banlieue/internal/imagebuilder/checksum"
	providerlibvirt "banlieue.io/banlieue/internal/provider/libvirt"
	"banlieue.io/banlieue/pkg/libvirt"
)

const digestB = "fedcba9876543210fedcba9876543210fedcba9876543210fedcba9876543210"

func vol(name string) libvirt.StorageVol {
	return libvirt.StorageVol{Pool: "p", Name: name, Key: "/pools/p/" + name}
}

func TestOldBaseCandidates(t *testing.T) {
	current := providerlibvirt.ArtifactVolumeName("img", digestB, false)
	old := providerlibvirt.ArtifactVolumeName("img", digestA, false)
	oldISO := providerlibvirt.ArtifactVolumeName("img", digestA, true)
	unmarked := providerlibvirt.ArtifactVolumeName("img", strings.Repeat("1", 64), false)
	vols := []libvirt.StorageVol{
		vol(current), vol(markerName(current)),
		vol(oldISO), vol(markerName(oldISO)),
		vol(old), vol(markerName(old)),
		vol(unmarked), // a stranger's, or one whose marker went first
		vol(markerName(providerlibvirt.ArtifactVolumeName("img", strings.Repeat("2", 64), false))), // a marker alone
		vol(providerlibvirt.ArtifactVolumeName("img.raw", digestA, false)), vol(markerName(providerlibvirt.ArtifactVolumeName("img.raw", digestA, false))),
		vol("vm-os.qcow2"),
	}
	got := oldBaseCandidates("img", current, vols)
	if len(got) != 2 || got[0].vol.Name != oldISO || got[1].vol.Name != old {
		t.Fatalf("candidates = %+v; want %s and %s, by name", got, oldISO, old)
	}
	if got[1].marker.Name != old+".sha256" || got[1].digest != digestA[:16] {
		t.Errorf("candidate = %+v", got[1])
	}
}

func TestDecideOldBases(t *testing.T) {
	b := oldBase{vol: vol(providerlibvirt.ArtifactVolumeName("img", digestA, false)), digest: digestA[:16]}
	b.marker = vol(markerName(b.vol.Name))
	good := markerFacts{ok: true, state: complete, digest: checksum.Digest{Alg: "sha256", Hex: digestA}}
	all := func(edit func(*baseEvidence)) baseEvidence {
		ev := baseEvidence{machinesRead: true, pinnedRead: true, scanned: true,
			markers: map[string]markerFacts{b.vol.Name: good}, backing: []string{"/pools/p/other.raw"}}
		if edit != nil {
			edit(&ev)
		}
		return ev
	}
	for _, tc := range []struct {
		name   string
		ev     baseEvidence
		remove bool
		why    string
	}{
		{"nothing holds it", all(nil), true, "nothing backs onto it or boots from it"},
		{"machines not listed", all(func(e *baseEvidence) { e.machinesRead = false }), false, "the LibvirtMachines could not be listed"},
		{"a machine boots from it", all(func(e *baseEvidence) { e.referenced = map[string]bool{b.vol.Name: true} }), false, "a LibvirtMachine boots from it"},
		{"another volume's machine", all(func(e *baseEvidence) { e.referenced = map[string]bool{"x.raw": true} }), true, ""},
		{"images not listed", all(func(e *baseEvidence) { e.pinnedRead = false }), false, "the VMImages could not be listed"},
		{"a BackingFile VMImage names it", all(func(e *baseEvidence) { e.pinned = map[string]bool{b.vol.Name: true} }), false, "a BackingFile VMImage names it"},
		{"marker not read", all(func(e *baseEvidence) { e.markers = nil }), false, "its marker was not read, or is not banlieue's"},
		{"marker not banlieue's", all(func(e *baseEvidence) { e.markers[b.vol.Name] = markerFacts{} }), false, "its marker was not read, or is not banlieue's"},
		{"import in progress", all(func(e *baseEvidence) {
			e.markers[b.vol.Name] = markerFacts{ok: true, state: importing, digest: good.digest}
		}), false, "does not prove"},
		{"marker of another digest", all(func(e *baseEvidence) {
			e.markers[b.vol.Name] = markerFacts{ok: true, state: complete, digest: checksum.Digest{Alg: "sha256", Hex: digestB}}
		}), false, "does not prove"},
		{"sha512 marker", all(func(e *baseEvidence) {
			e.markers[b.vol.Name] = markerFacts{ok: true, state: complete, digest: checksum.Digest{Alg: "sha512", Hex: digestA + digestA}}
		}), false, "does not prove"},
		{"pool not scanned", all(func(e *baseEvidence) { e.scanned = false }), false, "the pool's volumes were not all read"},
		{"an overlay backs onto its path", all(func(e *baseEvidence) { e.backing = append(e.backing, b.vol.Key) }), false, "a volume of the pool backs onto it"},
		{"an overlay backs onto its path spelt otherwise", all(func(e *baseEvidence) {
			e.backing = []string{"/pools//p/./" + b.vol.Name}
		}), false, "a volume of the pool backs onto it"},
		{"an overlay backs onto a file of its name elsewhere", all(func(e *baseEvidence) {
			e.backing = []string{"/mnt/link/" + b.vol.Name}
		}), false, "a volume of the pool backs onto it"},
		{"an overlay backs onto a longer name", all(func(e *baseEvidence) {
			e.backing = []string{b.vol.Key + ".bak"}
		}), true, ""},
	} {
		got := decideOldBases([]oldBase{b}, tc.ev)
		if len(got) != 1 || got[0].remove != tc.remove || !strings.Contains(got[0].why, tc.why) {
			t.Errorf("%s: %+v; want remove=%v why %q", tc.name, got, tc.remove, tc.why)
		}
	}
}

func TestBootVolumes(t *testing.T) {
	m := func(ns, provider, providerNs, pool, volume string) infrav1.LibvirtMachine {
		return infrav1.LibvirtMachine{ObjectMeta: metav1.ObjectMeta{Namespace: ns},
			Spec: infrav1.LibvirtMachineSpec{ProviderRef: &infrav1.ProviderReference{Name: provider, Namespace: providerNs},
				Pool: pool, BootSource: infrav1.BootSource{Kind: infrav1.BootBackingVolume, Volume: volume}}}
	}
	// A shared Provider's machines are in other namespaces (team-a's below); a Provider of the
	// same name in another namespace (team-b's own "lab") is another host.
	got := bootVolumes([]infrav1.LibvirtMachine{
		m("sys", "lab", "", "p", "a.raw"), m("sys", "lab", "", "q", "b.raw"), m("sys", "other", "", "p", "c.raw"),
		m("sys", "lab", "", "p", "d.iso"), m("team-a", "lab", "sys", "p", "e.raw"), m("team-b", "lab", "", "p", "f.raw"),
	}, types.NamespacedName{Namespace: "sys", Name: "lab"}, "p")
	if len(got) != 3 || !got["a.raw"] || !got["d.iso"] || !got["e.raw"] {
		t.Errorf("bootVolumes = %v", got)
	}
}

func TestPinnedVolumes(t *testing.T) {
	img := func(kind banlieuev1.ImageSourceKind, class, ref string) banlieuev1.VMImage {
		return banlieuev1.VMImage{Spec: banlieuev1.VMImageSpec{Sources: []banlieuev1.ImageSource{{ProviderClass: class, Kind: kind, Ref: ref}}}}
	}
	got := pinnedVolumes([]banlieuev1.VMImage{
		img(banlieuev1.SourceBackingFile, "libvirt", "/var/lib/libvirt/images/img-0123456789abcdef.raw"),
		img(banlieuev1.SourceBackingFile, "other", "/x/y.raw"),
		img(banlieuev1.SourceURL, "libvirt", ""),
	}, "libvirt")
	if len(got) != 1 || !got["img-0123456789abcdef.raw"] {
		t.Errorf("pinnedVolumes = %v", got)
	}
}

func TestPublishedOn(t *testing.T) {
	p := &banlieuev1.Provider{ObjectMeta: metav1.ObjectMeta{Name: "lab", Namespace: "ns"}}
	rows := []banlieuev1.ProviderImageStatus{
		{ProviderName: "lab", ProviderNamespace: "other", Ready: true, ResolvedRef: "new.raw"},
		{ProviderName: "lab", ProviderNamespace: "ns", Ready: true, ResolvedRef: "old.raw"},
	}
	if publishedOn(rows, p, "new.raw") {
		t.Error("the row still names old.raw, or another Provider's row names new.raw: not published")
	}
	if !publishedOn(rows, p, "old.raw") {
		t.Error("the row names old.raw")
	}
	rows[1].Ready = false
	if publishedOn(rows, p, "old.raw") || publishedOn(nil, p, "old.raw") {
		t.Error("a row not Ready, or no row, is not published")
	}
}
