package vsphere

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"banlieue.io/banlieue/internal/provider/vsphere/vcenter"
)

// session adapts a vcenter.Session to Backend: it converts the types and turns vcenter's
// sentinel errors into this package's, keeping vcenter's step in the message.
type session struct{ s *vcenter.Session }

// Dial is the Dialer of a real vCenter: vcenter.Dial with TLS verified against e.CAPEM only.
// The session re-establishes itself on NotAuthenticated; opt tunes its limits and timeouts.
func Dial(opt ...vcenter.Option) Dialer {
	return func(ctx context.Context, e Endpoint) (Backend, error) {
		s, err := vcenter.Dial(ctx, vcenter.Endpoint{URL: e.URL, Username: e.Username, Password: e.Password, CAPEM: e.CAPEM}, opt...)
		if err != nil {
			return nil, err
		}
		return &session{s: s}, nil
	}
}

// mapErr matches vcenter's sentinels to the Backend's, so errors.Is works on either.
func mapErr(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, vcenter.ErrNotOwned):
		return fmt.Errorf("%w: %w", ErrNotOwned, err)
	case errors.Is(err, vcenter.ErrNotFound):
		return fmt.Errorf("%w: %w", ErrNotFound, err)
	}
	return err
}

func machine(m vcenter.Machine) Machine {
	return Machine{Ref: m.Ref, BIOSUUID: m.BIOSUUID, PowerState: m.PowerState, IPs: m.IPs, ToolsRunning: m.ToolsRunning, OwnerUID: m.OwnerUID}
}

func (a *session) FailureDomains(ctx context.Context, q FailureDomainQuery) ([]FailureDomain, error) {
	fds, err := a.s.FailureDomains(ctx, vcenter.FailureDomainQuery{Datastores: q.Datastores, Networks: q.Networks, VTPM: q.VTPM})
	if err != nil {
		return nil, mapErr(err)
	}
	out := make([]FailureDomain, 0, len(fds))
	for _, fd := range fds {
		var space []DatastoreSpace
		for _, d := range fd.DatastoreSpace {
			space = append(space, DatastoreSpace{Name: d.Name, CapacityGiB: d.CapacityGiB, FreeGiB: d.FreeGiB})
		}
		out = append(out, FailureDomain{
			Name: fd.Name, Datacenter: fd.Datacenter, Cluster: fd.Cluster, ResourcePool: fd.ResourcePool,
			Folder: q.Folder, Region: fd.Region, Zone: fd.Zone, Datastores: fd.Datastores, Networks: fd.Networks, VTPM: fd.VTPM,
			CPUs: fd.CPUs, MemoryMiB: fd.MemoryMiB, DatastoreSpace: space,
		})
	}
	return out, nil
}

// templatePath is the template's path below "<datacenter>/vm", as vcenter takes it, from the
// absolute inventory path a VSphereMachine names; a template of another datacenter is refused.
func templatePath(datacenter, template string) (string, error) {
	prefix := "/" + strings.Trim(datacenter, "/") + "/vm/"
	rel, ok := strings.CutPrefix(template, prefix)
	if !ok || rel == "" {
		return "", fmt.Errorf("check template: spec.template %q is not below %s, the failure domain's datacenter", template, prefix)
	}
	return rel, nil
}

func (a *session) Template(ctx context.Context, template string) error {
	dc, _, ok := strings.Cut(strings.TrimPrefix(template, "/"), "/vm/")
	if !ok || dc == "" {
		return fmt.Errorf("check template: %q is not an inventory path /<datacenter>/vm/<folder>/<template>", template)
	}
	rel, err := templatePath(dc, template)
	if err != nil {
		return err
	}
	if err := a.s.Template(ctx, dc, rel); errors.Is(err, vcenter.ErrNotFound) {
		return notFound{err} // vcenter's step and path, without mapErr's prefix
	} else if err != nil {
		return mapErr(err)
	}
	return nil
}

// notFound is vcenter's error, matching ErrNotFound.
type notFound struct{ err error }

func (e notFound) Error() string        { return e.err.Error() }
func (e notFound) Is(target error) bool { return target == ErrNotFound }
func (e notFound) Unwrap() error        { return e.err }

func (a *session) Ensure(ctx context.Context, m MachineSpec) (Machine, error) {
	tpl, err := templatePath(m.Datacenter, m.Template)
	if err != nil {
		return Machine{}, err
	}
	vm, err := a.s.Ensure(ctx, vcenter.MachineSpec{
		Name: m.Name, OwnerUID: m.OwnerUID, OwnerRef: m.OwnerRef,
		Datacenter: m.Datacenter, Folder: m.Folder, ResourcePool: m.ResourcePool, Datastore: m.Datastore, Template: tpl,
		CPUs: m.CPUs, MemoryMiB: m.MemoryMiB, DiskGiB: m.DiskGiB, Networks: m.Networks,
		MetadataB64: m.MetadataB64, UserDataB64: m.UserDataB64, VTPM: m.VTPM,
	})
	return machine(vm), mapErr(err)
}

func (a *session) Get(ctx context.Context, datacenter, folder, name, ownerUID string) (Machine, error) {
	vm, err := a.s.Get(ctx, datacenter, folder, name, ownerUID)
	return machine(vm), mapErr(err)
}

func (a *session) PowerOn(ctx context.Context, ref, ownerUID string) error {
	return mapErr(a.s.PowerOn(ctx, ref, ownerUID))
}

func (a *session) PowerOff(ctx context.Context, ref, ownerUID string, graceful bool, timeout time.Duration) error {
	_, err := a.s.PowerOff(ctx, ref, ownerUID, graceful, timeout)
	return mapErr(err)
}

func (a *session) Delete(ctx context.Context, ref, ownerUID string) error {
	return mapErr(a.s.Delete(ctx, ref, ownerUID))
}

func (a *session) Watch(ctx context.Context, datacenter, folder string, changed func(Machine, bool)) error {
	return mapErr(a.s.Watch(ctx, datacenter, folder, func(u vcenter.MachineUpdate) { changed(machine(u.Machine), u.Deleted) }))
}

func (a *session) Close(ctx context.Context) error { return a.s.Close(ctx) }

// Sessions keeps one Backend per Provider, dialled on first use and again when the Provider's
// endpoint, credentials or CA change (a rotated password is used on the next pass). A session
// vCenter forgot is re-established by vcenter itself; one that cannot be dialled is not kept.
type Sessions struct {
	Dial Dialer
	mu   sync.Mutex
	open map[types.NamespacedName]openSession
}

type openSession struct {
	b       Backend
	version string
}

// Get returns the Provider's session for endpoint e, whose version says which objects it came
// from, dialling within ctx when there is none or the version changed.
func (s *Sessions) Get(ctx context.Context, key types.NamespacedName, e Endpoint, version string) (Backend, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if o, ok := s.open[key]; ok {
		if o.version == version {
			return o.b, nil
		}
		delete(s.open, key)
		go closeQuietly(o.b)
	}
	b, err := s.Dial(ctx, e)
	if err != nil {
		return nil, fmt.Errorf("connecting to vCenter %s: %w", e.URL, err)
	}
	if s.open == nil {
		s.open = map[types.NamespacedName]openSession{}
	}
	s.open[key] = openSession{b: b, version: version}
	return b, nil
}

// Forget logs out the session of a Provider that is gone.
func (s *Sessions) Forget(key types.NamespacedName) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if o, ok := s.open[key]; ok {
		delete(s.open, key)
		go closeQuietly(o.b)
	}
}

// CloseAll logs every session out.
func (s *Sessions) CloseAll() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, o := range s.open {
		closeQuietly(o.b)
		delete(s.open, k)
	}
}

func closeQuietly(b Backend) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = b.Close(ctx)
}
