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

const testTemplatePath = "/dc1/vm/templates/ubuntu-24.04"

// vsphereProvider is examples/20's vCenter with two compute clusters as failure domains, each
// offering the datastore and port group of the class's storage and network classes.
func vsphereProvider(mut ...func(*banlieuev1.Provider)) banlieuev1.Provider {
	p := testProvider("vcenter-dc1", func(p *banlieuev1.Provider) {
		p.Spec.ProviderClassRef.Name = "vsphere"
		p.Spec.Capabilities = banlieuev1.ProviderCapabilities{
			StorageClasses: []banlieuev1.StorageClassMapping{
				{Name: "standard", Target: map[string]string{"datastore": "vsanDatastore"}},
				{Name: "bulk", Target: map[string]string{"datastore": "nfs-bulk"}},
			},
			NetworkClasses: []banlieuev1.NetworkClassMapping{{Name: "prod", Target: map[string]string{"portGroup": "prod-pg"},
				Subnet: &banlieuev1.NetworkSubnet{Gateway: "192.0.2.1", Nameservers: []string{"192.0.2.53"}}}},
		}
		fd := testFD("dc1-cluster-a", featureVTPM)
		fd.Attributes.AvailableStorageClasses = []string{"bulk", "standard"}
		p.Status.FailureDomains = []banlieuev1.FailureDomain{fd}
	})
	for _, m := range mut {
		m(&p)
	}
	return p
}

func vsphereImage(mut ...func(*banlieuev1.VMImage)) *banlieuev1.VMImage {
	img := testImage(readyRow("vcenter-dc1"))
	img.Spec.Sources = []banlieuev1.ImageSource{
		{ProviderClass: "libvirt", Kind: banlieuev1.SourceURL, Ref: "ubuntu-2404", ImportFrom: "https://images.example/ubuntu.img"},
		{ProviderClass: "vsphere", Kind: banlieuev1.SourceTemplate, Ref: testTemplatePath},
	}
	for _, m := range mut {
		m(img)
	}
	return img
}

// vsphereInput schedules the guide's VM onto the vCenter and returns what the builder gets.
func vsphereInput(t *testing.T, vm *banlieuev1.VirtualMachine, class *banlieuev1.VMClass, image *banlieuev1.VMImage) buildInput {
	t.Helper()
	d, err := schedule(scheduleInput{VM: vm, Class: class, Image: image, Providers: []banlieuev1.Provider{vsphereProvider()}})
	if err != nil {
		t.Fatalf("schedule: %v", err)
	}
	return buildInput{VM: vm, Class: class, Image: image, Decision: d}
}

func TestBuildVSphereMachine(t *testing.T) {
	vm := testVM("db-01", func(vm *banlieuev1.VirtualMachine) { vm.UID = types.UID("uid-7") })
	in := vsphereInput(t, vm, testClass(), vsphereImage())
	in.UserData = &machineUserData{Name: "userdata-db-01-0123456789abcdef", Hash: strings.Repeat("b", 64)}
	m, err := buildVSphereMachine(in)
	if err != nil {
		t.Fatal(err)
	}
	if m.Name != "db-01" || m.Namespace != testNS || m.Labels[banlieuev1.LabelOwnedBy] != "db-01" ||
		len(m.OwnerReferences) != 1 || m.OwnerReferences[0].UID != "uid-7" || !ptr.Deref(m.OwnerReferences[0].Controller, false) {
		t.Errorf("metadata = %+v", m.ObjectMeta)
	}
	want := infrav1.VSphereMachineSpec{
		FailureDomain:     "dc1-cluster-a",
		ProviderRef:       &infrav1.ProviderReference{Name: "vcenter-dc1", Namespace: testNS},
		VMName:            testNS + "-db-01",
		Template:          testTemplatePath,
		CPUs:              2,
		MemoryMiB:         2048,
		Firmware:          banlieuev1.FirmwareEFI,
		Disks:             []infrav1.VSphereDisk{{Name: "os", SizeGiB: 20, Datastore: "vsanDatastore", Provisioning: banlieuev1.DiskThin}},
		Network:           []infrav1.VSphereNetworkInterface{{Name: "nic0", PortGroup: "prod-pg"}},
		UserDataSecretRef: &banlieuev1.LocalObjectReference{Name: "userdata-db-01-0123456789abcdef"},
		UserDataHash:      strings.Repeat("b", 64),
		DesiredPowerState: banlieuev1.PoweredOn,
		PowerOffMode:      banlieuev1.PowerOffTrySoft,
		PowerOffTimeout:   &metav1.Duration{Duration: 2 * time.Minute},
	}
	if !reflect.DeepEqual(m.Spec, want) {
		t.Errorf("spec =\n%+v\nwant\n%+v", m.Spec, want)
	}
	if m.Spec.ProviderID != "" {
		t.Errorf("providerID = %q, want it left to the provider", m.Spec.ProviderID)
	}
}

// TestBuildVSphereMachineFromClassAndVM: every field the class and the VM decide, one at a time.
func TestBuildVSphereMachineFromClassAndVM(t *testing.T) {
	restart := metav1.NewTime(time.Date(2026, 12, 7, 1, 0, 0, 0, time.UTC))
	cases := []struct {
		name  string
		vm    func(*banlieuev1.VirtualMachine)
		class func(*banlieuev1.VMClass)
		check func(*infrav1.VSphereMachineSpec) string
	}{
		{"overrides resize cpus, memory and one disk", func(vm *banlieuev1.VirtualMachine) {
			vm.Spec.HardwareOverride = &banlieuev1.HardwareOverride{CPUs: ptr.To[int32](8), MemoryMiB: ptr.To[int32](16384),
				DiskOverrides: []banlieuev1.DiskOverride{{Name: "data", SizeGiB: 500}}}
		}, func(c *banlieuev1.VMClass) {
			c.Spec.Hardware.Disks = append(c.Spec.Hardware.Disks, banlieuev1.ClassDisk{Name: "data", SizeGiB: 100, StorageClass: "bulk", Provisioning: banlieuev1.DiskEagerZeroed})
		}, func(s *infrav1.VSphereMachineSpec) string {
			want := []infrav1.VSphereDisk{
				{Name: "os", SizeGiB: 20, Datastore: "vsanDatastore", Provisioning: banlieuev1.DiskThin},
				{Name: "data", SizeGiB: 500, Datastore: "nfs-bulk", Provisioning: banlieuev1.DiskEagerZeroed},
			}
			if s.CPUs != 8 || s.MemoryMiB != 16384 || !reflect.DeepEqual(s.Disks, want) {
				return "cpus, memory or disks not from the override and the Provider's datastores"
			}
			return ""
		}},
		{"a static address is completed from the network class's subnet", func(vm *banlieuev1.VirtualMachine) {
			vm.Spec.NetworkOverrides = []banlieuev1.NetworkOverride{{Name: "nic0", Static: banlieuev1.StaticIpamConfig{Address: "192.0.2.10", Prefix: 24}}}
		}, nil, func(s *infrav1.VSphereMachineSpec) string {
			st := s.Network[0].IPAM.Static
			if st == nil || st.Address != "192.0.2.10" || st.Gateway != "192.0.2.1" || !reflect.DeepEqual(st.Nameservers, []string{"192.0.2.53"}) {
				return "static address not completed from the subnet"
			}
			return ""
		}},
		{"power, its mode, timeout and restart come from the VM", func(vm *banlieuev1.VirtualMachine) {
			vm.Spec.DesiredPowerState = banlieuev1.PoweredOff
			vm.Spec.PowerOffMode = banlieuev1.PowerOffHard
			vm.Spec.PowerOffTimeout = &metav1.Duration{Duration: 30 * time.Second}
			vm.Spec.NextRestartTime = &restart
		}, nil, func(s *infrav1.VSphereMachineSpec) string {
			if s.DesiredPowerState != banlieuev1.PoweredOff || s.PowerOffMode != banlieuev1.PowerOffHard ||
				s.PowerOffTimeout.Duration != 30*time.Second || !s.NextRestartTime.Equal(&restart) {
				return "power fields not copied"
			}
			return ""
		}},
		{"bios firmware and a vTPM come from the class", nil, func(c *banlieuev1.VMClass) {
			c.Spec.Firmware = banlieuev1.FirmwareBIOS
			c.Spec.TPMEnabled = true
		}, func(s *infrav1.VSphereMachineSpec) string {
			if s.Firmware != banlieuev1.FirmwareBIOS || !s.TPMEnabled {
				return "firmware or tpm not from the class"
			}
			return ""
		}},
		{"a class without firmware gets efi", nil, func(c *banlieuev1.VMClass) { c.Spec.Firmware = "" },
			func(s *infrav1.VSphereMachineSpec) string {
				if s.Firmware != banlieuev1.FirmwareEFI {
					return "firmware not defaulted to efi"
				}
				return ""
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			vm := testVM("db-01")
			if tc.vm != nil {
				tc.vm(vm)
			}
			class := testClass()
			if tc.class != nil {
				tc.class(class)
			}
			in := vsphereInput(t, vm, class, vsphereImage())
			m, err := buildVSphereMachine(in)
			if err != nil {
				t.Fatal(err)
			}
			if msg := tc.check(&m.Spec); msg != "" {
				t.Errorf("%s: spec = %+v", msg, m.Spec)
			}
		})
	}
}

// TestBuildVSphereMachineKeepsItsTemplate: a clone happens once, so an existing machine keeps
// the template it was cloned from when the image's source moves to another.
func TestBuildVSphereMachineKeepsItsTemplate(t *testing.T) {
	vm := testVM("db-01")
	image := vsphereImage(func(img *banlieuev1.VMImage) { img.Spec.Sources[1].Ref = "/dc1/vm/templates/ubuntu-24.04.1" })
	in := vsphereInput(t, vm, testClass(), image)
	fresh, err := buildVSphereMachine(in)
	if err != nil {
		t.Fatal(err)
	}
	if fresh.Spec.Template != "/dc1/vm/templates/ubuntu-24.04.1" {
		t.Errorf("a new machine's template = %q, want the image's current one", fresh.Spec.Template)
	}
	in.Existing = &infrav1.VSphereMachine{Spec: infrav1.VSphereMachineSpec{Template: testTemplatePath}}
	kept, err := buildVSphereMachine(in)
	if err != nil {
		t.Fatal(err)
	}
	if kept.Spec.Template != testTemplatePath {
		t.Errorf("an existing machine's template = %q, want the one it was cloned from", kept.Spec.Template)
	}
}

// TestBuildVSphereMachineRefusesImages: an image the vsphere provider cannot clone is refused
// with ImageSourceUnsupported, naming the field to change.
func TestBuildVSphereMachineRefusesImages(t *testing.T) {
	cases := []struct {
		name  string
		image func(*banlieuev1.VMImage)
		want  string
	}{
		{"no vsphere source", func(img *banlieuev1.VMImage) { img.Spec.Sources = img.Spec.Sources[:1] },
			"VMImage ubuntu-2404 has no spec.sources entry for providerClass vsphere"},
		{"a Url source", func(img *banlieuev1.VMImage) {
			img.Spec.Sources[1] = banlieuev1.ImageSource{ProviderClass: "vsphere", Kind: banlieuev1.SourceURL, ImportFrom: "https://images.example/u.ova"}
		}, "spec.sources[providerClass=vsphere].kind is Url"},
		{"a BackingFile source", func(img *banlieuev1.VMImage) { img.Spec.Sources[1].Kind = banlieuev1.SourceBackingFile },
			"spec.sources[providerClass=vsphere].kind is BackingFile"},
		{"a ref that is a managed object id", func(img *banlieuev1.VMImage) { img.Spec.Sources[1].Ref = "vm-1234" },
			`spec.sources[providerClass=vsphere].ref "vm-1234" is not an inventory path`},
		{"a ref with an empty datacenter", func(img *banlieuev1.VMImage) { img.Spec.Sources[1].Ref = "//vm/t" },
			`spec.sources[providerClass=vsphere].ref "//vm/t" is not an inventory path`},
		{"an install medium", func(img *banlieuev1.VMImage) { img.Spec.Template.InstallMode = "Deferred" },
			"spec.template.installMode is deferred"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			image := vsphereImage(tc.image)
			d, err := schedule(scheduleInput{VM: testVM("db-01"), Class: testClass(), Image: image, Providers: []banlieuev1.Provider{vsphereProvider()}})
			if err != nil {
				t.Fatalf("schedule: %v", err)
			}
			_, err = buildVSphereMachine(buildInput{VM: testVM("db-01"), Class: testClass(), Image: image, Decision: d})
			var rf *refusal
			if !errors.As(err, &rf) || rf.Reason != banlieuev1.ReasonImageSourceUnsupported {
				t.Fatalf("err = %v, want a refusal with reason %s", err, banlieuev1.ReasonImageSourceUnsupported)
			}
			if !strings.Contains(rf.Message, tc.want) {
				t.Errorf("message %q lacks %q", rf.Message, tc.want)
			}
		})
	}
}

func TestVSphereViewReadsStatus(t *testing.T) {
	ready := metav1.Condition{Type: banlieuev1.ConditionReady, Status: metav1.ConditionTrue, Reason: "Running"}
	guest := metav1.Condition{Type: banlieuev1.ConditionGuestReady, Status: metav1.ConditionFalse, Reason: "ToolsNotRunning"}
	restart := metav1.Now()
	m := &infrav1.VSphereMachine{Status: infrav1.VSphereMachineStatus{
		Initialization:     &banlieuev1.InitializationStatus{Provisioned: ptr.To(true)},
		Addresses:          []banlieuev1.MachineAddress{{Type: banlieuev1.MachineInternalIP, Address: "192.0.2.20"}},
		ObservedPowerState: banlieuev1.PoweredOn,
		LastRestartTime:    &restart,
		Conditions:         []metav1.Condition{guest, ready},
	}}
	v := vsphereKind.view(m)
	if v.Ready == nil || *v.Ready != ready || v.GuestReady == nil || *v.GuestReady != guest || v.PowerState != banlieuev1.PoweredOn ||
		len(v.Addresses) != 1 || !ptr.Deref(v.Initialization.Provisioned, false) || v.LastRestartTime != &restart {
		t.Errorf("view = %+v", v)
	}
	if got := vsphereKind.providerOf(&infrav1.VSphereMachine{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a"},
		Spec: infrav1.VSphereMachineSpec{ProviderRef: &infrav1.ProviderReference{Name: "vc"}}}); got != (types.NamespacedName{Namespace: "team-a", Name: "vc"}) {
		t.Errorf("providerOf = %v, want team-a/vc", got)
	}
}
