package libvirt

import (
	"context"
	"fmt"
	"slices"

	infrav1 "banlieue.io/banlieue/api/infrastructure/v1alpha1"
	"banlieue.io/banlieue/pkg/libvirt"
)

// teardown removes the machine from the host in a fixed order: destroy, undefine, check, delete
// volumes. Every failing step is returned with its name; none is swallowed. Only what the machine
// can prove it created is touched: its domain when the ownership record names it, and the
// volumes in status.volumes — every one of them, disks dropped from the spec included. A domain
// of its name that is someone else's is left alone, and the boot volume is never deleted: it
// belongs to the VMImage and other machines use it. starts remembers a domain whose start
// libvirtd lost and that it refuses to stop (startwatch.go).
func teardown(ctx context.Context, c *libvirt.Client, m *infrav1.LibvirtMachine, starts *startWatch) error {
	s := &m.Spec
	// attached are the disks of a domain of the machine's name that is someone else's. A name
	// in the record proves the machine created a volume of that name once, not that the volume
	// there now is the one: what another machine's domain uses is never deleted.
	var attached []string
	dom, err := c.DomainLookupByName(ctx, s.DomainName)
	switch {
	case err == nil:
		def, err := readDefinition(ctx, c, dom)
		if err != nil {
			return fmt.Errorf("teardown: %w", err)
		}
		if !ownedBy(def, m) {
			attached = diskFiles(def)
		} else if err := removeDomain(ctx, c, m, dom, starts); err != nil {
			return err
		}
	case !libvirt.IsNotFound(err):
		return fmt.Errorf("teardown: looking domain %q up: %w", s.DomainName, err)
	}
	if len(m.Status.Volumes) == 0 {
		return nil
	}

	pool, err := c.StoragePoolLookupByName(ctx, s.Pool)
	if libvirt.IsNotFound(err) {
		return nil
	} else if err != nil {
		return fmt.Errorf("teardown: looking pool %q up: %w", s.Pool, err)
	}
	for _, name := range m.Status.Volumes {
		vol, err := c.StorageVolLookupByName(ctx, pool, name)
		if libvirt.IsNotFound(err) {
			continue
		} else if err != nil {
			return fmt.Errorf("teardown: looking volume %q up: %w", name, err)
		}
		if slices.Contains(attached, vol.Key) {
			continue
		}
		if err := c.StorageVolDelete(ctx, vol); err != nil && !libvirt.IsNotFound(err) {
			return fmt.Errorf("teardown: deleting volume %q: %w", name, err)
		}
	}
	return nil
}

// removeDomain destroys and undefines the domain with the flags its daemon accepts, and checks
// that it is gone. The calls name the domain by the UUID that was looked up, so a domain defined
// under the same name in between is not the one removed.
func removeDomain(ctx context.Context, c *libvirt.Client, m *infrav1.LibvirtMachine, dom libvirt.Domain, starts *startWatch) error {
	state, reason, err := c.DomainState(ctx, dom)
	if err != nil {
		return fmt.Errorf("teardown: reading the state of domain %q: %w", dom.Name, err)
	}
	if startingUp(state, reason) {
		// A start libvirtd lost and refused to stop before: asking again only holds one of the
		// host's domain slots for libvirtd's 30 s wait. Teardown resumes once the host is repaired.
		if lost := starts.lost(m.UID); lost != nil {
			return lost
		}
	}
	if isRunning(state) {
		if err := c.DomainDestroy(libvirt.WithCallTimeout(ctx, destroyTimeout), dom); err != nil && !libvirt.IsNotFound(err) {
			if lost := lostStart(dom.Name, state, reason, err); lost != nil {
				starts.refused(m.UID, lost)
				return lost
			}
			return fmt.Errorf("teardown: destroying domain %q: %w", dom.Name, err)
		}
	}
	version, err := c.LibVersion(ctx)
	if err != nil {
		return fmt.Errorf("teardown: reading the libvirt version: %w", err)
	}
	if err := c.DomainUndefine(ctx, dom, undefineFlagsFor(version)); err != nil && !libvirt.IsNotFound(err) {
		return fmt.Errorf("teardown: undefining domain %q: %w", dom.Name, err)
	}
	// A teardown that reports success while the domain is still defined would hand a stale
	// definition to the next machine of the same name, so it is checked, not trusted.
	if again, err := c.DomainLookupByName(ctx, dom.Name); err == nil && again.UUID == dom.UUID {
		return fmt.Errorf("teardown: domain %q is still defined after undefine", dom.Name)
	} else if err != nil && !libvirt.IsNotFound(err) {
		return fmt.Errorf("teardown: looking domain %q up again: %w", dom.Name, err)
	}
	return nil
}
