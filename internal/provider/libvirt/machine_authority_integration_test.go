package libvirt

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "banlieue.io/banlieue/api/infrastructure/v1alpha1"
	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
	"banlieue.io/banlieue/internal/testenv/labhost"
)

// testAuthority (docs/security.md, "LibvirtMachine authority"): hand-written machines of
// namespace tenant-x name what their Provider does not grant them: another machine's disk as
// boot volume, a pool and a network the host has but no class maps, another namespace's domain.
// Each is refused as NotPermitted, and the host's domains, volumes and networks are as they
// were. Every one would otherwise be realised: the machines are powered off, so defining the
// domain is all it takes, and the unmapped pool holds a boot volume of the suite's name.
func (s *machineSuite) testAuthority(ctx context.Context, t *testing.T) {
	s.addNamespace(ctx, t, "tenant-x")
	// What a run without the check defines (a regression), so the next run starts clean.
	t.Cleanup(func() {
		labhost.RemoveDomains(context.Background(), s.host, "tenant-x-")
		labhost.RemoveDomains(context.Background(), s.host, "team-b-web")
	})
	victim := s.machine(testNamespace, "victim")
	victim.Spec.DesiredPowerState = banlieuev1.PoweredOff
	s.env.Create(ctx, t, victim)
	s.waitMachine(ctx, t, client.ObjectKeyFromObject(victim), 60*time.Second, func(m *infrav1.LibvirtMachine) bool {
		return m.Status.DomainUUID != ""
	})
	t.Cleanup(func() { s.deleteAndWait(context.Background(), t, victim) })

	unmapped := s.pool + "-unmapped"
	pool := labhost.CreatePool(ctx, t, s.host, s.lab, unmapped)
	xml, err := renderVolume(volumeSpec{name: s.bootName, capacity: 1 << 20, format: formatRaw})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.host.StorageVolCreateXML(ctx, pool, xml, 0); err != nil {
		t.Fatal(err)
	}
	network := s.pool + "-other"
	if _, err := s.host.NetworkDefineXML(ctx, "<network><name>"+network+"</name></network>"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if n, err := s.host.NetworkLookupByName(context.Background(), network); err == nil {
			_ = s.host.NetworkUndefine(context.Background(), n)
		}
	})

	provider := "tenant-x/lab"
	for _, tc := range []struct {
		name   string
		mutate func(*infrav1.LibvirtMachine)
		want   string
	}{
		{"another-disk", func(m *infrav1.LibvirtMachine) { m.Spec.BootSource.Volume = diskVolume(victim.Spec.DomainName, "os") },
			fmt.Sprintf(`invalid spec.bootSource.volume: "banlieue-system-victim-os.qcow2" is not a volume any VMImage resolved to for Provider %s and pool %q`, provider, s.pool)},
		{"another-seed", func(m *infrav1.LibvirtMachine) {
			m.Spec.BootSource = infrav1.BootSource{Kind: infrav1.BootInstallMedia, Volume: seedVolume(victim.Spec.DomainName)}
		}, fmt.Sprintf(`invalid spec.bootSource.volume: "banlieue-system-victim-cidata.iso" is not a volume any VMImage resolved to for Provider %s and pool %q`, provider, s.pool)},
		{"unmapped-pool", func(m *infrav1.LibvirtMachine) { m.Spec.Pool = unmapped },
			fmt.Sprintf(`invalid spec.pool: %q is not the target of any storage class of Provider %s`, unmapped, provider)},
		{"unmapped-network", func(m *infrav1.LibvirtMachine) {
			m.Spec.Network = []infrav1.LibvirtNetworkInterface{{Name: "nic0", Source: infrav1.NetworkSource{Kind: infrav1.SourceNetwork, Name: network}}}
		}, fmt.Sprintf(`invalid spec.network[0].source: network %q is not the target of any network class of Provider %s`, network, provider)},
		{"other-namespace", func(m *infrav1.LibvirtMachine) { m.Spec.DomainName = "team-b-web" },
			`invalid spec.domainName: "team-b-web" is not "tenant-x-other-namespace"; a machine's domain is its namespace, "-" and its name`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := s.hostNames(ctx, t, unmapped)
			m := s.machine("tenant-x", tc.name)
			m.Spec.DesiredPowerState = banlieuev1.PoweredOff
			tc.mutate(m)
			s.env.Create(ctx, t, m)
			c := s.waitReason(ctx, t, m, infrav1.ReasonNotPermitted)
			if c.Status != metav1.ConditionFalse || c.Message != tc.want {
				t.Errorf("Ready = %s %q, want False %q", c.Status, c.Message, tc.want)
			}
			var got infrav1.LibvirtMachine
			if err := s.env.Client.Get(ctx, client.ObjectKeyFromObject(m), &got); err != nil {
				t.Fatal(err)
			}
			if controllerHasFinalizer(&got) || len(got.Status.Volumes) > 0 || got.Spec.ProviderID != "" {
				t.Errorf("a refused machine holds nothing on the host: finalizers %v, volumes %v, providerID %q",
					got.Finalizers, got.Status.Volumes, got.Spec.ProviderID)
			}
			s.deleteAndWait(ctx, t, m)
			if after := s.hostNames(ctx, t, unmapped); after != before {
				t.Errorf("the host changed:\nbefore %s\nafter  %s", before, after)
			}
		})
	}

	t.Run("a machine its Provider grants everything converges", func(t *testing.T) {
		m := s.machine("tenant-x", "granted")
		s.env.Create(ctx, t, m)
		s.waitMachine(ctx, t, client.ObjectKeyFromObject(m), 60*time.Second, machineReady)
		s.deleteAndWait(ctx, t, m)
	})

	// The victim was never touched: still defined under its UUID, its volumes in place.
	var v infrav1.LibvirtMachine
	if err := s.env.Client.Get(ctx, client.ObjectKeyFromObject(victim), &v); err != nil {
		t.Fatal(err)
	}
	dom, err := s.host.DomainLookupByName(ctx, victim.Spec.DomainName)
	if err != nil || dom.UUID.String() != v.Status.DomainUUID {
		t.Errorf("victim domain %v (%v), want uuid %s", dom.UUID, err, v.Status.DomainUUID)
	}
	if r := meta.FindStatusCondition(v.Status.Conditions, banlieuev1.ConditionReady); r == nil || r.Reason != infrav1.ReasonDomainNotRunning {
		t.Errorf("victim Ready %+v", r)
	}
}

// hostNames lists the host's domains, networks and the volumes of the suite's pool and of
// extra, each with its key (path), to compare before and after.
func (s *machineSuite) hostNames(ctx context.Context, t *testing.T, extra string) string {
	t.Helper()
	var out []string
	doms, err := s.host.ListAllDomains(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range doms {
		out = append(out, "domain "+d.Name+" "+d.UUID.String())
	}
	nets, err := s.host.ListAllNetworks(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range nets {
		out = append(out, "network "+n.Name)
	}
	for _, p := range []string{s.pool, extra} {
		for _, v := range labhost.VolumeNames(ctx, t, s.host, p) {
			out = append(out, "volume "+p+"/"+v)
		}
	}
	slices.Sort(out)
	return strings.Join(out, "\n")
}
