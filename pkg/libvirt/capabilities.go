package libvirt

import (
	"encoding/xml"
	"fmt"
)

// capabilities is the part of the host capabilities XML that says which virtualisation
// types each guest architecture supports.
type capabilities struct {
	Guests []struct {
		OSType string `xml:"os_type"`
		Arch   struct {
			Name    string `xml:"name,attr"`
			Domains []struct {
				Type string `xml:"type,attr"`
			} `xml:"domain"`
		} `xml:"arch"`
	} `xml:"guest"`
}

// DomainType returns "kvm" when capsXML (from Capabilities) offers hardware virtualisation
// for hvm guests of arch, else "qemu" (software emulation) when it offers that. It fails when
// the host cannot run arch guests at all.
func DomainType(capsXML, arch string) (string, error) {
	var caps capabilities
	if err := xml.Unmarshal([]byte(capsXML), &caps); err != nil {
		return "", fmt.Errorf("libvirt: parsing capabilities: %w", err)
	}
	qemu := false
	for _, g := range caps.Guests {
		if g.OSType != "hvm" || g.Arch.Name != arch {
			continue
		}
		for _, d := range g.Arch.Domains {
			switch d.Type {
			case "kvm":
				return "kvm", nil
			case "qemu":
				qemu = true
			}
		}
	}
	if qemu {
		return "qemu", nil
	}
	return "", fmt.Errorf("libvirt: host offers no %s hvm guests", arch)
}
