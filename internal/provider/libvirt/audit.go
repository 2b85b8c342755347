package libvirt

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"libvirt.org/go/libvirtxml"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "banlieue.io/banlieue/api/infrastructure/v1alpha1"
	"banlieue.io/banlieue/pkg/libvirt"
)

// Orphan is a domain that carries banlieue's ownership record while the LibvirtMachine it names
// no longer exists: left behind when a machine's finalizer was removed by hand, or its namespace
// force-deleted. No machine will ever tear it down, and nothing in banlieue deletes it unasked.
type Orphan struct {
	Domain string
	UUID   string
	Owner  Owner
	// Why says what became of the owner.
	Why string
	// Files are the host paths of the disks the definition attaches: the volumes that went
	// unreclaimed with it.
	Files []string
}

// orphaned decides whether a recorded owner still exists: m is the LibvirtMachine of the record's
// namespace and name, nil when there is none. A machine of that name with another UID was
// created after the owner went away and owns nothing of the old one's.
func orphaned(o Owner, m *infrav1.LibvirtMachine) (bool, string) {
	switch {
	case m == nil:
		return true, fmt.Sprintf("LibvirtMachine %s/%s does not exist", o.Namespace, o.Name)
	case string(m.UID) != o.UID:
		return true, fmt.Sprintf("LibvirtMachine %s/%s is another machine now (uid %s)", o.Namespace, o.Name, m.UID)
	}
	return false, ""
}

// Audit lists the orphaned domains of Provider provider (namespace/name) on its host (see
// Orphan), by name. It only reads. Domains without banlieue's record are not banlieue's to
// report; domains recorded for another Provider sharing the host (another namespace's, or
// another cluster's) are that Provider's audit, and those of machines in the namespaces a
// shared Provider admits are its own; live machines' domains are in order.
func Audit(ctx context.Context, c *libvirt.Client, kube client.Reader, provider types.NamespacedName) ([]Orphan, error) {
	doms, err := c.ListAllDomains(ctx)
	if err != nil {
		return nil, fmt.Errorf("audit: listing domains: %w", err)
	}
	var out []Orphan
	for _, dom := range doms {
		def, err := readDefinition(ctx, c, dom)
		if libvirt.IsNotFound(err) {
			continue // undefined since it was listed
		} else if err != nil {
			return nil, fmt.Errorf("audit: %w", err)
		}
		o, ok := DomainOwner(def)
		if !ok || o.providerKey() != provider {
			continue
		}
		var m infrav1.LibvirtMachine
		var found *infrav1.LibvirtMachine
		err = kube.Get(ctx, types.NamespacedName{Namespace: o.Namespace, Name: o.Name}, &m)
		switch {
		case err == nil:
			found = &m
		case !apierrors.IsNotFound(err):
			return nil, fmt.Errorf("audit: reading LibvirtMachine %s/%s: %w", o.Namespace, o.Name, err)
		}
		if gone, why := orphaned(o, found); gone {
			out = append(out, Orphan{Domain: dom.Name, UUID: dom.UUID.String(), Owner: o, Why: why, Files: diskFiles(def)})
		}
	}
	slices.SortFunc(out, func(a, b Orphan) int { return cmp.Compare(a.Domain, b.Domain) })
	return out, nil
}

// diskFiles lists the file sources of the definition's disks and CD-ROMs.
func diskFiles(def *libvirtxml.Domain) []string {
	var files []string
	if def.Devices == nil {
		return nil
	}
	for _, d := range def.Devices.Disks {
		if d.Source != nil && d.Source.File != nil && d.Source.File.File != "" {
			files = append(files, d.Source.File.File)
		}
	}
	return files
}
