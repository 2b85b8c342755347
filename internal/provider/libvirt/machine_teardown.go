package libvirt

import (
	"context"
	"fmt"

	infrav1 "banlieue.io/banlieue/api/infrastructure/v1alpha1"
	"banlieue.io/banlieue/pkg/libvirt"
)

// undefineFlags are always passed: a UEFI domain cannot be undefined without NVRAM, and without
// TPM a deleted VM would leave its swtpm state — the very secret the vTPM isolates — behind.
const undefineFlags = libvirt.UndefineManagedSave | libvirt.UndefineNVRAM | libvirt.UndefineTPM

// teardown removes the machine from the host in a fixed order: destroy, undefine, check, delete
// volumes. Every failing step is returned with its name; none is swallowed. The boot volume is
// never deleted: it belongs to the VMImage and other machines use it.
func teardown(ctx context.Context, c *libvirt.Client, m *infrav1.LibvirtMachine) error {
	s := &m.Spec
	dom, err := c.DomainLookupByName(ctx, s.DomainName)
	switch {
	case err == nil:
		state, _, err := c.DomainState(ctx, dom)
		if err != nil {
			return fmt.Errorf("teardown: reading the state of domain %q: %w", s.DomainName, err)
		}
		if isRunning(state) {
			if err := c.DomainDestroy(ctx, dom); err != nil && !libvirt.IsNotFound(err) {
				return fmt.Errorf("teardown: destroying domain %q: %w", s.DomainName, err)
			}
		}
		if err := c.DomainUndefine(ctx, dom, undefineFlags); err != nil && !libvirt.IsNotFound(err) {
			return fmt.Errorf("teardown: undefining domain %q: %w", s.DomainName, err)
		}
		// A teardown that reports success while the domain is still defined would hand a stale
		// definition to the next machine of the same name, so it is checked, not trusted.
		if _, err := c.DomainLookupByName(ctx, s.DomainName); err == nil {
			return fmt.Errorf("teardown: domain %q is still defined after undefine", s.DomainName)
		} else if !libvirt.IsNotFound(err) {
			return fmt.Errorf("teardown: looking domain %q up again: %w", s.DomainName, err)
		}
	case !libvirt.IsNotFound(err):
		return fmt.Errorf("teardown: looking domain %q up: %w", s.DomainName, err)
	}

	pool, err := c.StoragePoolLookupByName(ctx, s.Pool)
	if libvirt.IsNotFound(err) {
		return nil
	} else if err != nil {
		return fmt.Errorf("teardown: looking pool %q up: %w", s.Pool, err)
	}
	names := []string{seedVolume(s.DomainName)}
	for _, d := range s.Disks {
		names = append(names, diskVolume(s.DomainName, d.Name))
	}
	for _, name := range names {
		vol, err := c.StorageVolLookupByName(ctx, pool, name)
		if libvirt.IsNotFound(err) {
			continue
		} else if err != nil {
			return fmt.Errorf("teardown: looking volume %q up: %w", name, err)
		}
		if err := c.StorageVolDelete(ctx, vol); err != nil && !libvirt.IsNotFound(err) {
			return fmt.Errorf("teardown: deleting volume %q: %w", name, err)
		}
	}
	return nil
}
