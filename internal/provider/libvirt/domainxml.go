package libvirt

import (
	"errors"
	"fmt"

	"libvirt.org/go/libvirtxml"

	infrav1 "banlieue.io/banlieue/api/infrastructure/v1alpha1"
	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
)

// guestAgentChannel is the virtio-serial port qemu-guest-agent listens on.
const guestAgentChannel = "org.qemu.guest_agent.0"

// domainInputs is everything the domain XML is rendered from: the machine's spec plus what the
// host told us (volume paths, the UUID of an existing definition, the virtualisation type).
type domainInputs struct {
	spec *infrav1.LibvirtMachineSpec
	// owner is the ownership record written into the definition's <metadata>.
	owner Owner
	// domainType is kvm or qemu (software emulation).
	domainType string
	// cpuVendor is the host CPU's vendor as libvirt reports it (Intel, AMD, …).
	cpuVendor string
	// uuid is the domain's: the existing domain's, else the one banlieue chose and recorded in
	// spec.providerID (machine_identity.go). A redefine must carry it or libvirt refuses with
	// "already exists with uuid".
	uuid string
	// diskPaths are the host paths of spec.disks, in order.
	diskPaths []string
	// installMedia is the installer ISO's path while it is attached; empty once ejected.
	installMedia string
	// installDetached is true once the installer has been ejected (installMedia machines).
	installDetached bool
	// seed is the NoCloud seed ISO's path; empty until the seed volume exists.
	seed string
	// macs are the interfaces' MAC addresses by position where the spec sets none: those of the
	// existing definition, else the ones derived from the UUID (generatedMACs). A redefine keeps
	// them: a MAC libvirt generated would otherwise change on every pass, and the seed's
	// network-config matches interfaces by MAC.
	macs []string
}

// renderDomain builds the domain definition of docs/guides/libvirt-provider.md, "The domain definition". libvirtxml escapes markup; control
// characters are refused rather than silently replaced, so a definition never differs from the
// spec it came from.
func renderDomain(in domainInputs) (string, error) {
	s := in.spec
	if len(in.diskPaths) != len(s.Disks) {
		return "", fmt.Errorf("invalid domain XML: %d disk paths for %d disks", len(in.diskPaths), len(s.Disks))
	}
	if s.BootSource.Kind == infrav1.BootInstallMedia && in.installMedia == "" && !in.installDetached {
		return "", errors.New("invalid domain XML: installMedia machine without an install ISO")
	}
	if err := checkText(map[string]string{"spec.domainName": s.DomainName, "spec.machineType": s.MachineType,
		"install media path": in.installMedia, "seed path": in.seed}); err != nil {
		return "", err
	}

	if in.owner.UID == "" {
		// A definition without a record could never be proven banlieue's, and so never be
		// changed or deleted again.
		return "", errors.New("invalid domain XML: no owner UID for the ownership record")
	}
	metadata, err := in.owner.metadata()
	if err != nil {
		return "", err
	}
	dom := &libvirtxml.Domain{
		Metadata:      metadata,
		Type:          in.domainType,
		Name:          s.DomainName,
		UUID:          in.uuid,
		Memory:        &libvirtxml.DomainMemory{Value: uint(s.MemoryMiB), Unit: "MiB"},
		CurrentMemory: &libvirtxml.DomainCurrentMemory{Value: uint(s.MemoryMiB), Unit: "MiB"},
		VCPU:          &libvirtxml.DomainVCPU{Placement: "static", Value: uint(s.VCPUs)},
		OS:            renderOS(s, in.installMedia != ""),
		Features:      &libvirtxml.DomainFeatureList{ACPI: &libvirtxml.DomainFeature{}, APIC: &libvirtxml.DomainFeatureAPIC{}},
		OnPoweroff:    "destroy",
		OnReboot:      "restart",
		OnCrash:       "destroy",
		Devices:       &libvirtxml.DomainDeviceList{},
	}
	if s.Firmware == banlieuev1.FirmwareEFISecure {
		// Secure Boot's variable store must be protected from the guest OS: SMM does that.
		dom.Features.SMM = &libvirtxml.DomainFeatureSMM{State: "on"}
	}
	if in.domainType == "kvm" {
		// TCG cannot pass the host CPU through, so emulated domains keep libvirt's default model.
		dom.CPU = &libvirtxml.DomainCPU{Mode: "host-passthrough"}
		if in.cpuVendor == "AMD" {
			// AMD CPUs have no IA32_ARCH_CAPABILITIES; KVM synthesises it, and nested
			// hypervisors commonly refuse to let QEMU set it, so the domain would not start.
			dom.CPU.Features = []libvirtxml.DomainCPUFeature{{Policy: "disable", Name: "arch-capabilities"}}
		}
	}

	dev := dom.Devices
	if dev.Disks, err = renderDisks(s, in); err != nil {
		return "", err
	}
	if dev.Interfaces, err = renderInterfaces(s.Network, in.macs); err != nil {
		return "", err
	}
	if s.TPMEnabled {
		dev.TPMs = []libvirtxml.DomainTPM{{Model: "tpm-crb", Backend: &libvirtxml.DomainTPMBackend{
			Emulator: &libvirtxml.DomainTPMBackendEmulator{Version: "2.0"}}}}
	}
	zero := uint(0)
	// virtio-scsi holds the seed (cdrom) and every disk on bus scsi; without the explicit model
	// libvirt would add a controller of its own choosing (an LSI one, which cloud kernels lack).
	dev.Controllers = []libvirtxml.DomainController{{Type: "virtio-serial", Index: &zero},
		{Type: "scsi", Model: "virtio-scsi", Index: &zero}}
	dev.Channels = []libvirtxml.DomainChannel{{
		Source: &libvirtxml.DomainChardevSource{UNIX: &libvirtxml.DomainChardevSourceUNIX{}},
		Target: &libvirtxml.DomainChannelTarget{VirtIO: &libvirtxml.DomainChannelTargetVirtIO{Name: guestAgentChannel}},
	}}
	// The console is a pty, streamed by `banlieue console`; by default it is also logged on the
	// host: a guest that ignores its seed or never networks says why on its console, and an
	// operator should not need to be attached at boot to see it.
	serial := libvirtxml.DomainSerial{Source: &libvirtxml.DomainChardevSource{Pty: &libvirtxml.DomainChardevSourcePty{}}}
	if s.ConsoleLog != banlieuev1.ConsoleLogNone {
		serial.Log = &libvirtxml.DomainChardevLog{File: serialLogPath(s.DomainName), Append: "on"}
	}
	dev.Serials = []libvirtxml.DomainSerial{serial}
	dev.Consoles = []libvirtxml.DomainConsole{{Source: &libvirtxml.DomainChardevSource{Pty: &libvirtxml.DomainChardevSourcePty{}}}}
	dev.MemBalloon = &libvirtxml.DomainMemBalloon{Model: "virtio"}
	return dom.Marshal()
}

// serialLogPath is where libvirt's virtlogd writes the domain's console, in the directory where
// libvirt keeps each domain's QEMU log.
func serialLogPath(domain string) string { return "/var/log/libvirt/qemu/" + domain + "-serial.log" }

func renderOS(s *infrav1.LibvirtMachineSpec, installAttached bool) *libvirtxml.DomainOS {
	os := &libvirtxml.DomainOS{Type: &libvirtxml.DomainOSType{Arch: "x86_64", Machine: s.MachineType, Type: "hvm"}}
	switch s.Firmware {
	case banlieuev1.FirmwareEFI, banlieuev1.FirmwareEFISecure:
		// libvirt picks the loader and varstore template from its firmware descriptors and makes
		// a varstore per domain; there is no OVMF path to hard-code.
		os.Firmware = "efi"
		secure := "no"
		if s.Firmware == banlieuev1.FirmwareEFISecure {
			secure = "yes"
		}
		os.FirmwareInfo = &libvirtxml.DomainOSFirmwareInfo{Features: []libvirtxml.DomainOSFirmwareFeature{
			{Enabled: secure, Name: "secure-boot"},
		}}
	}
	if installAttached {
		os.BootDevices = append(os.BootDevices, libvirtxml.DomainBootDevice{Dev: "cdrom"})
	}
	os.BootDevices = append(os.BootDevices, libvirtxml.DomainBootDevice{Dev: "hd"})
	return os
}

// renderDisks lays out the machine's disks, then its CD-ROMs: the installer slot (installMedia
// machines keep it, empty once ejected, so the seed's target never moves across redefines), then
// the seed.
func renderDisks(s *infrav1.LibvirtMachineSpec, in domainInputs) ([]libvirtxml.DomainDisk, error) {
	var disks []libvirtxml.DomainDisk
	vd, sd := 0, 0
	for i, d := range s.Disks {
		if err := checkText(map[string]string{fmt.Sprintf("spec.disks[%d] path", i): in.diskPaths[i]}); err != nil {
			return nil, err
		}
		bus := string(d.Bus)
		if bus == "" {
			bus = string(infrav1.BusVirtio)
		}
		var dev string
		if bus == string(infrav1.BusVirtio) {
			dev, vd = "vd"+driveLetters(vd), vd+1
		} else {
			dev, sd = "sd"+driveLetters(sd), sd+1
		}
		disks = append(disks, libvirtxml.DomainDisk{
			Device: "disk",
			Driver: &libvirtxml.DomainDiskDriver{Name: "qemu", Type: "qcow2"},
			Source: &libvirtxml.DomainDiskSource{File: &libvirtxml.DomainDiskSourceFile{File: in.diskPaths[i]}},
			Target: &libvirtxml.DomainDiskTarget{Dev: dev, Bus: bus},
		})
	}
	// CD-ROMs share the sd namespace with scsi and sata disks, so their letters follow those.
	if s.BootSource.Kind == infrav1.BootInstallMedia {
		disks = append(disks, cdrom("sd"+driveLetters(sd), "sata", in.installMedia))
		sd++
	}
	if in.seed != "" {
		disks = append(disks, cdrom("sd"+driveLetters(sd), "scsi", in.seed))
	}
	return disks, nil
}

// cdrom is a read-only CD-ROM on bus; an empty path is an empty tray. Install media is SATA,
// which every firmware and installer reads. The NoCloud seed is on the virtio-scsi controller:
// cloud kernels (Debian's linux-image-cloud-amd64, so its genericcloud images) have no AHCI
// driver and would never see a SATA seed, while every Linux cloud image carries virtio-scsi.
func cdrom(target, bus, path string) libvirtxml.DomainDisk {
	d := libvirtxml.DomainDisk{
		Device:   "cdrom",
		Driver:   &libvirtxml.DomainDiskDriver{Name: "qemu", Type: "raw"},
		Target:   &libvirtxml.DomainDiskTarget{Dev: target, Bus: bus},
		ReadOnly: &libvirtxml.DomainDiskReadOnly{},
	}
	if path != "" {
		d.Source = &libvirtxml.DomainDiskSource{File: &libvirtxml.DomainDiskSourceFile{File: path}}
	}
	return d
}

// ejectedInstallerXML is the installer slot with no medium, for DOMAIN_UPDATE_DEVICE_FLAGS;
// libvirt matches the device by its target.
func ejectedInstallerXML(s *infrav1.LibvirtMachineSpec) (string, error) {
	sd := 0
	for _, d := range s.Disks {
		if d.Bus == infrav1.BusSCSI || d.Bus == infrav1.BusSATA {
			sd++
		}
	}
	d := cdrom("sd"+driveLetters(sd), "sata", "")
	return d.Marshal()
}

func renderInterfaces(nics []infrav1.LibvirtNetworkInterface, assigned []string) ([]libvirtxml.DomainInterface, error) {
	var out []libvirtxml.DomainInterface
	for i, n := range nics {
		field := fmt.Sprintf("spec.network[%d]", i)
		if err := checkText(map[string]string{field + ".source.name": n.Source.Name, field + ".macAddress": n.MACAddress,
			field + ".model": n.Model}); err != nil {
			return nil, err
		}
		iface := libvirtxml.DomainInterface{Source: &libvirtxml.DomainInterfaceSource{}}
		if n.Source.Kind == infrav1.SourceBridge {
			iface.Source.Bridge = &libvirtxml.DomainInterfaceSourceBridge{Bridge: n.Source.Name}
		} else {
			iface.Source.Network = &libvirtxml.DomainInterfaceSourceNetwork{Network: n.Source.Name}
		}
		mac := n.MACAddress
		if mac == "" && i < len(assigned) {
			mac = assigned[i]
		}
		if err := checkText(map[string]string{field + " assigned MAC": mac}); err != nil {
			return nil, err
		}
		if mac != "" {
			iface.MAC = &libvirtxml.DomainInterfaceMAC{Address: mac}
		}
		model := n.Model
		if model == "" {
			model = "virtio"
		}
		iface.Model = &libvirtxml.DomainInterfaceModel{Type: model}
		out = append(out, iface)
	}
	return out, nil
}

// driveLetters is the suffix of the n-th drive (0 → a, 25 → z, 26 → aa), as Linux names them.
func driveLetters(n int) string {
	s := ""
	for n >= 0 {
		s = string(rune('a'+n%26)) + s
		n = n/26 - 1
	}
	return s
}

// checkText refuses C0 control characters other than tab, LF and CR: XML 1.0 cannot carry
// them, and replacing them would define something other than what the spec says.
func checkText(fields map[string]string) error {
	for field, v := range fields {
		for _, r := range v {
			if r < 0x20 && r != '\t' && r != '\n' && r != '\r' {
				return fmt.Errorf("invalid %s: contains control character %U", field, r)
			}
		}
	}
	return nil
}
