package vcenter

import (
	"context"
	"fmt"
	"strings"

	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"
)

// Names a user gives (datacenter, folder, pool, datastore, template, network, VM) are inventory
// paths under the datacenter and are looked up with SearchIndex.FindByInventoryPath only: no
// glob, and never as a managed-object reference (govmomi's finder would take "vm-42" or
// "VirtualMachine:vm-42" as one).

// cleanPath checks a user-supplied relative inventory path and returns its segments.
func cleanPath(what, p string) ([]string, error) {
	p = strings.Trim(p, "/")
	if p == "" {
		return nil, nil
	}
	segs := strings.Split(p, "/")
	for _, s := range segs {
		if s == "" || s == "." || s == ".." {
			return nil, fmt.Errorf("%s %q: empty, . or .. path segment", what, p)
		}
	}
	return segs, nil
}

// checkName refuses a machine name that cannot be one inventory path segment.
func checkName(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("machine name is empty")
	case len(name) > 80:
		return fmt.Errorf("machine name %q is longer than vCenter's 80 characters", name)
	case strings.ContainsAny(name, "/\\%"):
		return fmt.Errorf("machine name %q contains /, \\ or %%", name)
	}
	return nil
}

// datacenterPath is the absolute inventory path of a datacenter given as a path.
func datacenterPath(dc string) (string, error) {
	segs, err := cleanPath("datacenter", dc)
	if err != nil {
		return "", err
	}
	if len(segs) == 0 {
		return "", fmt.Errorf("datacenter is empty")
	}
	return "/" + strings.Join(segs, "/"), nil
}

// under is the absolute path of rel below the datacenter's folder kind ("vm", "host",
// "datastore", "network").
func under(dc, kind, what, rel string) (string, error) {
	base, err := datacenterPath(dc)
	if err != nil {
		return "", err
	}
	segs, err := cleanPath(what, rel)
	if err != nil {
		return "", err
	}
	return strings.Join(append([]string{base, kind}, segs...), "/"), nil
}

// lookup finds an object by absolute inventory path and checks its type.
func (s *Session) lookup(ctx context.Context, path string, kinds ...string) (types.ManagedObjectReference, error) {
	cctx, cancel := s.call(ctx)
	defer cancel()
	ref, err := object.NewSearchIndex(s.vc).FindByInventoryPath(cctx, path)
	if err != nil {
		return types.ManagedObjectReference{}, err
	}
	if ref == nil {
		return types.ManagedObjectReference{}, fmt.Errorf("%s: %w", path, ErrNotFound)
	}
	for _, k := range kinds {
		if ref.Reference().Type == k {
			return ref.Reference(), nil
		}
	}
	return types.ManagedObjectReference{}, fmt.Errorf("%s is a %s, not a %s", path, ref.Reference().Type, strings.Join(kinds, " or "))
}

// Template checks that rel, below the datacenter's VM folder, is a virtual machine marked as a
// template: what a clone of it needs before any machine asks for one. Nothing there, or a
// virtual machine not marked as a template, is ErrNotFound.
func (s *Session) Template(ctx context.Context, datacenter, rel string) error {
	path, err := under(datacenter, "vm", "template", rel)
	if err != nil {
		return stepErr("resolve template", err)
	}
	ref, err := s.lookup(ctx, path, "VirtualMachine")
	if err != nil {
		return stepErr("resolve template", err)
	}
	var vm mo.VirtualMachine
	if err := s.read(ctx, ref, []string{"config.template"}, &vm); err != nil {
		return stepErr("read template", err)
	}
	if vm.Config == nil || !vm.Config.Template {
		return stepErr("check template", fmt.Errorf("%s is a virtual machine, not a template: %w", path, ErrNotFound))
	}
	return nil
}
