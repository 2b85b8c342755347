package libvirt

import (
	"slices"
	"strings"
	"testing"

	"libvirt.org/go/libvirtxml"

	infrav1 "banlieue.io/banlieue/api/infrastructure/v1alpha1"
	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
)

func machineSpec(mut func(*infrav1.LibvirtMachineSpec)) *infrav1.LibvirtMachineSpec {
	s := &infrav1.LibvirtMachineSpec{
		ProviderRef: &infrav1.ProviderReference{Name: "lab"},
		Pool:        "default",
		DomainName:  "banlieue-system-web-01",
		BootSource:  infrav1.BootSource{Kind: infrav1.BootBackingVolume, Volume: "ubuntu.raw"},
		VCPUs:       2,
		MemoryMiB:   2048,
		Firmware:    banlieuev1.FirmwareEFI,
		Disks:       []infrav1.LibvirtDisk{{Name: "os", SizeGiB: 20, Bus: infrav1.BusVirtio}},
		Network:     []infrav1.LibvirtNetworkInterface{{Name: "nic0", Source: infrav1.NetworkSource{Kind: infrav1.SourceNetwork, Name: "default"}}},
	}
	if mut != nil {
		mut(s)
	}
	return s
}

func parseDomain(t *testing.T, xml string) *libvirtxml.Domain {
	t.Helper()
	var d libvirtxml.Domain
	if err := d.Unmarshal(xml); err != nil {
		t.Fatalf("rendered XML does not parse: %v\n%s", err, xml)
	}
	return &d
}

type diskView struct{ device, target, bus, driver, file string }

func disksOf(d *libvirtxml.Domain) []diskView {
	var out []diskView
	for _, disk := range d.Devices.Disks {
		v := diskView{device: disk.Device, target: disk.Target.Dev, bus: disk.Target.Bus, driver: disk.Driver.Type}
		if disk.Source != nil && disk.Source.File != nil {
			v.file = disk.Source.File.File
		}
		out = append(out, v)
	}
	return out
}

func bootOrder(d *libvirtxml.Domain) string {
	var devs []string
	for _, b := range d.OS.BootDevices {
		devs = append(devs, b.Dev)
	}
	return strings.Join(devs, ",")
}

func TestRenderDomainBackingVolume(t *testing.T) {
	xml, err := renderDomain(domainInputs{owner: testOwner, spec: machineSpec(nil), domainType: "kvm",
		diskPaths: []string{"/pool/banlieue-system-web-01-os.qcow2"}, seed: "/pool/banlieue-system-web-01-cidata.iso"})
	if err != nil {
		t.Fatal(err)
	}
	d := parseDomain(t, xml)
	if d.Type != "kvm" || d.Name != "banlieue-system-web-01" || d.UUID != "" {
		t.Errorf("type/name/uuid: %q %q %q", d.Type, d.Name, d.UUID)
	}
	if o, ok := DomainOwner(d); !ok || o != testOwner {
		t.Errorf("ownership record: %+v %v, want %+v", o, ok, testOwner)
	}
	if d.Memory.Value != 2048 || d.Memory.Unit != "MiB" || d.CurrentMemory.Value != 2048 || d.VCPU.Value != 2 || d.VCPU.Placement != "static" {
		t.Errorf("memory/vcpu: %+v %+v %+v", d.Memory, d.CurrentMemory, d.VCPU)
	}
	if d.OS.Firmware != "efi" || d.OS.Loader != nil || d.OS.NVRam != nil {
		t.Errorf("efi must be left to libvirt's firmware descriptors: %+v", d.OS)
	}
	if f := d.OS.FirmwareInfo.Features; len(f) != 1 || f[0].Name != "secure-boot" || f[0].Enabled != "no" {
		t.Errorf("plain efi must disable secure boot: %+v", f)
	}
	if bootOrder(d) != "hd" {
		t.Errorf("boot order %q", bootOrder(d))
	}
	if d.CPU == nil || d.CPU.Mode != "host-passthrough" {
		t.Errorf("kvm domains pass the host CPU through: %+v", d.CPU)
	}
	if d.Features.SMM != nil || d.Features.ACPI == nil || d.Features.APIC == nil {
		t.Errorf("features: %+v", d.Features)
	}
	want := []diskView{
		{"disk", "vda", "virtio", "qcow2", "/pool/banlieue-system-web-01-os.qcow2"},
		{"cdrom", "sda", "scsi", "raw", "/pool/banlieue-system-web-01-cidata.iso"},
	}
	if got := disksOf(d); !slices.Equal(got, want) {
		t.Errorf("disks:\n got %+v\nwant %+v", got, want)
	}
	// The seed's bus is virtio-scsi, named, so a cloud kernel without AHCI or LSI drivers sees it.
	if !slices.ContainsFunc(d.Devices.Controllers, func(c libvirtxml.DomainController) bool {
		return c.Type == "scsi" && c.Model == "virtio-scsi" && c.Index != nil && *c.Index == 0
	}) {
		t.Errorf("no virtio-scsi controller 0 for the seed: %+v", d.Devices.Controllers)
	}
	if len(d.Devices.TPMs) != 0 {
		t.Errorf("no TPM unless tpmEnabled")
	}
	if ch := d.Devices.Channels; len(ch) != 1 || ch[0].Target.VirtIO.Name != guestAgentChannel {
		t.Errorf("guest agent channel: %+v", ch)
	}
	if len(d.Devices.Serials) != 1 || d.Devices.Serials[0].Log == nil ||
		d.Devices.Serials[0].Log.File != "/var/log/libvirt/qemu/banlieue-system-web-01-serial.log" ||
		len(d.Devices.Consoles) != 1 || d.Devices.MemBalloon.Model != "virtio" {
		t.Errorf("serial/console/balloon: %+v", d.Devices)
	}
	if n := d.Devices.Interfaces; len(n) != 1 || n[0].Source.Network.Network != "default" || n[0].Model.Type != "virtio" {
		t.Errorf("interfaces: %+v", n)
	}
	if d.OnPoweroff != "destroy" || d.OnReboot != "restart" || d.OnCrash != "destroy" {
		t.Errorf("lifecycle actions: %s %s %s", d.OnPoweroff, d.OnReboot, d.OnCrash)
	}
}

func TestRenderDomainInstallMediaSecureTPM(t *testing.T) {
	spec := machineSpec(func(s *infrav1.LibvirtMachineSpec) {
		s.BootSource = infrav1.BootSource{Kind: infrav1.BootInstallMedia, Volume: "installer.iso"}
		s.Firmware = banlieuev1.FirmwareEFISecure
		s.TPMEnabled = true
		s.MachineType = "q35"
		s.Disks = append(s.Disks, infrav1.LibvirtDisk{Name: "data", SizeGiB: 5, Bus: infrav1.BusSATA})
		s.Network[0] = infrav1.LibvirtNetworkInterface{Name: "nic0", Source: infrav1.NetworkSource{Kind: infrav1.SourceBridge, Name: "br0"},
			MACAddress: "52:54:00:00:00:01", Model: "e1000"}
	})
	in := domainInputs{owner: testOwner, spec: spec, domainType: "qemu", uuid: "3f2504e0-4f89-11d3-9a0c-0305e82c3301",
		diskPaths: []string{"/p/os.qcow2", "/p/data.qcow2"}, installMedia: "/p/installer.iso", seed: "/p/seed.iso"}
	xml, err := renderDomain(in)
	if err != nil {
		t.Fatal(err)
	}
	d := parseDomain(t, xml)
	if d.Type != "qemu" || d.CPU != nil || d.UUID != in.uuid || d.OS.Type.Machine != "q35" {
		t.Errorf("type %q cpu %+v uuid %q machine %q", d.Type, d.CPU, d.UUID, d.OS.Type.Machine)
	}
	if f := d.OS.FirmwareInfo.Features; len(f) != 1 || f[0].Enabled != "yes" || d.Features.SMM == nil || d.Features.SMM.State != "on" {
		t.Errorf("efi-secure needs secure boot and SMM: %+v %+v", f, d.Features.SMM)
	}
	if bootOrder(d) != "cdrom,hd" {
		t.Errorf("boot order while the installer is attached: %q", bootOrder(d))
	}
	want := []diskView{
		{"disk", "vda", "virtio", "qcow2", "/p/os.qcow2"},
		{"disk", "sda", "sata", "qcow2", "/p/data.qcow2"},
		{"cdrom", "sdb", "sata", "raw", "/p/installer.iso"},
		{"cdrom", "sdc", "scsi", "raw", "/p/seed.iso"},
	}
	if got := disksOf(d); !slices.Equal(got, want) {
		t.Errorf("disks:\n got %+v\nwant %+v", got, want)
	}
	if tpm := d.Devices.TPMs; len(tpm) != 1 || tpm[0].Model != "tpm-crb" || tpm[0].Backend.Emulator.Version != "2.0" {
		t.Errorf("tpm: %+v", tpm)
	}
	n := d.Devices.Interfaces[0]
	if n.Source.Bridge.Bridge != "br0" || n.MAC.Address != "52:54:00:00:00:01" || n.Model.Type != "e1000" {
		t.Errorf("bridge interface: %+v", n)
	}

	// After the eject the installer slot stays, empty, so the seed keeps its target.
	in.installMedia, in.installDetached = "", true
	xml, err = renderDomain(in)
	if err != nil {
		t.Fatal(err)
	}
	d = parseDomain(t, xml)
	if bootOrder(d) != "hd" {
		t.Errorf("boot order after eject: %q", bootOrder(d))
	}
	got := disksOf(d)
	if got[2] != (diskView{"cdrom", "sdb", "sata", "raw", ""}) || got[3].target != "sdc" {
		t.Errorf("after eject: %+v", got)
	}
	eject, err := ejectedInstallerXML(spec)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(eject, "dev=\"sdb\"") || strings.Contains(eject, "<source") {
		t.Errorf("ejected installer device: %s", eject)
	}
}

func TestRenderDomainRefusesBadInput(t *testing.T) {
	tests := []struct {
		name string
		in   domainInputs
		want string
	}{
		{"disk paths short", domainInputs{owner: testOwner, spec: machineSpec(nil), domainType: "qemu"}, "0 disk paths for 1 disks"},
		{"no owner", domainInputs{spec: machineSpec(nil), domainType: "qemu", diskPaths: []string{"/p/os"}}, "no owner UID"},
		{"installer neither attached nor ejected", domainInputs{owner: testOwner, spec: machineSpec(func(s *infrav1.LibvirtMachineSpec) {
			s.BootSource.Kind = infrav1.BootInstallMedia
		}), domainType: "qemu", diskPaths: []string{"/p/os"}}, "without an install ISO"},
		{"control character in a name", domainInputs{owner: testOwner, spec: machineSpec(func(s *infrav1.LibvirtMachineSpec) {
			s.DomainName = "web\x01"
		}), domainType: "qemu", diskPaths: []string{"/p/os"}}, "invalid spec.domainName: contains control character U+0001"},
		{"control character in a network", domainInputs{owner: testOwner, spec: machineSpec(func(s *infrav1.LibvirtMachineSpec) {
			s.Network[0].Source.Name = "net\x1b"
		}), domainType: "qemu", diskPaths: []string{"/p/os"}}, "invalid spec.network[0].source.name"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := renderDomain(tt.in)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("got %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

// TestRenderDomainEscapesMarkup: a pool path or network name full of XML metacharacters
// stays a literal value and never becomes markup.
func TestRenderDomainEscapesMarkup(t *testing.T) {
	evil := `x'/><disk type='file'><source file='/etc/shadow'/></disk><x a="&`
	spec := machineSpec(func(s *infrav1.LibvirtMachineSpec) { s.Network[0].Source.Name = evil })
	xml, err := renderDomain(domainInputs{owner: testOwner, spec: spec, domainType: "qemu", diskPaths: []string{"/p/" + evil}})
	if err != nil {
		t.Fatal(err)
	}
	d := parseDomain(t, xml)
	if len(d.Devices.Disks) != 1 || d.Devices.Disks[0].Source.File.File != "/p/"+evil {
		t.Errorf("disk path not literal: %+v", d.Devices.Disks)
	}
	if d.Devices.Interfaces[0].Source.Network.Network != evil {
		t.Errorf("network name not literal: %q", d.Devices.Interfaces[0].Source.Network.Network)
	}
}

func TestDriveLetters(t *testing.T) {
	for n, want := range map[int]string{0: "a", 1: "b", 25: "z", 26: "aa", 27: "ab", 51: "az", 52: "ba"} {
		if got := driveLetters(n); got != want {
			t.Errorf("driveLetters(%d) = %q, want %q", n, got, want)
		}
	}
}

// The console is always a pty (banlieue console streams it); the host file is kept unless the
// machine says None.
func TestRenderDomainConsoleLog(t *testing.T) {
	for _, tt := range []struct {
		log  banlieuev1.ConsoleLog
		file string
	}{
		{"", "/var/log/libvirt/qemu/banlieue-system-web-01-serial.log"},
		{banlieuev1.ConsoleLogHost, "/var/log/libvirt/qemu/banlieue-system-web-01-serial.log"},
		{banlieuev1.ConsoleLogNone, ""},
	} {
		xml, err := renderDomain(domainInputs{owner: testOwner, domainType: "kvm", diskPaths: []string{"/pool/os.qcow2"},
			spec: machineSpec(func(s *infrav1.LibvirtMachineSpec) { s.ConsoleLog = tt.log })})
		if err != nil {
			t.Fatal(err)
		}
		d := parseDomain(t, xml)
		if len(d.Devices.Serials) != 1 || d.Devices.Serials[0].Source.Pty == nil || len(d.Devices.Consoles) != 1 {
			t.Fatalf("consoleLog %q: serial/console %+v", tt.log, d.Devices)
		}
		file := ""
		if l := d.Devices.Serials[0].Log; l != nil {
			file = l.File
		}
		if file != tt.file {
			t.Errorf("consoleLog %q: log file %q, want %q", tt.log, file, tt.file)
		}
	}
}
