package controller

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	infrav1 "banlieue.io/banlieue/api/infrastructure/v1alpha1"
	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
)

// guideInput is examples/17 scheduled onto the guide's Provider.
func guideInput(t *testing.T, mutVM func(*banlieuev1.VirtualMachine), mutClass func(*banlieuev1.VMClass),
	mutImage func(*banlieuev1.VMImage), mutProvider func(*banlieuev1.Provider)) buildInput {
	t.Helper()
	vm := testVM("web-01", func(vm *banlieuev1.VirtualMachine) {
		vm.UID = types.UID("uid-1")
		vm.Spec.DesiredPowerState = banlieuev1.PoweredOn
	})
	class := testClass()
	image := testImage(readyRow("libvirt-edge-host-7"))
	p := testProvider("libvirt-edge-host-7")
	if mutVM != nil {
		mutVM(vm)
	}
	if mutClass != nil {
		mutClass(class)
	}
	if mutImage != nil {
		mutImage(image)
	}
	if mutProvider != nil {
		mutProvider(&p)
	}
	d, err := schedule(scheduleInput{VM: vm, Class: class, Image: image, Providers: []banlieuev1.Provider{p}})
	if err != nil {
		t.Fatalf("schedule: %v", err)
	}
	return buildInput{VM: vm, Class: class, Image: image, Decision: d,
		UserData: &machineUserData{Name: "userdata-web-01-0123456789abcdef", Hash: strings.Repeat("a", 64)}}
}

func TestBuildLibvirtMachineGuide(t *testing.T) {
	m, err := buildLibvirtMachine(guideInput(t, nil, nil, nil, nil))
	if err != nil {
		t.Fatal(err)
	}
	if m.Name != "web-01" || m.Namespace != testNS {
		t.Errorf("name = %s/%s", m.Namespace, m.Name)
	}
	if want := map[string]string{"app": "web", banlieuev1.LabelOwnedBy: "web-01"}; !reflect.DeepEqual(m.Labels, want) {
		t.Errorf("labels = %v, want %v", m.Labels, want)
	}
	if len(m.OwnerReferences) != 1 {
		t.Fatalf("ownerReferences = %+v", m.OwnerReferences)
	}
	o := m.OwnerReferences[0]
	if o.Kind != "VirtualMachine" || o.APIVersion != "banlieue.io/v1alpha1" || o.Name != "web-01" || o.UID != "uid-1" ||
		!ptr.Deref(o.Controller, false) || !ptr.Deref(o.BlockOwnerDeletion, false) {
		t.Errorf("ownerReference = %+v", o)
	}
	want := infrav1.LibvirtMachineSpec{
		FailureDomain:     "libvirt-edge-host-7",
		ProviderRef:       &infrav1.ProviderReference{Name: "libvirt-edge-host-7", Namespace: "banlieue-system"},
		Pool:              "default",
		DomainName:        "banlieue-system-web-01",
		BootSource:        infrav1.BootSource{Kind: infrav1.BootBackingVolume, Volume: "ubuntu-2404.raw"},
		VCPUs:             2,
		MemoryMiB:         2048,
		Firmware:          banlieuev1.FirmwareEFI,
		Disks:             []infrav1.LibvirtDisk{{Name: "os", SizeGiB: 20, Bus: infrav1.BusVirtio}},
		Network:           []infrav1.LibvirtNetworkInterface{{Name: "nic0", Source: infrav1.NetworkSource{Kind: infrav1.SourceNetwork, Name: "br-prod"}}},
		UserDataSecretRef: &banlieuev1.LocalObjectReference{Name: "userdata-web-01-0123456789abcdef"},
		UserDataHash:      strings.Repeat("a", 64),
		DesiredPowerState: banlieuev1.PoweredOn,
		PowerOffMode:      banlieuev1.PowerOffTrySoft,
		PowerOffTimeout:   &metav1.Duration{Duration: 2 * time.Minute},
	}
	if !reflect.DeepEqual(m.Spec, want) {
		t.Errorf("spec =\n%+v\nwant\n%+v", m.Spec, want)
	}
}

// TestBuildLibvirtMachineKeepsItsBootVolume: the image was rebuilt (the row names a new,
// content-named volume) while the machine exists; the machine keeps the base it was made from.
func TestBuildLibvirtMachineKeepsItsBootVolume(t *testing.T) {
	in := guideInput(t, nil, nil, nil, nil)
	first, err := buildLibvirtMachine(in)
	if err != nil {
		t.Fatal(err)
	}
	in.Image.Status.PerProvider[0].ResolvedRef = "ubuntu-24-04-0123456789abcdef.raw"
	in.Existing = first
	again, err := buildLibvirtMachine(in)
	if err != nil {
		t.Fatal(err)
	}
	if again.Spec.BootSource != first.Spec.BootSource {
		t.Errorf("existing machine's boot source changed: %+v → %+v", first.Spec.BootSource, again.Spec.BootSource)
	}
	in.Existing = nil
	fresh, err := buildLibvirtMachine(in)
	if err != nil {
		t.Fatal(err)
	}
	if fresh.Spec.BootSource.Volume != "ubuntu-24-04-0123456789abcdef.raw" {
		t.Errorf("a new machine must use the row's volume, got %s", fresh.Spec.BootSource.Volume)
	}
}

func TestBuildLibvirtMachineFields(t *testing.T) {
	subnet := func(p *banlieuev1.Provider) {
		p.Spec.Capabilities.NetworkClasses[0].Subnet = &banlieuev1.NetworkSubnet{Gateway: "10.0.0.1", Nameservers: []string{"10.0.0.53"}, Domain: "edge.example"}
	}
	override := func(s banlieuev1.StaticIpamConfig) func(*banlieuev1.VirtualMachine) {
		return func(vm *banlieuev1.VirtualMachine) {
			vm.Spec.NetworkOverrides = []banlieuev1.NetworkOverride{{Name: "nic0", Static: s}}
		}
	}
	tests := []struct {
		name        string
		vm          func(*banlieuev1.VirtualMachine)
		class       func(*banlieuev1.VMClass)
		image       func(*banlieuev1.VMImage)
		provider    func(*banlieuev1.Provider)
		check       func(*testing.T, *infrav1.LibvirtMachine)
		wantErrIs   error
		wantErrText string
	}{
		{
			name:  "deferred image boots install media",
			image: func(i *banlieuev1.VMImage) { i.Spec.Template.InstallMode = banlieuev1.InstallDeferred },
			check: func(t *testing.T, m *infrav1.LibvirtMachine) {
				if m.Spec.BootSource.Kind != infrav1.BootInstallMedia {
					t.Errorf("boot kind = %s", m.Spec.BootSource.Kind)
				}
			},
		},
		{
			name:  "manual image boots install media",
			image: func(i *banlieuev1.VMImage) { i.Spec.Template.InstallMode = banlieuev1.InstallManual },
			check: func(t *testing.T, m *infrav1.LibvirtMachine) {
				if m.Spec.BootSource.Kind != infrav1.BootInstallMedia {
					t.Errorf("boot kind = %s", m.Spec.BootSource.Kind)
				}
			},
		},
		{
			name:  "Deferred, the guide's casing, boots install media",
			image: func(i *banlieuev1.VMImage) { i.Spec.Template.InstallMode = "Deferred" },
			check: func(t *testing.T, m *infrav1.LibvirtMachine) {
				if m.Spec.BootSource.Kind != infrav1.BootInstallMedia {
					t.Errorf("boot kind = %s", m.Spec.BootSource.Kind)
				}
			},
		},
		{
			name:  "Immediate, the guide's casing, boots a backing volume",
			image: func(i *banlieuev1.VMImage) { i.Spec.Template.InstallMode = "Immediate" },
			check: func(t *testing.T, m *infrav1.LibvirtMachine) {
				if m.Spec.BootSource.Kind != infrav1.BootBackingVolume {
					t.Errorf("boot kind = %s", m.Spec.BootSource.Kind)
				}
			},
		},
		{
			name:  "template-less image boots a backing volume",
			image: func(i *banlieuev1.VMImage) { i.Spec.Template = nil },
			check: func(t *testing.T, m *infrav1.LibvirtMachine) {
				if m.Spec.BootSource.Kind != infrav1.BootBackingVolume {
					t.Errorf("boot kind = %s", m.Spec.BootSource.Kind)
				}
			},
		},
		{
			name: "zone named after the failure domain when the row has no resolvedRef",
			image: func(i *banlieuev1.VMImage) {
				i.Status.PerProvider[0].ResolvedRef = ""
				i.Status.PerProvider[0].Zones = []banlieuev1.ImageZoneStatus{{Name: "libvirt-edge-host-7", Ready: true, ResolvedRef: "fd-vol"}}
			},
			check: func(t *testing.T, m *infrav1.LibvirtMachine) {
				if m.Spec.BootSource.Volume != "fd-vol" {
					t.Errorf("volume = %s", m.Spec.BootSource.Volume)
				}
			},
		},
		{
			name: "zone named after the pool when the row has no resolvedRef",
			image: func(i *banlieuev1.VMImage) {
				i.Status.PerProvider[0].ResolvedRef = ""
				i.Status.PerProvider[0].Zones = []banlieuev1.ImageZoneStatus{{Name: "other"}, {Name: "default", Ready: true, ResolvedRef: "pool-vol"}}
			},
			check: func(t *testing.T, m *infrav1.LibvirtMachine) {
				if m.Spec.BootSource.Volume != "pool-vol" {
					t.Errorf("volume = %s", m.Spec.BootSource.Volume)
				}
			},
		},
		{
			name:      "no resolved ref anywhere",
			image:     func(i *banlieuev1.VMImage) { i.Status.PerProvider[0].ResolvedRef = "" },
			wantErrIs: ErrMissingResolvedImageRef, wantErrText: "MissingResolvedImageRef: VMImage ubuntu-2404 has no resolvedRef for Provider banlieue-system/libvirt-edge-host-7 (neither on its row nor on zone libvirt-edge-host-7 or default)",
		},
		{
			name: "hardware overrides",
			vm: func(vm *banlieuev1.VirtualMachine) {
				vm.Spec.HardwareOverride = &banlieuev1.HardwareOverride{CPUs: ptr.To[int32](8), MemoryMiB: ptr.To[int32](8192),
					DiskOverrides: []banlieuev1.DiskOverride{{Name: "data", SizeGiB: 50}}}
			},
			class: func(c *banlieuev1.VMClass) {
				c.Spec.Hardware.Disks = append(c.Spec.Hardware.Disks, banlieuev1.ClassDisk{Name: "data", SizeGiB: 10, StorageClass: "standard"})
			},
			check: func(t *testing.T, m *infrav1.LibvirtMachine) {
				want := []infrav1.LibvirtDisk{{Name: "os", SizeGiB: 20, Bus: infrav1.BusVirtio}, {Name: "data", SizeGiB: 50, Bus: infrav1.BusVirtio}}
				if m.Spec.VCPUs != 8 || m.Spec.MemoryMiB != 8192 || !reflect.DeepEqual(m.Spec.Disks, want) {
					t.Errorf("vcpus %d memory %d disks %+v", m.Spec.VCPUs, m.Spec.MemoryMiB, m.Spec.Disks)
				}
			},
		},
		{
			name: "firmware, tpm and console log from the class; power from the VM",
			vm:   func(vm *banlieuev1.VirtualMachine) { vm.Spec.DesiredPowerState = banlieuev1.PoweredOff },
			class: func(c *banlieuev1.VMClass) {
				c.Spec.Firmware, c.Spec.TPMEnabled, c.Spec.ConsoleLog = banlieuev1.FirmwareBIOS, true, banlieuev1.ConsoleLogNone
			},
			image: func(i *banlieuev1.VMImage) { i.Spec.Template.InstallMode = banlieuev1.InstallDeferred },
			provider: func(p *banlieuev1.Provider) {
				p.Status.FailureDomains[0].Attributes.Features = []string{"vtpm"}
			},
			check: func(t *testing.T, m *infrav1.LibvirtMachine) {
				if m.Spec.Firmware != banlieuev1.FirmwareBIOS || !m.Spec.TPMEnabled || m.Spec.ConsoleLog != banlieuev1.ConsoleLogNone ||
					m.Spec.DesiredPowerState != banlieuev1.PoweredOff {
					t.Errorf("spec = %+v", m.Spec)
				}
			},
		},
		{
			name: "power-off mode, timeout and restart request from the VM",
			vm: func(vm *banlieuev1.VirtualMachine) {
				vm.Spec.PowerOffMode = banlieuev1.PowerOffSoft
				vm.Spec.PowerOffTimeout = &metav1.Duration{Duration: 10 * time.Second}
				vm.Spec.NextRestartTime = &metav1.Time{Time: time.Date(2026, 12, 1, 22, 0, 0, 0, time.UTC)}
			},
			check: func(t *testing.T, m *infrav1.LibvirtMachine) {
				if m.Spec.PowerOffMode != banlieuev1.PowerOffSoft || m.Spec.PowerOffTimeout.Duration != 10*time.Second ||
					m.Spec.NextRestartTime == nil || !m.Spec.NextRestartTime.Equal(&metav1.Time{Time: time.Date(2026, 12, 1, 22, 0, 0, 0, time.UTC)}) {
					t.Errorf("spec = %+v", m.Spec)
				}
			},
		},
		{
			name: "bridge mapping gives a bridge source",
			provider: func(p *banlieuev1.Provider) {
				p.Spec.Capabilities.NetworkClasses[0].Target = map[string]string{"bridge": "br0", "network": "default"}
			},
			check: func(t *testing.T, m *infrav1.LibvirtMachine) {
				if want := (infrav1.NetworkSource{Kind: infrav1.SourceBridge, Name: "br0"}); m.Spec.Network[0].Source != want {
					t.Errorf("source = %+v", m.Spec.Network[0].Source)
				}
			},
		},
		{
			name:     "static override completed from the subnet",
			vm:       override(banlieuev1.StaticIpamConfig{Address: "10.0.0.5", Prefix: 24}),
			provider: subnet,
			check: func(t *testing.T, m *infrav1.LibvirtMachine) {
				want := banlieuev1.IpamSpec{Static: &banlieuev1.StaticIpamConfig{Address: "10.0.0.5", Prefix: 24, Gateway: "10.0.0.1",
					Nameservers: []string{"10.0.0.53"}, Domain: "edge.example"}}
				if !reflect.DeepEqual(m.Spec.Network[0].IPAM, want) {
					t.Errorf("ipam = %+v", m.Spec.Network[0].IPAM.Static)
				}
			},
		},
		{
			name:     "static override wins field by field",
			vm:       override(banlieuev1.StaticIpamConfig{Address: "10.0.0.5", Prefix: 24, Gateway: "10.0.0.254", Domain: "vm.example"}),
			provider: subnet,
			check: func(t *testing.T, m *infrav1.LibvirtMachine) {
				want := banlieuev1.IpamSpec{Static: &banlieuev1.StaticIpamConfig{Address: "10.0.0.5", Prefix: 24, Gateway: "10.0.0.254",
					Nameservers: []string{"10.0.0.53"}, Domain: "vm.example"}}
				if !reflect.DeepEqual(m.Spec.Network[0].IPAM, want) {
					t.Errorf("ipam = %+v", m.Spec.Network[0].IPAM.Static)
				}
			},
		},
		{
			name: "static override without a subnet",
			vm:   override(banlieuev1.StaticIpamConfig{Address: "10.0.0.5", Prefix: 24}),
			check: func(t *testing.T, m *infrav1.LibvirtMachine) {
				want := banlieuev1.IpamSpec{Static: &banlieuev1.StaticIpamConfig{Address: "10.0.0.5", Prefix: 24}}
				if !reflect.DeepEqual(m.Spec.Network[0].IPAM, want) {
					t.Errorf("ipam = %+v", m.Spec.Network[0].IPAM.Static)
				}
			},
		},
		{
			name: "class pool without an override",
			class: func(c *banlieuev1.VMClass) {
				c.Spec.Network.Interfaces[0].IPAM.Pool = &banlieuev1.IpamPoolSource{PoolRef: banlieuev1.TypedObjectReference{Kind: "InClusterIPPool", Name: "lan"}}
			},
			check: func(t *testing.T, m *infrav1.LibvirtMachine) {
				if p := m.Spec.Network[0].IPAM.Pool; p == nil || p.PoolRef.Name != "lan" || m.Spec.Network[0].IPAM.Static != nil {
					t.Errorf("ipam = %+v", m.Spec.Network[0].IPAM)
				}
			},
		},
		{
			name: "override for another interface leaves this one on DHCP",
			vm: func(vm *banlieuev1.VirtualMachine) {
				vm.Spec.NetworkOverrides = []banlieuev1.NetworkOverride{{Name: "nic9", Static: banlieuev1.StaticIpamConfig{Address: "10.0.0.5", Prefix: 24}}}
			},
			check: func(t *testing.T, m *infrav1.LibvirtMachine) {
				if (m.Spec.Network[0].IPAM != banlieuev1.IpamSpec{}) {
					t.Errorf("ipam = %+v", m.Spec.Network[0].IPAM)
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := buildLibvirtMachine(guideInput(t, tt.vm, tt.class, tt.image, tt.provider))
			if tt.wantErrIs != nil {
				if !errors.Is(err, tt.wantErrIs) || err.Error() != tt.wantErrText {
					t.Fatalf("err = %v, want %q", err, tt.wantErrText)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tt.check(t, m)
		})
	}
}

func TestInfraKindFor(t *testing.T) {
	if k, err := infraKindFor("libvirt"); err != nil || k.GVK.Kind != "LibvirtMachine" || k.GVK.Group != "infrastructure.banlieue.io" {
		t.Errorf("libvirt = %+v, %v", k.GVK, err)
	}
	if k, err := infraKindFor("vsphere"); err != nil || k.GVK.Kind != "VSphereMachine" || k.GVK.Group != "infrastructure.banlieue.io" {
		t.Errorf("vsphere = %+v, %v", k.GVK, err)
	}
	_, err := infraKindFor("hyperv")
	if err == nil || err.Error() != "provider class 'hyperv' has no infrastructure builder in banlieue-controller" {
		t.Errorf("hyperv err = %v", err)
	}
}
