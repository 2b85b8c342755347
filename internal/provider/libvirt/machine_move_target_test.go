package libvirt

import (
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	infrav1 "banlieue.io/banlieue/api/infrastructure/v1alpha1"
	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
)

func TestDecideTargetAction(t *testing.T) {
	self := types.NamespacedName{Namespace: "ns", Name: "b"}
	rec := func(name string, phase infrav1.LibvirtMachineMigrationTargetPhase) *infrav1.LibvirtMachineMigrationTargetStatus {
		return &infrav1.LibvirtMachineMigrationTargetStatus{MigrationName: name, Provider: infrav1.ProviderReference{Name: "b"},
			Pool: "p", Phase: phase, Volumes: []string{"ns-web-os.qcow2"}}
	}
	report := func(name string, phase infrav1.LibvirtMachineMigrationPhase) *infrav1.LibvirtMachineMigrationStatus {
		return &infrav1.LibvirtMachineMigrationStatus{MigrationName: name, Phase: phase}
	}
	type machine struct {
		owner    string
		req      string // "" none
		abort    bool
		target   string
		record   *infrav1.LibvirtMachineMigrationTargetStatus
		report   *infrav1.LibvirtMachineMigrationStatus
		deleting bool
	}
	build := func(c machine) *infrav1.LibvirtMachine {
		m := &infrav1.LibvirtMachine{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web"}}
		m.Spec.ProviderRef = &infrav1.ProviderReference{Name: c.owner}
		if c.req != "" {
			m.Spec.Migration = &infrav1.LibvirtMachineMigration{MigrationName: c.req, Abort: c.abort,
				TargetProvider: infrav1.ProviderReference{Name: cmpOr(c.target, "b")}}
		}
		m.Status.MigrationTarget, m.Status.Migration = c.record, c.report
		if c.deleting {
			m.DeletionTimestamp = &metav1.Time{Time: time.Unix(1, 0)}
		}
		return m
	}
	for _, tc := range []struct {
		name string
		m    machine
		want targetAction
	}{
		{"no move, nothing recorded", machine{owner: "a"}, targetNothing},
		{"a move to another Provider", machine{owner: "a", req: "mv", target: "c"}, targetNothing},
		{"a move to self: record first", machine{owner: "a", req: "mv"}, targetRecord},
		{"a move to self already aborted: nothing made", machine{owner: "a", req: "mv", abort: true}, targetNothing},
		{"a move to self the source ended already", machine{owner: "a", req: "mv", report: report("mv", infrav1.MachineMigrationFailed)}, targetNothing},
		{"recorded, preparing", machine{owner: "a", req: "mv", record: rec("mv", infrav1.MachineMigrationTargetPreparing)}, targetPrepare},
		{"prepared, the move runs: look whether the domain arrived", machine{owner: "a", req: "mv", record: rec("mv", infrav1.MachineMigrationTargetPrepared),
			report: report("mv", infrav1.MachineMigrationMigrating)}, targetObserve},
		{"prepared, the source not started yet", machine{owner: "a", req: "mv", record: rec("mv", infrav1.MachineMigrationTargetPrepared),
			report: report("mv", infrav1.MachineMigrationPreparingTarget)}, targetNothing},
		{"received, the source still reports Migrating", machine{owner: "a", req: "mv", record: rec("mv", infrav1.MachineMigrationTargetReceived),
			report: report("mv", infrav1.MachineMigrationMigrating)}, targetNothing},
		{"received, the move failed: release, which a domain there refuses", machine{owner: "a", req: "mv",
			record: rec("mv", infrav1.MachineMigrationTargetReceived), report: report("mv", infrav1.MachineMigrationFailed)}, targetRelease},
		{"received and handed over", machine{owner: "b", record: rec("mv", infrav1.MachineMigrationTargetReceived),
			report: report("mv", infrav1.MachineMigrationSucceeded)}, targetForget},
		{"prepared, the move succeeded, handover pending", machine{owner: "a", req: "mv", record: rec("mv", infrav1.MachineMigrationTargetPrepared),
			report: report("mv", infrav1.MachineMigrationSucceeded)}, targetNothing},
		{"failed on the target, waiting for the source", machine{owner: "a", req: "mv", record: rec("mv", infrav1.MachineMigrationTargetFailed)}, targetNothing},
		{"the move failed", machine{owner: "a", req: "mv", record: rec("mv", infrav1.MachineMigrationTargetPrepared),
			report: report("mv", infrav1.MachineMigrationFailed)}, targetRelease},
		{"the move was aborted", machine{owner: "a", req: "mv", abort: true, record: rec("mv", infrav1.MachineMigrationTargetPrepared),
			report: report("mv", infrav1.MachineMigrationAborted)}, targetRelease},
		{"aborted while the source moves: wait for its report", machine{owner: "a", req: "mv", abort: true,
			record: rec("mv", infrav1.MachineMigrationTargetPrepared), report: report("mv", infrav1.MachineMigrationMigrating)}, targetObserve},
		{"the request removed without a handover", machine{owner: "a", record: rec("mv", infrav1.MachineMigrationTargetPrepared)}, targetRelease},
		{"a record of an older request", machine{owner: "a", req: "mv2", record: rec("mv", infrav1.MachineMigrationTargetPrepared)}, targetRelease},
		{"the machine deleted", machine{owner: "a", req: "mv", deleting: true, record: rec("mv", infrav1.MachineMigrationTargetPreparing)}, targetRelease},
		{"handed over: the volumes are the machine's", machine{owner: "b", record: rec("mv", infrav1.MachineMigrationTargetPrepared),
			report: report("mv", infrav1.MachineMigrationSucceeded)}, targetForget},
		{"another target's record is not self's", machine{owner: "a", req: "mv", target: "c",
			record: &infrav1.LibvirtMachineMigrationTargetStatus{MigrationName: "mv", Provider: infrav1.ProviderReference{Name: "c"}, Phase: infrav1.MachineMigrationTargetPreparing}}, targetNothing},
	} {
		if got := decideTargetAction(build(tc.m), self); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, got, tc.want)
		}
	}
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func TestTargetVolumes(t *testing.T) {
	m := &infrav1.LibvirtMachine{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web"}}
	m.Spec.DomainName = "ns-web"
	m.Spec.BootSource = infrav1.BootSource{Kind: infrav1.BootBackingVolume, Volume: "base-new.qcow2"}
	m.Spec.Disks = []infrav1.LibvirtDisk{{Name: "os", SizeGiB: 2}, {Name: "data", SizeGiB: 1}}
	m.Status.BootVolume = "base-old.qcow2"
	m.Status.DiskSizes = []infrav1.DiskSize{{Name: "data", SizeGiB: 4}}
	vols, err := targetVolumes(m)
	if err != nil {
		t.Fatal(err)
	}
	want := []targetVolume{
		// The OS disk over the base the provider accepted (status.bootVolume), not a newer one.
		{name: "ns-web-os.qcow2", capacity: 2 << 30, base: "base-old.qcow2"},
		// The size the disk was grown to.
		{name: "ns-web-data.qcow2", capacity: 4 << 30},
		{name: "ns-web-cidata.iso", seed: true},
	}
	if !slices.Equal(vols, want) {
		t.Errorf("volumes %+v, want %+v", vols, want)
	}

	snap := m.DeepCopy()
	snap.Spec.Snapshots = []infrav1.LibvirtMachineSnapshot{{Name: "s1"}}
	if _, err := targetVolumes(snap); err == nil || !strings.Contains(err.Error(), "spec.snapshots") {
		t.Errorf("a machine with snapshots: %v, want refused naming spec.snapshots", err)
	}
	nic := m.DeepCopy()
	nic.Spec.Network = []infrav1.LibvirtNetworkInterface{{Name: "eth0", IPAM: banlieuev1.IpamSpec{Static: &banlieuev1.StaticIpamConfig{Address: "10.0.0.5", Prefix: 24}}}}
	if _, err := targetVolumes(nic); err != nil {
		t.Errorf("a static NIC without MAC: %v; its seed names the MAC generated from the domain's UUID", err)
	}
}

// The target's seed names the MAC the spec sets, else the one generated from the domain's UUID
// before its first define; the source refuses a move whose definition holds another for a NIC
// with a static address.
func TestSeedMACs(t *testing.T) {
	static := banlieuev1.IpamSpec{Static: &banlieuev1.StaticIpamConfig{Address: "10.0.0.5", Prefix: 24}}
	m := &infrav1.LibvirtMachine{}
	m.Status.DomainUUID = "6f1c9a52-0d7e-4b8a-9a43-2f5d0c1e7b10"
	m.Spec.Network = []infrav1.LibvirtNetworkInterface{{Name: "eth0", IPAM: static}, {Name: "eth1", MACAddress: "52:54:00:aa:bb:cc", IPAM: static},
		{Name: "eth2"}}
	gen0 := generatedMAC(m.Status.DomainUUID, 0)
	if got := seedMACs(m); !slices.Equal(got, []string{gen0, "52:54:00:aa:bb:cc", generatedMAC(m.Status.DomainUUID, 2)}) {
		t.Errorf("seedMACs %v", got)
	}
	net, err := seedNetworkConfig(m, seedMACs(m))
	if err != nil || !strings.Contains(string(net), gen0) || !strings.Contains(string(net), "52:54:00:aa:bb:cc") {
		t.Errorf("the target's network-config names %q (%v); want %s and the spec's MAC", net, err, gen0)
	}
	for _, tc := range []struct {
		name string
		def  []string
		want string // "" accepted, else in the error
	}{
		{"the definition holds the generated and the spec's MACs", []string{gen0, "52:54:00:AA:BB:CC", "52:54:00:01:02:03"}, ""},
		{"a NIC without a static address may hold any MAC", []string{gen0, "52:54:00:aa:bb:cc", "52:54:00:ff:ff:ff"}, ""},
		{"a static NIC under a MAC libvirt chose", []string{"52:54:00:12:34:56", "52:54:00:aa:bb:cc", ""}, "spec.network[0]: the domain's interface has MAC \"52:54:00:12:34:56\""},
		{"a static NIC missing from the definition", []string{gen0}, "spec.network[1]"},
	} {
		err := checkSeedMACs(m, tc.def)
		if (tc.want == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
}

func TestOwnStatusLeavesTheTargetsRecord(t *testing.T) {
	st := &infrav1.LibvirtMachineStatus{DomainUUID: "u", MigrationTarget: &infrav1.LibvirtMachineMigrationTargetStatus{MigrationName: "mv"}}
	own := ownStatus(st)
	if own.MigrationTarget != nil || own.DomainUUID != "u" {
		t.Errorf("ownStatus %+v: want everything but migrationTarget", own)
	}
	if st.MigrationTarget == nil {
		t.Error("ownStatus changed the status it was given")
	}
}

func TestLeftSource(t *testing.T) {
	req := &infrav1.LibvirtMachineMigration{MigrationName: "mv", TargetProvider: infrav1.ProviderReference{Name: "b"}}
	for _, tc := range []struct {
		name string
		req  *infrav1.LibvirtMachineMigration
		rep  *infrav1.LibvirtMachineMigrationStatus
		want bool
	}{
		{"no report", req, nil, false},
		{"under way", req, &infrav1.LibvirtMachineMigrationStatus{MigrationName: "mv", Phase: infrav1.MachineMigrationMigrating}, false},
		{"moved, the handover pending", req, &infrav1.LibvirtMachineMigrationStatus{MigrationName: "mv", Phase: infrav1.MachineMigrationSucceeded}, true},
		{"moved and handed over: the new owner converges", nil, &infrav1.LibvirtMachineMigrationStatus{MigrationName: "mv", Phase: infrav1.MachineMigrationSucceeded}, false},
		{"an older move's success", &infrav1.LibvirtMachineMigration{MigrationName: "mv2"}, &infrav1.LibvirtMachineMigrationStatus{MigrationName: "mv", Phase: infrav1.MachineMigrationSucceeded}, false},
		{"failed before the copy", req, &infrav1.LibvirtMachineMigrationStatus{MigrationName: "mv", Phase: infrav1.MachineMigrationFailed, Message: "Migrating: MigrationFailed: x"}, false},
		{"moved, the source not clean", nil, &infrav1.LibvirtMachineMigrationStatus{MigrationName: "mv", Phase: infrav1.MachineMigrationFailed, Message: "CleaningSource: MigrationFailed: x"}, true},
	} {
		m := &infrav1.LibvirtMachine{}
		m.Spec.Migration, m.Status.Migration = tc.req, tc.rep
		if got := leftSource(m); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestPreparedTarget(t *testing.T) {
	m := &infrav1.LibvirtMachine{ObjectMeta: metav1.ObjectMeta{Namespace: "ns"}}
	m.Spec.Migration = &infrav1.LibvirtMachineMigration{MigrationName: "mv", TargetProvider: infrav1.ProviderReference{Name: "b"}}
	rec := func(name, provider string, phase infrav1.LibvirtMachineMigrationTargetPhase) *infrav1.LibvirtMachineMigrationTargetStatus {
		return &infrav1.LibvirtMachineMigrationTargetStatus{MigrationName: name, Provider: infrav1.ProviderReference{Name: provider}, Phase: phase,
			Reason: reasonBaseImageMissing, Message: "no base", URI: "qemu+tls://h:16514/system", Address: "h", PoolPath: "/p"}
	}
	for _, tc := range []struct {
		name       string
		rec        *infrav1.LibvirtMachineMigrationTargetStatus
		ok, failed bool
	}{
		{"no record", nil, false, false},
		{"preparing", rec("mv", "b", infrav1.MachineMigrationTargetPreparing), false, false},
		{"prepared", rec("mv", "b", infrav1.MachineMigrationTargetPrepared), true, false},
		{"prepared for an older move", rec("old", "b", infrav1.MachineMigrationTargetPrepared), false, false},
		{"prepared by another Provider", rec("mv", "c", infrav1.MachineMigrationTargetPrepared), false, false},
		{"failed", rec("mv", "b", infrav1.MachineMigrationTargetFailed), false, true},
	} {
		m.Status.MigrationTarget = tc.rec
		dest, ok, failed := preparedTarget(m)
		if ok != tc.ok || (failed != nil) != tc.failed {
			t.Errorf("%s: ok %v failed %v, want %v %v", tc.name, ok, failed, tc.ok, tc.failed)
		}
		if ok && dest != (moveDest{uri: "qemu+tls://h:16514/system", address: "h", poolPath: "/p"}) {
			t.Errorf("%s: dest %+v", tc.name, dest)
		}
		if failed != nil && !strings.HasPrefix(failed.Error(), "PreparingTarget: BaseImageMissing: ") {
			t.Errorf("%s: %v, want the target's reason under PreparingTarget", tc.name, failed)
		}
	}
	m.Status.MigrationTarget = rec("mv", "b", infrav1.MachineMigrationTargetPrepared)
	m.Status.MigrationTarget.URI = ""
	if _, ok, failed := preparedTarget(m); ok || failed == nil {
		t.Error("a Prepared record without its uri must not start a move")
	}
}
