package controller

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
)

const testNS = "banlieue-system"

// fixtures: the guide's class "small" (disk on standard, NIC on prod) and image ubuntu-2404.

func testClass(mut ...func(*banlieuev1.VMClass)) *banlieuev1.VMClass {
	c := &banlieuev1.VMClass{
		ObjectMeta: metav1.ObjectMeta{Name: "small"},
		Spec: banlieuev1.VMClassSpec{
			Firmware: banlieuev1.FirmwareEFI,
			Hardware: banlieuev1.ClassHardware{CPUs: 2, MemoryMiB: 2048,
				Disks: []banlieuev1.ClassDisk{{Name: "os", SizeGiB: 20, StorageClass: "standard"}}},
			Network: banlieuev1.ClassNetwork{Interfaces: []banlieuev1.ClassInterface{{Name: "nic0", NetworkClass: "prod"}}},
		},
	}
	for _, m := range mut {
		m(c)
	}
	return c
}

func testImage(rows ...banlieuev1.ProviderImageStatus) *banlieuev1.VMImage {
	return &banlieuev1.VMImage{
		ObjectMeta: metav1.ObjectMeta{Name: "ubuntu-2404"},
		Spec:       banlieuev1.VMImageSpec{Template: &banlieuev1.VMImageTemplate{InstallMode: banlieuev1.InstallImmediate}},
		Status:     banlieuev1.VMImageStatus{PerProvider: rows},
	}
}

func readyRow(provider string) banlieuev1.ProviderImageStatus {
	return banlieuev1.ProviderImageStatus{ProviderName: provider, ProviderNamespace: testNS, Ready: true,
		Reason: "Reconciled", ResolvedRef: "ubuntu-2404.raw"}
}

func testFD(name string, features ...string) banlieuev1.FailureDomain {
	return banlieuev1.FailureDomain{
		Name:   name,
		Labels: map[string]string{"name": name},
		Attributes: banlieuev1.FailureDomainAttributes{
			AvailableStorageClasses: []string{"standard"},
			AvailableNetworkClasses: []string{"prod"},
			Features:                features,
		},
	}
}

// testProvider is a libvirt Provider with one failure domain named after it, like the provider
// publishes.
func testProvider(name string, mut ...func(*banlieuev1.Provider)) banlieuev1.Provider {
	p := banlieuev1.Provider{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: testNS, Labels: map[string]string{"site": "edge"}},
		Spec: banlieuev1.ProviderSpec{
			ProviderClassRef: banlieuev1.LocalObjectReference{Name: "libvirt"},
			Capabilities: banlieuev1.ProviderCapabilities{
				StorageClasses: []banlieuev1.StorageClassMapping{{Name: "standard", Target: map[string]string{"pool": "default"}}},
				NetworkClasses: []banlieuev1.NetworkClassMapping{{Name: "prod", Target: map[string]string{"network": "br-prod"}}},
			},
		},
		Status: banlieuev1.ProviderStatus{FailureDomains: []banlieuev1.FailureDomain{testFD(name)}},
	}
	for _, m := range mut {
		m(&p)
	}
	return p
}

func testVM(name string, mut ...func(*banlieuev1.VirtualMachine)) *banlieuev1.VirtualMachine {
	vm := &banlieuev1.VirtualMachine{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: testNS, Labels: map[string]string{"app": "web"}},
		Spec: banlieuev1.VirtualMachineSpec{
			ClassRef: banlieuev1.LocalObjectReference{Name: "small"},
			ImageRef: banlieuev1.LocalObjectReference{Name: "ubuntu-2404"},
		},
	}
	for _, m := range mut {
		m(vm)
	}
	return vm
}

// scheduledOn is a sibling VM already placed on fd.
func scheduledOn(name, fd string) banlieuev1.VirtualMachine {
	vm := testVM(name)
	vm.Status.Scheduled = &banlieuev1.ScheduledPlacement{ProviderName: fd, ProviderClass: "libvirt", FailureDomain: fd}
	return *vm
}

func withAntiAffinity(mode string) func(*banlieuev1.VirtualMachine) {
	return func(vm *banlieuev1.VirtualMachine) {
		vm.Spec.Placement = &banlieuev1.Placement{AntiAffinity: []banlieuev1.AntiAffinityRule{{
			TopologyKey: "name", Mode: mode,
			LabelSelector: banlieuev1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
		}}}
	}
}

func withFeatures(features ...string) func(*banlieuev1.Provider) {
	return func(p *banlieuev1.Provider) { p.Status.FailureDomains[0].Attributes.Features = features }
}

func TestSchedule(t *testing.T) {
	tests := []struct {
		name      string
		vm        *banlieuev1.VirtualMachine
		class     *banlieuev1.VMClass
		image     *banlieuev1.VMImage
		providers []banlieuev1.Provider
		siblings  []banlieuev1.VirtualMachine
		wantFD    string
		wantErr   string // reason
		wantMsg   []string
	}{
		{
			name: "guide: one provider, one FD", vm: testVM("web-01"), class: testClass(),
			image: testImage(readyRow("libvirt-edge-host-7")), providers: []banlieuev1.Provider{testProvider("libvirt-edge-host-7")},
			wantFD: "libvirt-edge-host-7",
		},
		{
			name: "no providers at all", vm: testVM("web-01"), class: testClass(), image: testImage(),
			wantErr: banlieuev1.ReasonNoProviderMatched, wantMsg: []string{"namespace banlieue-system"},
		},
		{
			name: "provider selector matches nothing",
			vm: testVM("web-01", func(vm *banlieuev1.VirtualMachine) {
				vm.Spec.Placement = &banlieuev1.Placement{ProviderSelector: &banlieuev1.LabelSelector{MatchLabels: map[string]string{"site": "core"}}}
			}),
			class: testClass(), image: testImage(readyRow("a")), providers: []banlieuev1.Provider{testProvider("a")},
			wantErr: banlieuev1.ReasonNoProviderMatched,
		},
		{
			name: "provider selector narrows to the second provider",
			vm: testVM("web-01", func(vm *banlieuev1.VirtualMachine) {
				vm.Spec.Placement = &banlieuev1.Placement{ProviderSelector: &banlieuev1.LabelSelector{MatchLabels: map[string]string{"site": "core"}}}
			}),
			class: testClass(), image: testImage(readyRow("a"), readyRow("b")),
			providers: []banlieuev1.Provider{testProvider("a"), testProvider("b", func(p *banlieuev1.Provider) { p.Labels["site"] = "core" })},
			wantFD:    "b",
		},
		{
			name: "image not ready anywhere", vm: testVM("web-01"), class: testClass(),
			image:     testImage(banlieuev1.ProviderImageStatus{ProviderName: "a", ProviderNamespace: testNS, Reason: "Importing", Message: "import Job running"}),
			providers: []banlieuev1.Provider{testProvider("a"), testProvider("b")},
			wantErr:   banlieuev1.ReasonImageNotReady, wantMsg: []string{"provider a: VMImage ubuntu-2404 is not ready (Importing: import Job running)", "provider b: VMImage ubuntu-2404 has no status row"},
		},
		{
			name: "image row of a same-named provider in another namespace does not count", vm: testVM("web-01"), class: testClass(),
			image:     testImage(banlieuev1.ProviderImageStatus{ProviderName: "a", ProviderNamespace: "other", Ready: true}),
			providers: []banlieuev1.Provider{testProvider("a")},
			wantErr:   banlieuev1.ReasonImageNotReady,
		},
		{
			name: "image ready only on b picks b", vm: testVM("web-01"), class: testClass(), image: testImage(readyRow("b")),
			providers: []banlieuev1.Provider{testProvider("a"), testProvider("b")}, wantFD: "b",
		},
		{
			name: "image precedes firmware", vm: testVM("web-01"),
			class: testClass(func(c *banlieuev1.VMClass) { c.Spec.Firmware = banlieuev1.FirmwareEFISecure }),
			image: testImage(), providers: []banlieuev1.Provider{testProvider("a")}, wantErr: banlieuev1.ReasonImageNotReady,
		},
		{
			name: "efi-secure without efiSecureBoot", vm: testVM("web-01"),
			class: testClass(func(c *banlieuev1.VMClass) { c.Spec.Firmware = banlieuev1.FirmwareEFISecure }),
			image: testImage(readyRow("a")), providers: []banlieuev1.Provider{testProvider("a")},
			wantErr: banlieuev1.ReasonFirmwareUnsupported, wantMsg: []string{"a/a: firmware efi-secure needs feature efiSecureBoot"},
		},
		{
			name: "efi-secure with efiSecureBoot", vm: testVM("web-01"),
			class: testClass(func(c *banlieuev1.VMClass) { c.Spec.Firmware = banlieuev1.FirmwareEFISecure }),
			image: testImage(readyRow("a")), providers: []banlieuev1.Provider{testProvider("a", withFeatures("efiSecureBoot"))}, wantFD: "a",
		},
		{
			name: "firmware precedes tpm", vm: testVM("web-01"),
			class:     testClass(func(c *banlieuev1.VMClass) { c.Spec.Firmware = banlieuev1.FirmwareEFISecure; c.Spec.TPMEnabled = true }),
			image:     testImage(readyRow("a"), readyRow("b")),
			providers: []banlieuev1.Provider{testProvider("a"), testProvider("b", withFeatures("efiSecureBoot"))},
			wantErr:   banlieuev1.ReasonFirmwareUnsupported, wantMsg: []string{"b/b: tpmEnabled needs feature vtpm"},
		},
		{
			name: "tpm without vtpm", vm: testVM("web-01"),
			class: testClass(func(c *banlieuev1.VMClass) { c.Spec.TPMEnabled = true }),
			image: testImage(readyRow("a")), providers: []banlieuev1.Provider{testProvider("a")},
			wantErr: banlieuev1.ReasonTpmUnsupported, wantMsg: []string{"VMClass small has tpmEnabled", "vtpm", "a/a: tpmEnabled needs feature vtpm"},
		},
		{
			name: "tpm with vtpm", vm: testVM("web-01"),
			class: testClass(func(c *banlieuev1.VMClass) { c.Spec.TPMEnabled = true }),
			image: testImage(readyRow("a")), providers: []banlieuev1.Provider{testProvider("a", withFeatures("vtpm"))}, wantFD: "a",
		},
		{
			name: "tpm precedes other FD rejections", vm: testVM("web-01"),
			class: testClass(func(c *banlieuev1.VMClass) { c.Spec.TPMEnabled = true }),
			image: testImage(readyRow("a"), readyRow("b")),
			providers: []banlieuev1.Provider{testProvider("a"), testProvider("b", func(p *banlieuev1.Provider) {
				p.Status.FailureDomains[0].Attributes.AvailableStorageClasses = nil
			})},
			wantErr: banlieuev1.ReasonTpmUnsupported,
		},
		{
			name: "storage class missing", vm: testVM("web-01"),
			class: testClass(func(c *banlieuev1.VMClass) { c.Spec.Hardware.Disks[0].StorageClass = "gold" }),
			image: testImage(readyRow("a")), providers: []banlieuev1.Provider{testProvider("a")},
			wantErr: banlieuev1.ReasonNoFailureDomainMatched, wantMsg: []string{"a/a: storageClass gold (disk os) is not available"},
		},
		{
			name: "network class missing", vm: testVM("web-01"),
			class: testClass(func(c *banlieuev1.VMClass) { c.Spec.Network.Interfaces[0].NetworkClass = "dmz" }),
			image: testImage(readyRow("a")), providers: []banlieuev1.Provider{testProvider("a")},
			wantErr: banlieuev1.ReasonNoFailureDomainMatched, wantMsg: []string{"networkClass dmz (interface nic0) is not available"},
		},
		{
			name: "class feature missing", vm: testVM("web-01"),
			class: testClass(func(c *banlieuev1.VMClass) { c.Spec.Features = []string{"gpuPassthrough"} }),
			image: testImage(readyRow("a")), providers: []banlieuev1.Provider{testProvider("a", withFeatures("vtpm"))},
			wantErr: banlieuev1.ReasonNoFailureDomainMatched, wantMsg: []string{"feature gpuPassthrough is not advertised"},
		},
		{
			name: "failure domain selector", vm: testVM("web-01", func(vm *banlieuev1.VirtualMachine) {
				vm.Spec.Placement = &banlieuev1.Placement{FailureDomainSelector: &banlieuev1.LabelSelector{MatchLabels: map[string]string{"name": "b"}}}
			}),
			class: testClass(), image: testImage(readyRow("a"), readyRow("b")),
			providers: []banlieuev1.Provider{testProvider("a"), testProvider("b")}, wantFD: "b",
		},
		{
			name: "failure domain selector matches nothing", vm: testVM("web-01", func(vm *banlieuev1.VirtualMachine) {
				vm.Spec.Placement = &banlieuev1.Placement{FailureDomainSelector: &banlieuev1.LabelSelector{MatchLabels: map[string]string{"name": "z"}}}
			}),
			class: testClass(), image: testImage(readyRow("a")), providers: []banlieuev1.Provider{testProvider("a")},
			wantErr: banlieuev1.ReasonNoFailureDomainMatched, wantMsg: []string{"a/a: labels do not match the failureDomainSelector"},
		},
		{
			name: "provider without failure domains", vm: testVM("web-01"), class: testClass(), image: testImage(readyRow("a")),
			providers: []banlieuev1.Provider{testProvider("a", func(p *banlieuev1.Provider) { p.Status.FailureDomains = nil })},
			wantErr:   banlieuev1.ReasonNoFailureDomainMatched, wantMsg: []string{"provider a: publishes no failure domains"},
		},
		{
			name: "tie-break by provider name, then FD name", vm: testVM("web-01"), class: testClass(),
			image: testImage(readyRow("a"), readyRow("b")),
			providers: []banlieuev1.Provider{testProvider("b"), testProvider("a", func(p *banlieuev1.Provider) {
				p.Status.FailureDomains = []banlieuev1.FailureDomain{testFD("z"), testFD("m")}
			})},
			wantFD: "m",
		},
		{
			name: "required anti-affinity avoids a sibling's FD", vm: testVM("web-02", withAntiAffinity("required")), class: testClass(),
			image: testImage(readyRow("a"), readyRow("b")), providers: []banlieuev1.Provider{testProvider("a"), testProvider("b")},
			siblings: []banlieuev1.VirtualMachine{scheduledOn("web-01", "a")}, wantFD: "b",
		},
		{
			name: "default mode is required", vm: testVM("web-02", withAntiAffinity("")), class: testClass(),
			image: testImage(readyRow("a")), providers: []banlieuev1.Provider{testProvider("a")},
			siblings: []banlieuev1.VirtualMachine{scheduledOn("web-01", "a")}, wantErr: banlieuev1.ReasonAntiAffinityUnsatisfied,
		},
		{
			name: "required anti-affinity leaves nothing", vm: testVM("web-03", withAntiAffinity("required")), class: testClass(),
			image: testImage(readyRow("a"), readyRow("b")), providers: []banlieuev1.Provider{testProvider("a"), testProvider("b")},
			siblings: []banlieuev1.VirtualMachine{scheduledOn("web-01", "a"), scheduledOn("web-02", "b")},
			wantErr:  banlieuev1.ReasonAntiAffinityUnsatisfied, wantMsg: []string{"a/a: a sibling", "b/b: a sibling"},
		},
		{
			name: "anti-affinity ignores the VM itself", vm: testVM("web-01", withAntiAffinity("required")), class: testClass(),
			image: testImage(readyRow("a")), providers: []banlieuev1.Provider{testProvider("a")},
			siblings: []banlieuev1.VirtualMachine{scheduledOn("web-01", "a")}, wantFD: "a",
		},
		{
			name: "anti-affinity ignores non-matching siblings", vm: testVM("web-02", withAntiAffinity("required")), class: testClass(),
			image: testImage(readyRow("a")), providers: []banlieuev1.Provider{testProvider("a")},
			siblings: []banlieuev1.VirtualMachine{func() banlieuev1.VirtualMachine {
				s := scheduledOn("db-01", "a")
				s.Labels = map[string]string{"app": "db"}
				return s
			}()}, wantFD: "a",
		},
		{
			name: "preferred anti-affinity breaks the tie away from the sibling", vm: testVM("web-02", withAntiAffinity("preferred")), class: testClass(),
			image: testImage(readyRow("a"), readyRow("b")), providers: []banlieuev1.Provider{testProvider("a"), testProvider("b")},
			siblings: []banlieuev1.VirtualMachine{scheduledOn("web-01", "a")}, wantFD: "b",
		},
		{
			name: "preferred anti-affinity picks the fewest siblings, not none", vm: testVM("web-04", withAntiAffinity("preferred")), class: testClass(),
			image: testImage(readyRow("a"), readyRow("b")), providers: []banlieuev1.Provider{testProvider("a"), testProvider("b")},
			siblings: []banlieuev1.VirtualMachine{scheduledOn("web-01", "a"), scheduledOn("web-02", "b"), scheduledOn("web-03", "a")},
			wantFD:   "b",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, err := schedule(scheduleInput{VM: tt.vm, Class: tt.class, Image: tt.image, Providers: tt.providers, Siblings: tt.siblings})
			if tt.wantErr != "" {
				se, ok := err.(*scheduleError)
				if !ok {
					t.Fatalf("err = %v (decision %+v), want reason %s", err, d, tt.wantErr)
				}
				if se.Reason != tt.wantErr {
					t.Fatalf("reason = %s (%s), want %s", se.Reason, se.Message, tt.wantErr)
				}
				for _, m := range tt.wantMsg {
					if !strings.Contains(se.Message, m) {
						t.Errorf("message %q lacks %q", se.Message, m)
					}
				}
				return
			}
			if err != nil {
				t.Fatalf("schedule: %v", err)
			}
			if d.FailureDomain.Name != tt.wantFD {
				t.Errorf("failure domain = %s, want %s", d.FailureDomain.Name, tt.wantFD)
			}
		})
	}
}

func TestScheduleCapsReasons(t *testing.T) {
	var providers []banlieuev1.Provider
	for i := range 13 {
		providers = append(providers, testProvider(fmt.Sprintf("p%02d", i)))
	}
	_, err := schedule(scheduleInput{VM: testVM("web-01"), Class: testClass(), Image: testImage(), Providers: providers})
	se, ok := err.(*scheduleError)
	if !ok {
		t.Fatalf("err = %v", err)
	}
	if n := strings.Count(se.Message, "provider p"); n != maxRejectReasons {
		t.Errorf("%d reasons quoted, want %d: %s", n, maxRejectReasons, se.Message)
	}
	if !strings.HasSuffix(se.Message, "; … and 3 more") || !strings.Contains(se.Message, "provider p09") || strings.Contains(se.Message, "p10") {
		t.Errorf("message = %s", se.Message)
	}
}

func TestScheduleResolvesMappings(t *testing.T) {
	class := testClass(func(c *banlieuev1.VMClass) {
		c.Spec.Hardware.Disks = append(c.Spec.Hardware.Disks,
			banlieuev1.ClassDisk{Name: "data", SizeGiB: 5, StorageClass: "gold"},
			banlieuev1.ClassDisk{Name: "scratch", SizeGiB: 1, StorageClass: "bare"})
		c.Spec.Network.Interfaces = append(c.Spec.Network.Interfaces,
			banlieuev1.ClassInterface{Name: "nic1", NetworkClass: "lan"},
			banlieuev1.ClassInterface{Name: "nic2", NetworkClass: "plain"})
	})
	p := testProvider("a", func(p *banlieuev1.Provider) {
		p.Spec.Capabilities.StorageClasses = append(p.Spec.Capabilities.StorageClasses,
			banlieuev1.StorageClassMapping{Name: "gold", Target: map[string]string{"zpool": "z", "pool": "nvme-pool"}},
			banlieuev1.StorageClassMapping{Name: "bare"})
		p.Spec.Capabilities.NetworkClasses = append(p.Spec.Capabilities.NetworkClasses,
			banlieuev1.NetworkClassMapping{Name: "lan", Target: map[string]string{"network": "default", "bridge": "br0"}})
		fd := &p.Status.FailureDomains[0].Attributes
		fd.AvailableStorageClasses = []string{"standard", "gold", "bare"}
		fd.AvailableNetworkClasses = []string{"prod", "lan", "plain"}
	})
	d, err := schedule(scheduleInput{VM: testVM("web-01"), Class: class, Image: testImage(readyRow("a")), Providers: []banlieuev1.Provider{p}})
	if err != nil {
		t.Fatal(err)
	}
	wantStorage := []banlieuev1.ResolvedMapping{{ClassName: "standard", BackendID: "default"}, {ClassName: "gold", BackendID: "nvme-pool"}, {ClassName: "bare", BackendID: "bare"}}
	wantNetworks := []banlieuev1.ResolvedMapping{{ClassName: "prod", BackendID: "br-prod"}, {ClassName: "lan", BackendID: "br0"}, {ClassName: "plain", BackendID: "plain"}}
	if !reflect.DeepEqual(d.ResolvedStorage, wantStorage) {
		t.Errorf("storage = %+v, want %+v", d.ResolvedStorage, wantStorage)
	}
	if !reflect.DeepEqual(d.ResolvedNetworks, wantNetworks) {
		t.Errorf("networks = %+v, want %+v", d.ResolvedNetworks, wantNetworks)
	}
	want := banlieuev1.ScheduledPlacement{ProviderName: "a", ProviderNamespace: testNS, ProviderClass: "libvirt", FailureDomain: "a", ResolvedStorage: wantStorage, ResolvedNetworks: wantNetworks,
		CPUs: 2, MemoryMiB: 2048}
	if got := d.placement(); !reflect.DeepEqual(got, want) {
		t.Errorf("placement = %+v, want %+v", got, want)
	}
}
