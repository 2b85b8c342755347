package libvirt

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

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
		// BackingFile images whose rows are not ready: one during a host outage, one whose row
		// this Provider has not got yet, one of another provider class.
		backingFile(image("outage", row("tenant-a", "host-1", "")), ClassName, "/images/tiny.raw"),
		backingFile(image("new"), ClassName, "fresh.raw"),
		backingFile(image("foreign", row("tenant-a", "host-1", "")), "other-class", "tenant-b-db-os.qcow2"),
	}
	machine := func(mutate func(*infrav1.LibvirtMachine)) *infrav1.LibvirtMachine {
		m := &infrav1.LibvirtMachine{
			ObjectMeta: metav1.ObjectMeta{Namespace: "tenant-a", Name: "web"},
			Spec: infrav1.LibvirtMachineSpec{
				ProviderRef: &infrav1.ProviderReference{Name: "host-1"},
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
		want   string // "" is granted; a refusal is NotPermitted unless it starts with "<reason>: "
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
		// What the provider accepted before is granted whatever the rows say now.
		{"its accepted volume while the row is empty (a host outage)", func(m *infrav1.LibvirtMachine) {
			m.Spec.BootSource.Volume, m.Status.BootVolume = "tiny.raw", "tiny.raw"
		}, ""},
		{"its accepted volume after the row moved to another (a rebuild)", func(m *infrav1.LibvirtMachine) {
			m.Spec.BootSource.Volume, m.Status.BootVolume = "ubuntu-old.raw", "ubuntu-old.raw"
		}, ""},
		{"its accepted volume with no VMImage left", func(m *infrav1.LibvirtMachine) {
			m.Spec.BootSource.Volume, m.Status.BootVolume = "gone.raw", "gone.raw"
		}, ""},
		{"a granted volume other than the accepted one", func(m *infrav1.LibvirtMachine) { m.Status.BootVolume = "tiny.raw" }, ""},
		// Never accepted, and a row that may grant it is not ready: wait.
		{"the source of a row not ready (a host outage)", func(m *infrav1.LibvirtMachine) { m.Spec.BootSource.Volume = "tiny.raw" },
			"WaitingForImage: " + `spec.bootSource.volume: "tiny.raw" is the source of VMImage outage, whose row for Provider tenant-a/host-1 is not ready; checking again`},
		{"the source of an image with no row for its Provider yet", func(m *infrav1.LibvirtMachine) { m.Spec.BootSource.Volume = "fresh.raw" },
			"WaitingForImage: " + `spec.bootSource.volume: "fresh.raw" is the source of VMImage new`},

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
		{"another VM's disk after the accepted volume", func(m *infrav1.LibvirtMachine) {
			m.Spec.BootSource.Volume, m.Status.BootVolume = "tenant-b-db-os.qcow2", current
		}, `invalid spec.bootSource.volume: "tenant-b-db-os.qcow2"`},
		{"another provider class's source whose row is not ready", func(m *infrav1.LibvirtMachine) {
			m.Spec.BootSource.Volume = "tenant-b-db-os.qcow2"
		}, `invalid spec.bootSource.volume: "tenant-b-db-os.qcow2"`},
		{"an empty boot volume", func(m *infrav1.LibvirtMachine) { m.Spec.BootSource.Volume = "" },
			`invalid spec.bootSource.volume: ""`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := checkAuthority(machine(tc.mutate), p, images)
			reason, want := infrav1.ReasonNotPermitted, tc.want
			if r, rest, ok := strings.Cut(tc.want, ": "); ok && r == infrav1.ReasonWaitingForImage {
				reason, want = r, rest
			}
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.want == "":
			case err == nil:
				t.Fatalf("granted, want %s %q", reason, want)
			case !strings.HasPrefix(err.Error(), want) || authorityReason(err) != reason:
				t.Fatalf("error %q (reason %q), want %s %q", err, authorityReason(err), reason, want)
			}
		})
	}
	// No VMImage at all grants no boot volume.
	if err := checkAuthority(machine(nil), p, nil); err == nil {
		t.Error("a machine was granted a boot volume with no VMImage")
	}
}

// backingFile gives img a source of class whose volume is ref's basename.
func backingFile(img banlieuev1.VMImage, class, ref string) banlieuev1.VMImage {
	img.Spec.Sources = []banlieuev1.ImageSource{{ProviderClass: class, Kind: banlieuev1.SourceBackingFile, Ref: ref}}
	return img
}

// A refusal, or a wait, changes Ready and nothing else: what the provider recorded about the
// domain and its volumes is still true, and teardown needs it.
func TestFailedStatusOfRefusalKeepsTheRecord(t *testing.T) {
	m := &infrav1.LibvirtMachine{Status: infrav1.LibvirtMachineStatus{
		Initialization:     &banlieuev1.InitializationStatus{Provisioned: ptr.To(true)},
		DomainUUID:         "6c8f7f2e-1b7a-4d8e-9a55-0c0f6d1e2a3b",
		ObservedPowerState: banlieuev1.PoweredOn,
		Addresses:          []banlieuev1.MachineAddress{{Type: banlieuev1.MachineInternalIP, Address: "192.0.2.7"}},
		Volumes:            []string{"ns-web-os.qcow2", "ns-web-cidata.iso"},
		BootVolume:         "tiny.raw",
		GuestInstalled:     ptr.To(true),
		ObservedGeneration: 3,
		Conditions: []metav1.Condition{
			{Type: banlieuev1.ConditionReady, Status: metav1.ConditionTrue, Reason: infrav1.ReasonDomainRunning},
			{Type: banlieuev1.ConditionGuestReady, Status: metav1.ConditionTrue, Reason: infrav1.ReasonGuestAnnounced},
		},
	}}
	for _, err := range []*AuthorityError{
		refuse("invalid spec.pool: %q is not the target of any storage class of Provider %s", "x", "ns/p"),
		{Reason: infrav1.ReasonWaitingForImage, msg: "spec.bootSource.volume: waiting"},
	} {
		st := failedStatus(m, err)
		ready := meta.FindStatusCondition(st.Conditions, banlieuev1.ConditionReady)
		if ready == nil || ready.Status != metav1.ConditionFalse || ready.Reason != err.Reason || ready.Message != err.Error() {
			t.Errorf("%s: Ready %+v", err.Reason, ready)
		}
		want := m.Status.DeepCopy()
		want.Conditions = st.Conditions
		if !equality.Semantic.DeepEqual(&st, want) {
			t.Errorf("%s: a refusal changed more than Ready:\n got %+v\nwant %+v", err.Reason, st, *want)
		}
		if len(st.Conditions) != 2 {
			t.Errorf("%s: conditions %+v", err.Reason, st.Conditions)
		}
	}
}
