package libvirt

import (
	"bytes"
	"cmp"
	"encoding/xml"
	"errors"
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/types"
	"libvirt.org/go/libvirtxml"

	infrav1 "banlieue.io/banlieue/api/infrastructure/v1alpha1"
)

// OwnerXMLNamespace is the XML namespace of the ownership record banlieue writes into every
// domain it defines (docs/guides/libvirt-provider.md, "Names on the host"). libvirt keeps each
// <metadata> child keyed by its namespace, so no other tool's metadata is touched by ours.
const OwnerXMLNamespace = "https://banlieue.io/xmlns/libvirt/owner/v1"

// maxMetadata bounds how much of a domain's <metadata> is parsed: a definition comes from the
// host, where anyone with write access may have put anything.
const maxMetadata = 64 << 10

// Owner is banlieue's ownership record on a libvirt domain: which LibvirtMachine defined it, by
// UID, so that a machine of the same name created later is not taken for the one that did.
type Owner struct {
	UID       string
	Namespace string
	Name      string
	Provider  string
	// ProviderNamespace is the Provider's namespace when it is not the machine's (a shared
	// Provider); empty otherwise, so the records of machines on their own namespace's Provider
	// are what they always were.
	ProviderNamespace string
}

// ownerOf is the record a machine writes on its domain.
func ownerOf(m *infrav1.LibvirtMachine) Owner {
	o := Owner{UID: string(m.UID), Namespace: m.Namespace, Name: m.Name, Provider: m.Spec.ProviderRef.Name}
	if key := m.ProviderKey(); key.Namespace != m.Namespace {
		o.ProviderNamespace = key.Namespace
	}
	return o
}

// providerKey is the Provider the record names, its namespace defaulted to the machine's.
func (o Owner) providerKey() types.NamespacedName {
	return types.NamespacedName{Namespace: cmp.Or(o.ProviderNamespace, o.Namespace), Name: o.Provider}
}

// ownerElement is the record as XML. encoding/xml escapes the attribute values.
type ownerElement struct {
	XMLName   xml.Name `xml:"banlieue:owner"`
	XMLNS     string   `xml:"xmlns:banlieue,attr"`
	UID       string   `xml:"uid,attr"`
	Namespace string   `xml:"namespace,attr"`
	Name      string   `xml:"name,attr"`
	Provider  string   `xml:"provider,attr"`
	// ProviderNamespace is omitted when empty: a record without it names the machine's own
	// namespace's Provider.
	ProviderNamespace string `xml:"providerNamespace,attr,omitempty"`
}

// metadata renders the record as the content of a domain's <metadata> element.
func (o Owner) metadata() (*libvirtxml.DomainMetadata, error) {
	out, err := xml.Marshal(ownerElement{XMLNS: OwnerXMLNamespace, UID: o.UID, Namespace: o.Namespace, Name: o.Name,
		Provider: o.Provider, ProviderNamespace: o.ProviderNamespace})
	if err != nil {
		return nil, fmt.Errorf("rendering the ownership record: %w", err)
	}
	return &libvirtxml.DomainMetadata{XML: string(out)}, nil
}

// String names the owner for a condition message.
func (o Owner) String() string {
	return fmt.Sprintf("LibvirtMachine %s/%s (uid %s) of Provider %q", o.Namespace, o.Name, o.UID, o.Provider)
}

// DomainOwner reads banlieue's record from a domain definition. ok is false when the domain
// carries none: it was not defined by banlieue.
func DomainOwner(def *libvirtxml.Domain) (o Owner, ok bool) {
	if def == nil || def.Metadata == nil || len(def.Metadata.XML) > maxMetadata {
		return Owner{}, false
	}
	d := xml.NewDecoder(bytes.NewReader([]byte(def.Metadata.XML)))
	for {
		tok, err := d.Token()
		if err != nil {
			// io.EOF, or metadata that is not well-formed: either way no record of ours.
			return Owner{}, false
		}
		se, isStart := tok.(xml.StartElement)
		if !isStart || se.Name.Space != OwnerXMLNamespace || se.Name.Local != "owner" {
			continue
		}
		for _, a := range se.Attr {
			switch a.Name.Local {
			case "uid":
				o.UID = a.Value
			case "namespace":
				o.Namespace = a.Value
			case "name":
				o.Name = a.Value
			case "provider":
				o.Provider = a.Value
			case "providerNamespace":
				o.ProviderNamespace = a.Value
			}
		}
		if o.UID == "" {
			return Owner{}, false
		}
		return o, true
	}
}

// ownedBy reports whether the definition's record names machine m by UID. Namespace and name
// are not enough: a machine deleted and created again under the same name is another machine.
func ownedBy(def *libvirtxml.Domain, m *infrav1.LibvirtMachine) bool {
	o, ok := DomainOwner(def)
	return ok && o.UID == string(m.UID)
}

// planVolumes decides, for the volumes a machine needs, which it must record before creating them
// (missing, in order) and whether one of them is a stranger's: present on the host but not in the
// machine's record. The record is written before a volume is created, so a pass that dies between
// the two leaves a recorded name with no volume, which the next pass creates; a volume present
// and unrecorded was never created by this machine.
func planVolumes(needed []string, exists func(string) bool, recorded []string) (missing []string, stranger string) {
	for _, name := range needed {
		switch {
		case slices.Contains(recorded, name):
		case exists(name):
			return nil, name
		default:
			missing = append(missing, name)
		}
	}
	return missing, ""
}

// ConflictError is a name on the host that a machine needs and may not take: a domain or volume
// that exists without proof that this machine created it. The machine reports it with its own
// reason, and nothing on the host is changed.
type ConflictError struct {
	// Reason is infrav1.ReasonDomainNameConflict or infrav1.ReasonVolumeNameConflict.
	Reason string
	msg    string
}

func (e *ConflictError) Error() string { return e.msg }

// domainConflict says who holds the domain the machine would be.
func domainConflict(def *libvirtxml.Domain) *ConflictError {
	holder := "a domain not created by banlieue"
	if o, ok := DomainOwner(def); ok {
		holder = "the domain of " + o.String()
	}
	return &ConflictError{Reason: infrav1.ReasonDomainNameConflict, msg: fmt.Sprintf(
		"domain %q already exists on the host and is %s; nothing was changed (rename this machine or remove that domain)",
		def.Name, holder)}
}

// volumeConflict names a volume the machine would create but did not.
func volumeConflict(volume, pool string) *ConflictError {
	return &ConflictError{Reason: infrav1.ReasonVolumeNameConflict, msg: fmt.Sprintf(
		"volume %q already exists in pool %q and was not created by this machine; nothing was changed (rename the machine or its disk, or remove that volume)",
		volume, pool)}
}

// conflictReason is the reason of a conflict error, or "" for any other error.
func conflictReason(err error) string {
	var c *ConflictError
	if errors.As(err, &c) {
		return c.Reason
	}
	return ""
}
