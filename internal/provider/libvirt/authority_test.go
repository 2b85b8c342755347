package libvirt

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	infrav1 "banlieue.io/banlieue/api/infrastructure/v1alpha1"
	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
)

func TestCheckAuthority(t *testing.T) {
	p := &banlieuev1.Provider{
		ObjectMeta: metav1.ObjectMeta{Namespace: "tenant-a", Name: "host-1"},
		Spec: banlieuev1.ProviderSpec{Capabilities: banlieuev1.ProviderCapabilities{
			StorageClasses: []banlieuev1.StorageClassMapping{
				{Name: "fast", Target: map[string]string{"pool": "nvme"}},
				{Name: "odd", Target: map[string]string{"network": "slow"}},
			},
			NetworkClasses: []banlieuev1.NetworkClassMapping{
				{Name: "lan", Target: map[string]string{"network": "default"}},
				{Name: "dmz", Target: map[string]string{"bridge": "br-dmz"}},
			},
		}},
	}
	row := func(ns, name, ref string, zones ...banlieuev1.ImageZoneStatus) banlieuev1.ProviderImageStatus {
		return banlieuev1.ProviderImageStatus{ProviderNamespace: ns, ProviderName: name, Ready: ref != "", ResolvedRef: ref, Zones: zones}
	}
	image := func(name string, rows ...banlieuev1.ProviderImageStatus) banlieuev1.VMImage {
		return banlieuev1.VMImage{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: banlieuev1.VMImageStatus{PerProvider: rows}}
	}
	current := ArtifactVolumeName("ubuntu", digestB, false)
	images := []banlieuev1.VMImage{
		image("ubuntu", row("tenant-a", "host-1", current)),
		image("zoned", row("tenant-a", "host-1", "", banlieuev1.ImageZoneStatus{Name: "nvme", Ready: true, ResolvedRef: "zoned-in-nvme.raw"},
			banlieuev1.ImageZoneStatus{Name: "other", Ready: true, ResolvedRef: "zoned-in-other.raw"})),
		// The same names on another Provider, and on one of the same name in another namespace,
		// grant this one nothing.
		image("elsewhere", row("tenant-b", "host-1", "elsewhere.raw"), row("tenant-a", "host-2", "host2.raw")),
	}
	machine := func(mutate func(*infrav1.LibvirtMachine)) *infrav1.LibvirtMachine {
		m := &infrav1.LibvirtMachine{
			ObjectMeta: metav1.ObjectMeta{Namespace: "tenant-a", Name: "web"},
			Spec: infrav1.LibvirtMachineSpec{
				ProviderRef: banlieuev1.LocalObjectReference{Name: "host-1"},
				Pool:        "nvme",
				DomainName:  "tenant-a-web",
				BootSource:  infrav1.BootSource{Kind: infrav1.BootBackingVolume, Volume: current},
				Network: []infrav1.LibvirtNetworkInterface{
					{Name: "eth0", Source: infrav1.NetworkSource{Kind: infrav1.SourceNetwork, Name: "default"}},
					{Name: "eth1", Source: infrav1.NetworkSource{Kind: infrav1.SourceBridge, Name: "br-dmz"}},
				},
			},
		}
		if mutate != nil {
			mutate(m)
		}
		return m
	}
	for _, tc := range []struct {
		name   string
		mutate func(*infrav1.LibvirtMachine)
		want   string // "" is granted
	}{
		{"the controller's machine", nil, ""},
		{"an earlier import of its VMImage (a rebuilt image's old base)", func(m *infrav1.LibvirtMachine) {
			m.Spec.BootSource.Volume = ArtifactVolumeName("ubuntu", digestA, false)
		}, ""},
		{"an installer ISO of its VMImage", func(m *infrav1.LibvirtMachine) {
			m.Spec.BootSource = infrav1.BootSource{Kind: infrav1.BootInstallMedia, Volume: ArtifactVolumeName("ubuntu", digestA, true)}
		}, ""},
		{"the zone of its pool", func(m *infrav1.LibvirtMachine) { m.Spec.BootSource.Volume = "zoned-in-nvme.raw" }, ""},
		{"the zone of its failure domain", func(m *infrav1.LibvirtMachine) {
			m.Spec.FailureDomain, m.Spec.BootSource.Volume = "other", "zoned-in-other.raw"
		}, ""},
		{"no interfaces", func(m *infrav1.LibvirtMachine) { m.Spec.Network = nil }, ""},

		{"another namespace's domain", func(m *infrav1.LibvirtMachine) { m.Spec.DomainName = "tenant-b-web" },
			`invalid spec.domainName: "tenant-b-web" is not "tenant-a-web"; a machine's domain is its namespace, "-" and its name`},
		{"another machine's domain in its namespace", func(m *infrav1.LibvirtMachine) { m.Spec.DomainName = "tenant-a-db" },
			`invalid spec.domainName: "tenant-a-db" is not "tenant-a-web"`},
		{"a pool no storage class targets", func(m *infrav1.LibvirtMachine) { m.Spec.Pool = "other" },
			`invalid spec.pool: "other" is not the target of any storage class of Provider tenant-a/host-1`},
		{"a pool named only under another target key", func(m *infrav1.LibvirtMachine) { m.Spec.Pool = "slow" },
			`invalid spec.pool: "slow" is not the target of any storage class`},
		{"a network no network class targets", func(m *infrav1.LibvirtMachine) { m.Spec.Network[0].Source.Name = "mgmt" },
			`invalid spec.network[0].source: network "mgmt" is not the target of any network class of Provider tenant-a/host-1`},
		{"a bridge given as a network", func(m *infrav1.LibvirtMachine) { m.Spec.Network[0].Source.Name = "br-dmz" },
			`invalid spec.network[0].source: network "br-dmz" is not the target`},
		{"a network given as a bridge", func(m *infrav1.LibvirtMachine) {
			m.Spec.Network[1].Source = infrav1.NetworkSource{Kind: infrav1.SourceBridge, Name: "default"}
		}, `invalid spec.network[1].source: bridge "default" is not the target`},
		{"another VM's disk as backing file", func(m *infrav1.LibvirtMachine) { m.Spec.BootSource.Volume = "tenant-b-db-os.qcow2" },
			`invalid spec.bootSource.volume: "tenant-b-db-os.qcow2" is not a volume any VMImage resolved to for Provider tenant-a/host-1 and pool "nvme"`},
		{"another VM's seed as installer", func(m *infrav1.LibvirtMachine) {
			m.Spec.BootSource = infrav1.BootSource{Kind: infrav1.BootInstallMedia, Volume: "tenant-b-db-cidata.iso"}
		}, `invalid spec.bootSource.volume: "tenant-b-db-cidata.iso"`},
		{"another Provider's image", func(m *infrav1.LibvirtMachine) { m.Spec.BootSource.Volume = "host2.raw" },
			`invalid spec.bootSource.volume: "host2.raw"`},
		{"a same-named Provider's image in another namespace", func(m *infrav1.LibvirtMachine) { m.Spec.BootSource.Volume = "elsewhere.raw" },
			`invalid spec.bootSource.volume: "elsewhere.raw"`},
		{"another pool's zone", func(m *infrav1.LibvirtMachine) { m.Spec.BootSource.Volume = "zoned-in-other.raw" },
			`invalid spec.bootSource.volume: "zoned-in-other.raw"`},
		{"a name that only looks like an import of another VMImage", func(m *infrav1.LibvirtMachine) {
			m.Spec.BootSource.Volume = ArtifactVolumeName("secret", digestA, false)
		}, `invalid spec.bootSource.volume: "secret-0123456789abcdef.raw"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := checkAuthority(machine(tc.mutate), p, images)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.want == "":
			case err == nil:
				t.Fatalf("granted, want %q", tc.want)
			case !strings.HasPrefix(err.Error(), tc.want) || !isAuthorityError(err):
				t.Fatalf("error %q (authority %v), want prefix %q", err, isAuthorityError(err), tc.want)
			}
		})
	}
	// No VMImage at all grants no boot volume.
	if err := checkAuthority(machine(nil), p, nil); err == nil {
		t.Error("a machine was granted a boot volume with no VMImage")
	}
}

func TestFailedStatusReasonOfRefusal(t *testing.T) {
	m := &infrav1.LibvirtMachine{}
	err := refuse("invalid spec.pool: %q is not the target of any storage class of Provider %s", "x", "ns/p")
	st := failedStatus(m, err)
	if len(st.Conditions) != 1 || st.Conditions[0].Reason != infrav1.ReasonNotPermitted || st.Conditions[0].Message != err.Error() {
		t.Errorf("conditions %+v", st.Conditions)
	}
}
