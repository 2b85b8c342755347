package vsphere

import (
	"encoding/base64"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	infrav1 "banlieue.io/banlieue/api/infrastructure/v1alpha1"
	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
)

func testFailureDomains() []FailureDomain {
	return []FailureDomain{
		{Name: "dc1-cluster-a", Datacenter: "dc1", Cluster: "cluster-a", ResourcePool: "/dc1/host/cluster-a/Resources/banlieue",
			Folder: "/dc1/vm/banlieue", Datastores: []string{"vsanDatastore", "nfs-bulk"}, Networks: []string{"prod-pg"}},
		{Name: "dc1-cluster-b", Datacenter: "dc1", Cluster: "cluster-b", ResourcePool: "/dc1/host/cluster-b/Resources",
			Folder: "/dc1/vm", Datastores: []string{"ds-b"}, Networks: []string{"prod-pg"}, VTPM: true},
	}
}

func testMachine(mut ...func(*infrav1.VSphereMachine)) *infrav1.VSphereMachine {
	m := &infrav1.VSphereMachine{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "db-01", UID: "6c1f6a2e-0000-4000-8000-000000000001"},
		Spec: infrav1.VSphereMachineSpec{
			FailureDomain: "dc1-cluster-a", VMName: "team-a-db-01", Template: "/dc1/vm/templates/ubuntu-24.04",
			CPUs: 4, MemoryMiB: 8192,
			Disks:   []infrav1.VSphereDisk{{Name: "os", SizeGiB: 40, Datastore: "vsanDatastore"}, {Name: "data", SizeGiB: 100, Datastore: "vsanDatastore"}},
			Network: []infrav1.VSphereNetworkInterface{{Name: "nic0", PortGroup: "prod-pg"}},
		},
	}
	for _, f := range mut {
		f(m)
	}
	return m
}

func TestMachineSpec(t *testing.T) {
	got, rf := machineSpec(testMachine(), testFailureDomains(), []byte("#cloud-config\nhostname: db-01\n"))
	if rf != nil {
		t.Fatal(rf)
	}
	meta, _ := base64.StdEncoding.DecodeString(got.MetadataB64)
	var md map[string]string
	if err := json.Unmarshal(meta, &md); err != nil || md["instance-id"] != "6c1f6a2e-0000-4000-8000-000000000001" || md["local-hostname"] != "team-a-db-01" {
		t.Errorf("guestinfo.metadata = %s (%v)", meta, err)
	}
	got.MetadataB64 = ""
	want := MachineSpec{
		Name: "team-a-db-01", OwnerUID: "6c1f6a2e-0000-4000-8000-000000000001", OwnerRef: "team-a/db-01",
		Datacenter: "dc1", Folder: "/dc1/vm/banlieue", ResourcePool: "/dc1/host/cluster-a/Resources/banlieue",
		Datastore: "vsanDatastore", Template: "/dc1/vm/templates/ubuntu-24.04",
		CPUs: 4, MemoryMiB: 8192, DiskGiB: []int64{40, 100}, Networks: []string{"prod-pg"},
		UserDataB64: base64.StdEncoding.EncodeToString([]byte("#cloud-config\nhostname: db-01\n")),
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("machineSpec =\n%+v\nwant\n%+v", got, want)
	}
	// The clone goes where the provider's inventory says the failure domain is.
	b, rf := machineSpec(testMachine(func(m *infrav1.VSphereMachine) {
		m.Spec.FailureDomain, m.Spec.TPMEnabled = "dc1-cluster-b", true
		for i := range m.Spec.Disks {
			m.Spec.Disks[i].Datastore = "ds-b"
		}
	}), testFailureDomains(), nil)
	if rf != nil || b.ResourcePool != "/dc1/host/cluster-b/Resources" || b.Datastore != "ds-b" || !b.VTPM || b.UserDataB64 != "" {
		t.Errorf("in cluster-b: %+v, %v", b, rf)
	}
}

// TestMachineSpecRefusals: what the provider cannot realise is refused before any vCenter call,
// with a documented reason and the field in the message.
func TestMachineSpecRefusals(t *testing.T) {
	cases := []struct {
		name   string
		mut    func(*infrav1.VSphereMachine)
		reason string
		field  string
	}{
		{"no vmName", func(m *infrav1.VSphereMachine) { m.Spec.VMName = "" }, infrav1.ReasonUnsupportedSpec, "spec.vmName"},
		{"a failure domain the inventory lacks", func(m *infrav1.VSphereMachine) { m.Spec.FailureDomain = "dc9-cluster-z" },
			infrav1.ReasonFailureDomainUnknown, `spec.failureDomain "dc9-cluster-z"`},
		{"a datastore not reachable there", func(m *infrav1.VSphereMachine) { m.Spec.Disks[0].Datastore = "ds-b" },
			infrav1.ReasonNotPermitted, `spec.disks[0].datastore "ds-b"`},
		{"disks on two datastores", func(m *infrav1.VSphereMachine) { m.Spec.Disks[1].Datastore = "nfs-bulk" },
			infrav1.ReasonUnsupportedSpec, "spec.disks[1].datastore"},
		{"a port group not reachable there", func(m *infrav1.VSphereMachine) { m.Spec.Network[0].PortGroup = "dmz-pg" },
			infrav1.ReasonNotPermitted, `spec.network[0].portGroup "dmz-pg"`},
		{"a vTPM where no key provider is", func(m *infrav1.VSphereMachine) { m.Spec.TPMEnabled = true },
			banlieuev1.ReasonTpmUnsupported, "spec.tpmEnabled"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, rf := machineSpec(testMachine(tc.mut), testFailureDomains(), nil)
			if rf == nil || rf.Reason != tc.reason || !strings.Contains(rf.Message, tc.field) {
				t.Errorf("refusal = %+v, want reason %s naming %s", rf, tc.reason, tc.field)
			}
		})
	}
}

func TestDecidePower(t *testing.T) {
	now := time.Date(2026, 12, 7, 2, 0, 0, 0, time.UTC)
	asked := func(ago time.Duration) *time.Time { at := now.Add(-ago); return &at }
	on := Machine{PowerState: PowerStateOn, ToolsRunning: true}
	onNoTools := Machine{PowerState: PowerStateOn}
	off := Machine{PowerState: PowerStateOff}
	suspended := Machine{PowerState: PowerStateSuspended}
	cases := []struct {
		name      string
		desired   banlieuev1.PowerState
		mode      banlieuev1.PowerOffMode
		requested *time.Time
		vm        Machine
		want      powerAction
	}{
		{"on, wanted on", banlieuev1.PoweredOn, banlieuev1.PowerOffTrySoft, nil, on, powerNone},
		{"off, wanted on", banlieuev1.PoweredOn, banlieuev1.PowerOffTrySoft, nil, off, powerOn},
		{"suspended, wanted on", banlieuev1.PoweredOn, banlieuev1.PowerOffTrySoft, nil, suspended, powerOn},
		{"unset desired state means on", "", banlieuev1.PowerOffTrySoft, nil, off, powerOn},
		{"off, wanted off", banlieuev1.PoweredOff, banlieuev1.PowerOffTrySoft, asked(time.Minute), off, powerNone},
		{"Hard powers off at once", banlieuev1.PoweredOff, banlieuev1.PowerOffHard, nil, on, powerOff},
		{"TrySoft asks the guest first", banlieuev1.PoweredOff, banlieuev1.PowerOffTrySoft, nil, on, powerShutdown},
		{"TrySoft waits within the timeout", banlieuev1.PoweredOff, banlieuev1.PowerOffTrySoft, asked(time.Minute), on, powerWait},
		{"TrySoft powers off at the timeout", banlieuev1.PoweredOff, banlieuev1.PowerOffTrySoft, asked(2 * time.Minute), on, powerOff},
		{"TrySoft without Tools powers off at once", banlieuev1.PoweredOff, banlieuev1.PowerOffTrySoft, nil, onNoTools, powerOff},
		{"Soft asks the guest", banlieuev1.PoweredOff, banlieuev1.PowerOffSoft, nil, on, powerShutdown},
		{"Soft only waits, however long", banlieuev1.PoweredOff, banlieuev1.PowerOffSoft, asked(time.Hour), on, powerWait},
		{"Soft without Tools cannot ask", banlieuev1.PoweredOff, banlieuev1.PowerOffSoft, nil, onNoTools, powerNoTools},
		{"suspended, wanted suspended", banlieuev1.Suspended, banlieuev1.PowerOffTrySoft, nil, suspended, powerNone},
		{"suspend is not offered by the backend", banlieuev1.Suspended, banlieuev1.PowerOffTrySoft, nil, on, powerUnsupported},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := decidePower(tc.desired, tc.mode, 2*time.Minute, tc.requested, tc.vm, now); got != tc.want {
				t.Errorf("decidePower = %s, want %s", got, tc.want)
			}
		})
	}
}
