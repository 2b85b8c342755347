package libvirt

import (
	"regexp"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/event"

	infrav1 "banlieue.io/banlieue/api/infrastructure/v1alpha1"
)

const someUUID = "0b6f1f9e-4d0a-4c55-9a55-6f4f3c2f1e01"

func TestIdentityToWrite(t *testing.T) {
	fresh := func() string { return "11111111-2222-4333-8444-555555555555" }
	for _, tc := range []struct {
		name, providerID, want string
	}{
		{"a new machine gets a fresh UUID", "", "libvirt://lab/11111111-2222-4333-8444-555555555555"},
		{"a recorded UUID is kept: the domain may not exist yet, its seed is built under it", "libvirt://lab/" + someUUID, ""},
		{"another Provider's providerID is not this one's", "libvirt://other/" + someUUID, "libvirt://lab/11111111-2222-4333-8444-555555555555"},
		{"a providerID that names no UUID is replaced", "libvirt://lab/not-a-uuid", "libvirt://lab/11111111-2222-4333-8444-555555555555"},
		{"only the canonical form counts", "libvirt://lab/0B6F1F9E-4D0A-4C55-9A55-6F4F3C2F1E01", "libvirt://lab/11111111-2222-4333-8444-555555555555"},
		{"a prefix of the Provider's name is another Provider", "libvirt://la/" + someUUID, "libvirt://lab/11111111-2222-4333-8444-555555555555"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := &infrav1.LibvirtMachine{Spec: infrav1.LibvirtMachineSpec{ProviderID: tc.providerID}}
			if got := identityToWrite(m, "lab", fresh); got != tc.want {
				t.Errorf("identityToWrite(%q) = %q, want %q", tc.providerID, got, tc.want)
			}
		})
	}
}

func TestDefineUUID(t *testing.T) {
	for _, tc := range []struct {
		name, persisted, existing, want string
	}{
		{"first define: the recorded UUID", someUUID, "", someUUID},
		{"a pass that died before the define: the recorded UUID again", someUUID, "", someUUID},
		{"a domain of ours exists under the recorded UUID", someUUID, someUUID, someUUID},
		{"a domain of ours defined before banlieue chose UUIDs keeps libvirt's", someUUID, "99999999-2222-4333-8444-555555555555", "99999999-2222-4333-8444-555555555555"},
		{"nothing recorded and no domain: none (the pass stops)", "", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := defineUUID(tc.persisted, tc.existing); got != tc.want {
				t.Errorf("defineUUID(%q, %q) = %q, want %q", tc.persisted, tc.existing, got, tc.want)
			}
		})
	}
}

func TestGeneratedMACs(t *testing.T) {
	spec := &infrav1.LibvirtMachineSpec{Network: make([]infrav1.LibvirtNetworkInterface, 3)}
	macs := generatedMACs(spec, someUUID)
	again := generatedMACs(spec, someUUID)
	other := generatedMACs(spec, "11111111-2222-4333-8444-555555555555")
	form := regexp.MustCompile(`^52:54:00:[0-9a-f]{2}:[0-9a-f]{2}:[0-9a-f]{2}$`)
	seen := map[string]bool{}
	for i, mac := range macs {
		if !form.MatchString(mac) {
			t.Errorf("MAC %d %q: want 52:54:00:xx:xx:xx", i, mac)
		}
		if again[i] != mac {
			t.Errorf("MAC %d not stable for one UUID: %q then %q", i, mac, again[i])
		}
		if other[i] == mac {
			t.Errorf("MAC %d is the same for two UUIDs: %q", i, mac)
		}
		if seen[mac] {
			t.Errorf("MAC %q given to two interfaces", mac)
		}
		seen[mac] = true
	}
	if n := len(generatedMACs(&infrav1.LibvirtMachineSpec{}, someUUID)); n != 0 {
		t.Errorf("no NIC, %d MACs", n)
	}
}

func TestOnlyProviderIDChanged(t *testing.T) {
	base := infrav1.LibvirtMachine{Spec: infrav1.LibvirtMachineSpec{DomainName: "d", VCPUs: 1, MemoryMiB: 128}}
	base.Generation = 1
	with := func(f func(m *infrav1.LibvirtMachine)) *infrav1.LibvirtMachine {
		m := base.DeepCopy()
		m.Generation = 2
		f(m)
		return m
	}
	for _, tc := range []struct {
		name string
		new  *infrav1.LibvirtMachine
		pass bool
	}{
		{"the pass's own identity write is not reconciled again", with(func(m *infrav1.LibvirtMachine) { m.Spec.ProviderID = "libvirt://lab/" + someUUID }), false},
		{"the identity write with the finalizer is not either", with(func(m *infrav1.LibvirtMachine) {
			m.Spec.ProviderID = "libvirt://lab/" + someUUID
			m.Finalizers = []string{infrav1.FinalizerLibvirtMachine}
		}), false},
		{"a spec change is", with(func(m *infrav1.LibvirtMachine) { m.Spec.VCPUs = 2 }), true},
		{"a spec change with a providerID change is", with(func(m *infrav1.LibvirtMachine) {
			m.Spec.ProviderID = "libvirt://lab/" + someUUID
			m.Spec.MemoryMiB = 256
		}), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := specChanged.Update(event.UpdateEvent{ObjectOld: &base, ObjectNew: tc.new}); got != tc.pass {
				t.Errorf("specChanged = %v, want %v", got, tc.pass)
			}
		})
	}
	// Without a generation change nothing passes, as before.
	same := base.DeepCopy()
	same.Labels = map[string]string{"a": "b"}
	if specChanged.Update(event.UpdateEvent{ObjectOld: &base, ObjectNew: same}) {
		t.Error("an update without a generation change passed")
	}
}
