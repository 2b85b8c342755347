package libvirt

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
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
// Each is refused as NotPermitted, and the host's domains, volumes and networks, and the
// victim's domain definition, are as they were. Every one would otherwise be realised: the machines are powered off, so defining the
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
		{"another-disk-as-cdrom", func(m *infrav1.LibvirtMachine) {
			m.Spec.BootSource = infrav1.BootSource{Kind: infrav1.BootInstallMedia, Volume: diskVolume(victim.Spec.DomainName, "os")}
		}, fmt.Sprintf(`invalid spec.bootSource.volume: "banlieue-system-victim-os.qcow2" is not a volume any VMImage resolved to for Provider %s and pool %q`, provider, s.pool)},
		{"unmapped-bridge", func(m *infrav1.LibvirtMachine) {
			m.Spec.Network = []infrav1.LibvirtNetworkInterface{{Name: "nic0", Source: infrav1.NetworkSource{Kind: infrav1.SourceBridge, Name: "br-foreign"}}}
		}, fmt.Sprintf(`invalid spec.network[0].source: bridge "br-foreign" is not the target of any network class of Provider %s`, provider)},
		{"other-namespace", func(m *infrav1.LibvirtMachine) { m.Spec.DomainName = "team-b-web" },
			`invalid spec.domainName: "team-b-web" is not "tenant-x-other-namespace"; a machine's domain is its namespace, "-" and its name`},
		{"victim-domain", func(m *infrav1.LibvirtMachine) { m.Spec.DomainName = victim.Spec.DomainName },
			`invalid spec.domainName: "banlieue-system-victim" is not "tenant-x-victim-domain"; a machine's domain is its namespace, "-" and its name`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := s.hostNames(ctx, t, unmapped)
			victimXML := s.domainXML(ctx, t, victim.Spec.DomainName)
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
			if after := s.domainXML(ctx, t, victim.Spec.DomainName); after != victimXML {
				t.Errorf("the victim's domain changed:\nbefore %s\nafter  %s", victimXML, after)
			}
		})
	}

	t.Run("a refusal of a realised machine changes Ready only", func(t *testing.T) {
		var before infrav1.LibvirtMachine
		if err := s.env.Client.Get(ctx, client.ObjectKeyFromObject(victim), &before); err != nil {
			t.Fatal(err)
		}
		hostBefore, xmlBefore := s.hostNames(ctx, t, unmapped), s.domainXML(ctx, t, victim.Spec.DomainName)
		// The victim's own user turns it on a bridge its Provider does not map.
		patch := client.MergeFrom(before.DeepCopy())
		changed := before.DeepCopy()
		changed.Spec.Network = []infrav1.LibvirtNetworkInterface{{Name: "nic0", Source: infrav1.NetworkSource{Kind: infrav1.SourceBridge, Name: "br-foreign"}}}
		if err := s.env.Client.Patch(ctx, changed, patch); err != nil {
			t.Fatal(err)
		}
		got := s.waitMachine(ctx, t, client.ObjectKeyFromObject(victim), 60*time.Second, func(m *infrav1.LibvirtMachine) bool {
			c := meta.FindStatusCondition(m.Status.Conditions, banlieuev1.ConditionReady)
			return c != nil && c.Reason == infrav1.ReasonNotPermitted && c.ObservedGeneration == m.Generation
		})
		want := before.Status.DeepCopy()
		want.Conditions = got.Status.Conditions
		if !equality.Semantic.DeepEqual(want, &got.Status) || got.Spec.ProviderID != before.Spec.ProviderID {
			t.Errorf("the refusal changed more than Ready:\nbefore %+v %s\nafter  %+v %s", before.Status, before.Spec.ProviderID,
				got.Status, got.Spec.ProviderID)
		}
		if got.Status.DomainUUID == "" || len(got.Status.Volumes) == 0 || got.Status.BootVolume != s.bootName {
			t.Errorf("the record is gone: %+v", got.Status)
		}
		if s.hostNames(ctx, t, unmapped) != hostBefore || s.domainXML(ctx, t, victim.Spec.DomainName) != xmlBefore {
			t.Error("the host changed on a refusal")
		}
		// Back to what its Provider grants, it converges again under the same domain.
		patch = client.MergeFrom(got.DeepCopy())
		got.Spec.Network = nil
		if err := s.env.Client.Patch(ctx, got, patch); err != nil {
			t.Fatal(err)
		}
		s.waitMachine(ctx, t, client.ObjectKeyFromObject(victim), 60*time.Second, func(m *infrav1.LibvirtMachine) bool {
			c := meta.FindStatusCondition(m.Status.Conditions, banlieuev1.ConditionReady)
			return c != nil && c.Reason == infrav1.ReasonDomainNotRunning && c.ObservedGeneration == m.Generation &&
				m.Status.DomainUUID == before.Status.DomainUUID
		})
	})

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

// testAuthorityOutage (docs/reliability.md, "Outages, rebuilds and refusals keep the record"):
// while the VMImage row that granted a machine's boot volume is empty, as the provider writes it
// when the host does not answer, the machine the provider accepted keeps its volume and converges
// (its domain and UUID stay), and a machine never accepted waits as WaitingForImage with nothing
// made on the host, then converges once the row is back.
func (s *machineSuite) testAuthorityOutage(ctx context.Context, t *testing.T) {
	kept := s.machine(testNamespace, "kept")
	kept.Spec.DesiredPowerState = banlieuev1.PoweredOff
	s.env.Create(ctx, t, kept)
	t.Cleanup(func() { s.deleteAndWait(context.Background(), t, kept) })
	accepted := s.waitMachine(ctx, t, client.ObjectKeyFromObject(kept), 60*time.Second, func(m *infrav1.LibvirtMachine) bool {
		return m.Status.DomainUUID != "" && m.Status.BootVolume == s.bootName
	})

	restore := s.emptyRows(ctx, t, s.pool)
	t.Cleanup(restore)

	// The accepted machine is still reconciled: turned on, it runs under the same domain.
	patch := client.MergeFrom(accepted.DeepCopy())
	accepted.Spec.DesiredPowerState = banlieuev1.PoweredOn
	if err := s.env.Client.Patch(ctx, accepted, patch); err != nil {
		t.Fatal(err)
	}
	got := s.waitMachine(ctx, t, client.ObjectKeyFromObject(kept), 60*time.Second, func(m *infrav1.LibvirtMachine) bool {
		return machineReady(m) && m.Status.ObservedGeneration == m.Generation
	})
	if got.Status.DomainUUID != accepted.Status.DomainUUID || got.Status.BootVolume != s.bootName {
		t.Errorf("domainUuid %s bootVolume %q, want %s %q", got.Status.DomainUUID, got.Status.BootVolume, accepted.Status.DomainUUID, s.bootName)
	}

	// A machine never accepted waits, and nothing of it is made on the host.
	before := s.hostNames(ctx, t, s.pool)
	fresh := s.machine(testNamespace, "fresh")
	fresh.Spec.DesiredPowerState = banlieuev1.PoweredOff
	s.env.Create(ctx, t, fresh)
	t.Cleanup(func() { s.deleteAndWait(context.Background(), t, fresh) })
	c := s.waitReason(ctx, t, fresh, infrav1.ReasonWaitingForImage)
	want := fmt.Sprintf(`spec.bootSource.volume: %q is the source of VMImage %s, whose row for Provider %s/lab is not ready; checking again`,
		s.bootName, s.pool, testNamespace)
	if c.Status != metav1.ConditionFalse || c.Message != want {
		t.Errorf("Ready = %s %q, want False %q", c.Status, c.Message, want)
	}
	if after := s.hostNames(ctx, t, s.pool); after != before {
		t.Errorf("the host changed for a waiting machine:\nbefore %s\nafter  %s", before, after)
	}

	restore()
	s.waitMachine(ctx, t, client.ObjectKeyFromObject(fresh), 60*time.Second, func(m *infrav1.LibvirtMachine) bool {
		return m.Status.DomainUUID != "" && m.Status.BootVolume == s.bootName
	})
}

// emptyRows makes the image's rows not ready with no resolvedRef, as the VMImage reconciler
// writes a BackingFile row while the host does not answer (image/reconciler.go), and returns
// what puts them back (once).
func (s *machineSuite) emptyRows(ctx context.Context, t *testing.T, image string) func() {
	t.Helper()
	var img banlieuev1.VMImage
	if err := s.env.Client.Get(ctx, client.ObjectKey{Name: image}, &img); err != nil {
		t.Fatal(err)
	}
	rows := slices.Clone(img.Status.PerProvider)
	for i := range img.Status.PerProvider {
		img.Status.PerProvider[i] = banlieuev1.ProviderImageStatus{
			ProviderName: rows[i].ProviderName, ProviderNamespace: rows[i].ProviderNamespace, Reason: banlieuev1.ReasonVolumeNotFound,
			Message: "cannot reach the Provider's host to look for volume " + s.bootName,
		}
	}
	if err := s.env.Client.Status().Update(ctx, &img); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			var live banlieuev1.VMImage
			if err := s.env.Client.Get(context.Background(), client.ObjectKey{Name: image}, &live); err != nil {
				t.Error(err)
				return
			}
			live.Status.PerProvider = rows
			if err := s.env.Client.Status().Update(context.Background(), &live); err != nil {
				t.Error(err)
			}
		})
	}
}
