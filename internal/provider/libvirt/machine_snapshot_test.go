package libvirt

import (
	"reflect"
	"slices"
	"testing"

	"libvirt.org/go/libvirtxml"

	infrav1 "banlieue.io/banlieue/api/infrastructure/v1alpha1"
	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
	"banlieue.io/banlieue/pkg/libvirt"
)

func snapReq(names ...string) []infrav1.LibvirtMachineSnapshot {
	var out []infrav1.LibvirtMachineSnapshot
	for _, n := range names {
		out = append(out, infrav1.LibvirtMachineSnapshot{Name: n, UID: "uid-" + n})
	}
	return out
}

func snapSt(name string, phase infrav1.LibvirtSnapshotPhase, layers ...infrav1.SnapshotLayer) infrav1.LibvirtMachineSnapshotStatus {
	return infrav1.LibvirtMachineSnapshotStatus{Name: name, Phase: phase, Layers: layers}
}

func TestPlanSnapshots(t *testing.T) {
	taken, recorded, failed, deleting := infrav1.SnapshotTaken, infrav1.SnapshotRecorded, infrav1.SnapshotFailed, infrav1.SnapshotDeleting
	for _, tc := range []struct {
		name   string
		spec   []infrav1.LibvirtMachineSnapshot
		status []infrav1.LibvirtMachineSnapshotStatus
		want   snapshotPlan
	}{
		{"nothing asked", nil, nil, snapshotPlan{step: snapshotNothing}},
		{"all taken", snapReq("a", "b"), []infrav1.LibvirtMachineSnapshotStatus{snapSt("a", taken), snapSt("b", taken)}, snapshotPlan{step: snapshotNothing}},
		{"a failed one stays as reported", snapReq("a"), []infrav1.LibvirtMachineSnapshotStatus{snapSt("a", failed)}, snapshotPlan{step: snapshotNothing}},
		{"the oldest unrecorded is recorded", snapReq("a", "b", "c"), []infrav1.LibvirtMachineSnapshotStatus{snapSt("a", taken)}, snapshotPlan{step: snapshotRecord, index: 1}},
		{"a recorded one is taken before another is recorded", snapReq("a", "b"), []infrav1.LibvirtMachineSnapshotStatus{snapSt("a", recorded)}, snapshotPlan{step: snapshotTake, index: 0}},
		{"a withdrawn failed one is forgotten first", snapReq("b"), []infrav1.LibvirtMachineSnapshotStatus{snapSt("b", recorded), snapSt("a", failed)}, snapshotPlan{step: snapshotForget, index: 1}},
		{"a withdrawn recorded one is forgotten (its layers checked first)", nil, []infrav1.LibvirtMachineSnapshotStatus{snapSt("a", recorded)}, snapshotPlan{step: snapshotForget, index: 0}},
		{"a withdrawn taken one is merged after the new ones are taken", snapReq("b"), []infrav1.LibvirtMachineSnapshotStatus{snapSt("a", taken)}, snapshotPlan{step: snapshotRecord, index: 0}},
		{"a withdrawn taken one is merged", snapReq("b"), []infrav1.LibvirtMachineSnapshotStatus{snapSt("a", taken), snapSt("b", taken)}, snapshotPlan{step: snapshotMerge, index: 0}},
		{"a merge under way goes on", nil, []infrav1.LibvirtMachineSnapshotStatus{snapSt("a", deleting)}, snapshotPlan{step: snapshotMerge, index: 0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := planSnapshots(tc.spec, tc.status); got != tc.want {
				t.Errorf("planSnapshots = %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestDiskTopsAndLayers(t *testing.T) {
	s := &infrav1.LibvirtMachineSpec{DomainName: "ns-vm", Disks: []infrav1.LibvirtDisk{{Name: "os"}, {Name: "data"}}}
	base := []string{"ns-vm-os.qcow2", "ns-vm-data.qcow2"}
	if got := diskTops(s, nil); !slices.Equal(got, base) {
		t.Fatalf("no snapshot: tops %v, want %v", got, base)
	}
	l1 := recordedLayers(s, base, "u1")
	want := []infrav1.SnapshotLayer{{Disk: "os", Volume: "ns-vm-os.qcow2", Top: "ns-vm-os-u1.qcow2"},
		{Disk: "data", Volume: "ns-vm-data.qcow2", Top: "ns-vm-data-u1.qcow2"}}
	if !reflect.DeepEqual(l1, want) {
		t.Fatalf("recordedLayers = %+v, want %+v", l1, want)
	}
	tops2 := []string{"ns-vm-os-u1.qcow2", "ns-vm-data-u1.qcow2"}
	for _, tc := range []struct {
		name  string
		snaps []infrav1.LibvirtMachineSnapshotStatus
		want  []string
	}{
		{"recorded only: not in the chain yet", []infrav1.LibvirtMachineSnapshotStatus{snapSt("a", infrav1.SnapshotRecorded, l1...)}, base},
		{"failed: never in the chain", []infrav1.LibvirtMachineSnapshotStatus{snapSt("a", infrav1.SnapshotFailed, l1...)}, base},
		{"taken", []infrav1.LibvirtMachineSnapshotStatus{snapSt("a", infrav1.SnapshotTaken, l1...)}, tops2},
		{"deleting: still in the chain", []infrav1.LibvirtMachineSnapshotStatus{snapSt("a", infrav1.SnapshotDeleting, l1...)}, tops2},
		{"the newest wins", []infrav1.LibvirtMachineSnapshotStatus{snapSt("a", infrav1.SnapshotTaken, l1...),
			snapSt("b", infrav1.SnapshotTaken, recordedLayers(s, tops2, "u2")...)}, []string{"ns-vm-os-u2.qcow2", "ns-vm-data-u2.qcow2"}},
	} {
		if got := diskTops(s, tc.snaps); !slices.Equal(got, tc.want) {
			t.Errorf("%s: tops %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestAfterMerge(t *testing.T) {
	s1 := snapSt("s1", infrav1.SnapshotDeleting, infrav1.SnapshotLayer{Disk: "os", Volume: "os.qcow2", Top: "os-1.qcow2"})
	s2 := snapSt("s2", infrav1.SnapshotTaken, infrav1.SnapshotLayer{Disk: "os", Volume: "os-1.qcow2", Top: "os-2.qcow2"})
	s3 := snapSt("s3", infrav1.SnapshotTaken, infrav1.SnapshotLayer{Disk: "os", Volume: "os-2.qcow2", Top: "os-3.qcow2"})
	in := []infrav1.LibvirtMachineSnapshotStatus{s1, s2, s3}
	got := afterMerge(in, 0)
	if len(got) != 2 || got[0].Name != "s2" || got[0].Layers[0].Volume != "os.qcow2" || got[1].Layers[0].Volume != "os-2.qcow2" {
		t.Errorf("after merging s1: %+v; want s2 over os.qcow2, s3 unchanged", got)
	}
	if in[1].Layers[0].Volume != "os-1.qcow2" {
		t.Error("afterMerge changed its input")
	}
	if got := afterMerge(in, 2); len(got) != 2 || got[1].Name != "s2" || got[1].Layers[0].Volume != "os-1.qcow2" {
		t.Errorf("after merging the newest: %+v", got)
	}
}

func TestPlaceLayer(t *testing.T) {
	l := infrav1.SnapshotLayer{Disk: "os", Volume: "os.qcow2", Top: "os-1.qcow2"}
	ch := func(files ...string) []diskChain {
		full := make([]string, len(files))
		for i, f := range files {
			full[i] = "/pool/" + f
		}
		return []diskChain{{target: "vda", files: full}}
	}
	for _, tc := range []struct {
		name   string
		chains []diskChain
		want   layerMerge
	}{
		{"the top: active commit", ch("os-1.qcow2", "os.qcow2", "base.raw"), mergeActive},
		{"inside: plain commit", ch("os-2.qcow2", "os-1.qcow2", "os.qcow2", "base.raw"), mergeInner},
		{"merged: only the volume beneath", ch("os-2.qcow2", "os.qcow2", "base.raw"), mergeDone},
		{"over another volume than recorded: refused", ch("os-1.qcow2", "other.qcow2"), mergeRefused},
		{"the bottom of the chain: refused", ch("os-1.qcow2"), mergeRefused},
		{"neither in the chain: refused", ch("x.qcow2", "base.raw"), mergeRefused},
	} {
		if got, _, _ := placeLayer(tc.chains, l); got != tc.want {
			t.Errorf("%s: placeLayer = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestSnapshotDisks(t *testing.T) {
	def := &libvirtxml.Domain{Devices: &libvirtxml.DomainDeviceList{Disks: []libvirtxml.DomainDisk{
		{Device: "disk", Source: &libvirtxml.DomainDiskSource{File: &libvirtxml.DomainDiskSourceFile{File: "/p/vm-os.qcow2"}}, Target: &libvirtxml.DomainDiskTarget{Dev: "vda"}},
		{Device: "disk", Source: &libvirtxml.DomainDiskSource{File: &libvirtxml.DomainDiskSourceFile{File: "/p/vm-data.qcow2"}}, Target: &libvirtxml.DomainDiskTarget{Dev: "vdb"}},
		{Device: "cdrom", Source: &libvirtxml.DomainDiskSource{File: &libvirtxml.DomainDiskSourceFile{File: "/p/vm-cidata.iso"}}, Target: &libvirtxml.DomainDiskTarget{Dev: "sda"}},
	}}}
	layers := []infrav1.SnapshotLayer{{Disk: "os", Volume: "vm-os.qcow2", Top: "vm-os-u.qcow2"}, {Disk: "data", Volume: "vm-data.qcow2", Top: "vm-data-u.qcow2"}}
	paths := []string{"/p/vm-os-u.qcow2", "/p/vm-data-u.qcow2"}
	got, switched := snapshotDisks(def, layers, paths)
	want := []libvirt.SnapshotDisk{{Target: "vda", File: paths[0]}, {Target: "vdb", File: paths[1]}, {Target: "sda", Skip: true}}
	if switched || !reflect.DeepEqual(got, want) {
		t.Errorf("snapshotDisks = %+v, %v; want %+v, false", got, switched, want)
	}
	def.Devices.Disks[0].Source.File.File, def.Devices.Disks[1].Source.File.File = paths[0], paths[1]
	if _, switched := snapshotDisks(def, layers, paths); !switched {
		t.Error("a domain already on every layer must read as switched: the call is not made again")
	}
}

func TestLayerVolume(t *testing.T) {
	if got := layerVolume("ns-vm-os.qcow2", "0f1e"); got != "ns-vm-os-0f1e.qcow2" {
		t.Errorf("layerVolume = %q", got)
	}
}

func TestRestoreRefusal(t *testing.T) {
	s := &infrav1.LibvirtMachineSpec{DomainName: "vm", Disks: []infrav1.LibvirtDisk{{Name: "os"}}}
	os1 := infrav1.SnapshotLayer{Disk: "os", Volume: "vm-os.qcow2", Top: "vm-os-1.qcow2"}
	os2 := infrav1.SnapshotLayer{Disk: "os", Volume: "vm-os-1.qcow2", Top: "vm-os-2.qcow2"}
	data := infrav1.SnapshotLayer{Disk: "data", Volume: "vm-data.qcow2", Top: "vm-data-1.qcow2"}
	for _, tc := range []struct {
		name   string
		snaps  []infrav1.LibvirtMachineSnapshotStatus
		reason string
	}{
		{"the newest: restored", []infrav1.LibvirtMachineSnapshotStatus{snapSt("a", infrav1.SnapshotTaken, os1)}, ""},
		{"newest after a failed later one", []infrav1.LibvirtMachineSnapshotStatus{snapSt("a", infrav1.SnapshotTaken, os1), snapSt("b", infrav1.SnapshotFailed, os2)}, ""},
		{"older than a taken one", []infrav1.LibvirtMachineSnapshotStatus{snapSt("a", infrav1.SnapshotTaken, os1), snapSt("b", infrav1.SnapshotTaken, os2)}, banlieuev1.ReasonRestoreFailed},
		{"not taken", []infrav1.LibvirtMachineSnapshotStatus{snapSt("a", infrav1.SnapshotRecorded, os1)}, banlieuev1.ReasonRestoreFailed},
		{"unknown", nil, banlieuev1.ReasonRestoreFailed},
		{"other disks", []infrav1.LibvirtMachineSnapshotStatus{snapSt("a", infrav1.SnapshotTaken, os1, data)}, banlieuev1.ReasonSnapshotDoesNotMatch},
	} {
		if reason, msg := restoreRefusal(s, tc.snaps, "a"); reason != tc.reason || (reason == "") != (msg == "") {
			t.Errorf("%s: restoreRefusal = %q, %q; want reason %q", tc.name, reason, msg, tc.reason)
		}
	}
}

// TestHasSnapshotRecord: a pass reads the snapshot record from the API server exactly when the
// machine asks for or records a snapshot or a restore.
func TestHasSnapshotRecord(t *testing.T) {
	for _, tc := range []struct {
		name string
		m    infrav1.LibvirtMachine
		want bool
	}{
		{"none", infrav1.LibvirtMachine{}, false},
		{"asked", infrav1.LibvirtMachine{Spec: infrav1.LibvirtMachineSpec{Snapshots: snapReq("s1")}}, true},
		{"recorded only (the request gone, the layer merging)", infrav1.LibvirtMachine{Status: infrav1.LibvirtMachineStatus{
			Snapshots: []infrav1.LibvirtMachineSnapshotStatus{{Name: "s1", Phase: infrav1.SnapshotDeleting}}}}, true},
		{"a restore asked", infrav1.LibvirtMachine{Spec: infrav1.LibvirtMachineSpec{Restore: &infrav1.LibvirtMachineRestore{}}}, true},
		{"a restore reported", infrav1.LibvirtMachine{Status: infrav1.LibvirtMachineStatus{Restore: &infrav1.LibvirtMachineRestoreStatus{}}}, true},
	} {
		if got := hasSnapshotRecord(&tc.m); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}
