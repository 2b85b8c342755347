package vcenter

import (
	"net/url"
	"reflect"
	"strings"
	"testing"

	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/property"
	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/vapi/rest"
	"github.com/vmware/govmomi/vapi/tags"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"
)

func TestDomainName(t *testing.T) {
	long := strings.Repeat("x", 70)
	for _, tt := range []struct{ dc, cluster, want string }{
		{"DC0", "DC0_C0", "dc0.dc0-c0"},
		{"/Europe/Paris DC/", "prod/Cluster #1", "europe-paris-dc.prod-cluster-1"},
		{"dc", "--a__b--", "dc.-a-b"},
		{"dc", long, "dc." + strings.Repeat("x", 51) + "-"},
	} {
		got := DomainName(tt.dc, tt.cluster)
		if tt.cluster == long {
			if len(got) != 63 || !strings.HasPrefix(got, tt.want) || got == DomainName(tt.dc, long+"y") {
				t.Errorf("DomainName(%q, long) = %q: want 63 characters, prefix %q, distinct from a longer name", tt.dc, got, tt.want)
			}
			continue
		}
		if got != tt.want {
			t.Errorf("DomainName(%q, %q) = %q, want %q", tt.dc, tt.cluster, got, tt.want)
		}
	}
}

func TestNarrow(t *testing.T) {
	for _, tt := range []struct{ asked, reachable, want []string }{
		{nil, []string{"a", "b"}, []string{"a", "b"}},
		{[]string{"b", "x", "a", "b"}, []string{"a", "b"}, []string{"b", "a"}},
		{[]string{"x"}, []string{"a"}, nil},
	} {
		if got := narrow(tt.asked, tt.reachable); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("narrow(%v, %v) = %v, want %v", tt.asked, tt.reachable, got, tt.want)
		}
	}
}

// tagAll attaches a tag, creating its category and the tag as needed.
func tagAll(t *testing.T, s *sim, attach map[[2]string][]string) {
	t.Helper()
	ctx := ctxT(t)
	rc := rest.NewClient(s.admin.vc)
	if err := rc.Login(ctx, url.UserPassword(simUser, simPassword)); err != nil {
		t.Fatal(err)
	}
	m := tags.NewManager(rc)
	cats, tagIDs := map[string]string{}, map[[2]string]string{}
	for ct, paths := range attach {
		if cats[ct[0]] == "" {
			id, err := m.CreateCategory(ctx, &tags.Category{Name: ct[0], Cardinality: "SINGLE"})
			if err != nil {
				t.Fatal(err)
			}
			cats[ct[0]] = id
		}
		if tagIDs[ct] == "" {
			id, err := m.CreateTag(ctx, &tags.Tag{Name: ct[1], CategoryID: cats[ct[0]]})
			if err != nil {
				t.Fatal(err)
			}
			tagIDs[ct] = id
		}
		for _, p := range paths {
			if err := m.AttachTag(ctx, tagIDs[ct], s.ref(t, p)); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// TestFailureDomains: two datacenters of two clusters of two hosts; region and zone tags at
// several levels; a datastore mounted on one host only, a port group on none.
func TestFailureDomains(t *testing.T) {
	timed(t)
	m := simulator.VPX()
	m.Datacenter, m.Cluster, m.ClusterHost, m.Host, m.Machine = 2, 2, 2, 0, 0
	s := startSim(t, m)
	ctx := ctxT(t)
	tagAll(t, s, map[[2]string][]string{
		{"k8s-region", "eu"}:      {"/DC0"},
		{"k8s-region", "us"}:      {"/DC1"},
		{"k8s-region", "us-west"}: {"/DC1/host/DC1_C1"}, // the cluster's own tag wins
		{"k8s-zone", "eu-1a"}:     {"/DC0/host/DC0_C0"},
		{"k8s-zone", "eu-1b"}:     {"/DC0/host/DC0_C1"},
		{"k8s-zone", "us-1a"}:     {"/DC1/host/DC1_C0"},
		{"other", "decoy"}:        {"/DC1/host/DC1_C1"}, // another category is no zone
	})
	h0 := object.NewHostSystem(s.admin.vc, s.ref(t, "/DC0/host/DC0_C0/DC0_C0_H0"))
	dss, err := h0.ConfigManager().DatastoreSystem(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dss.CreateLocalDatastore(ctx, "onlyone", t.TempDir()); err != nil {
		t.Fatal(err)
	}
	ns, err := h0.ConfigManager().NetworkSystem(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := ns.AddPortGroup(ctx, types.HostPortGroupSpec{Name: "partial", VswitchName: "vSwitch0"}); err != nil {
		t.Fatal(err)
	}

	q := FailureDomainQuery{
		Datastores: []string{"LocalDS_0", "onlyone", "missing"},
		Networks:   []string{"VM Network", "DC0_DVPG0", "partial"},
		VTPM:       true,
	}
	sess := s.dial(t)
	got, err := sess.FailureDomains(ctx, q)
	if err != nil {
		t.Fatal(err)
	}
	// LocalDS_0's size and free space as its summary reports them, in whole GiB, read per datacenter
	// (each has its own LocalDS_0).
	space := func(dc string) []DatastoreSpace {
		var ds mo.Datastore
		if err := property.DefaultCollector(s.admin.vc).RetrieveOne(ctx, s.ref(t, "/"+dc+"/datastore/LocalDS_0"), []string{"summary"}, &ds); err != nil {
			t.Fatal(err)
		}
		if ds.Summary.Capacity <= 0 {
			t.Fatalf("%s LocalDS_0 reports capacity %d", dc, ds.Summary.Capacity)
		}
		return []DatastoreSpace{{Name: "LocalDS_0", CapacityGiB: ds.Summary.Capacity >> 30, FreeGiB: ds.Summary.FreeSpace >> 30}}
	}
	fd := func(name, dc, cluster, region, zone string, nets ...string) FailureDomain {
		return FailureDomain{Name: name, Datacenter: dc, Cluster: cluster, ResourcePool: cluster + "/Resources",
			Region: region, Zone: zone, Datastores: []string{"LocalDS_0"}, DatastoreSpace: space(dc), Networks: nets, VTPM: true,
			// Two vcsim hosts of 2 threads and 4 294 430 720 bytes each: the cluster's size.
			CPUs: 4, MemoryMiB: (2 * 4294430720) >> 20}
	}
	want := []FailureDomain{
		fd("dc0.dc0-c0", "DC0", "DC0_C0", "eu", "eu-1a", "VM Network", "DC0_DVPG0"),
		fd("dc0.dc0-c1", "DC0", "DC0_C1", "eu", "eu-1b", "VM Network", "DC0_DVPG0"),
		fd("dc1.dc1-c0", "DC1", "DC1_C0", "us", "us-1a", "VM Network"),
		fd("dc1.dc1-c1", "DC1", "DC1_C1", "us-west", "", "VM Network"),
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("failure domains:\n got %+v\nwant %+v", got, want)
	}

	// With the other host of DC0_C0 in maintenance, the one-host datastore is reachable from
	// every usable host of the cluster.
	h1 := object.NewHostSystem(s.admin.vc, s.ref(t, "/DC0/host/DC0_C0/DC0_C0_H1"))
	task, err := h1.EnterMaintenanceMode(ctx, 0, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := task.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	got, err = sess.FailureDomains(ctx, FailureDomainQuery{Datacenters: []string{"/DC0/"}, Datastores: q.Datastores, Networks: []string{"partial"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Name != "dc0.dc0-c0" || !reflect.DeepEqual(got[0].Datastores, []string{"LocalDS_0", "onlyone"}) || got[0].VTPM {
		t.Fatalf("DC0 with H1 in maintenance: got %+v, want 2 domains, dc0.dc0-c0 with datastores [LocalDS_0 onlyone], no vTPM", got)
	}
}
