package libvirt

import (
	"fmt"
	"strings"

	"libvirt.org/go/libvirtxml"

	infrav1 "banlieue.io/banlieue/api/infrastructure/v1alpha1"
)

// Volume formats.
const (
	formatQCOW2 = "qcow2"
	formatRaw   = "raw"
)

// osDiskVolume and friends name a machine's volumes after its domain: one libvirt host has a
// single flat namespace of domains, and volume names inherit the namespace qualification.
func diskVolume(domain, disk string) string { return domain + "-" + disk + ".qcow2" }
func seedVolume(domain string) string       { return domain + "-cidata.iso" }

// machineVolumes are the volumes the machine's spec asks for: its disks, then its seed.
func machineVolumes(s *infrav1.LibvirtMachineSpec) []string {
	names := make([]string, 0, len(s.Disks)+1)
	for _, d := range s.Disks {
		names = append(names, diskVolume(s.DomainName, d.Name))
	}
	return append(names, seedVolume(s.DomainName))
}

// backingFormat is decided by the backing volume's name and never by its contents: a raw image
// whose first bytes look like a qcow2 header would otherwise be read as one, and the backing file
// that header names could be any path the daemon can read.
func backingFormat(volume string) string {
	if strings.HasSuffix(volume, ".qcow2") || strings.HasSuffix(volume, ".qcow") {
		return formatQCOW2
	}
	return formatRaw
}

// volumeSpec describes a volume to create.
type volumeSpec struct {
	name     string
	capacity uint64
	format   string
	// backingPath and backingFormat make the volume a copy-on-write overlay.
	backingPath   string
	backingFormat string
}

// renderVolume builds the volume XML of docs/guides/libvirt-provider.md, "The domain definition" after validating every value in it.
func renderVolume(v volumeSpec) (string, error) {
	if err := checkVolumeName(v.name); err != nil {
		return "", err
	}
	for field, val := range map[string]string{"backing path": v.backingPath, "format": v.format, "backing format": v.backingFormat} {
		if strings.ContainsAny(val, `<>&'"`) {
			return "", fmt.Errorf("invalid volume %s %q: contains XML metacharacters", field, val)
		}
		if err := checkText(map[string]string{"volume " + field: val}); err != nil {
			return "", err
		}
	}
	vol := &libvirtxml.StorageVolume{
		Type:       "file",
		Name:       v.name,
		Capacity:   &libvirtxml.StorageVolumeSize{Unit: "bytes", Value: v.capacity},
		Allocation: &libvirtxml.StorageVolumeSize{Unit: "bytes", Value: 0},
		Target:     &libvirtxml.StorageVolumeTarget{Format: &libvirtxml.StorageVolumeTargetFormat{Type: v.format}},
	}
	if v.backingPath != "" {
		vol.BackingStore = &libvirtxml.StorageVolumeBackingStore{
			Path:   v.backingPath,
			Format: &libvirtxml.StorageVolumeTargetFormat{Type: v.backingFormat},
		}
	}
	return vol.Marshal()
}

// checkVolumeName enforces what a dir pool can hold safely as a file name.
func checkVolumeName(name string) error {
	if len(name) < 1 || len(name) > 200 {
		return fmt.Errorf("invalid volume name %q: must be 1-200 characters", name)
	}
	if name == "." || name == ".." || strings.HasPrefix(name, "../") {
		return fmt.Errorf("invalid volume name %q", name)
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-') {
			return fmt.Errorf("invalid volume name %q: only letters, digits, '.', '_' and '-' are allowed", name)
		}
	}
	return nil
}
