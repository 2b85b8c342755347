package vcenter

import (
	"context"
	"fmt"
	"time"

	"github.com/vmware/govmomi/property"
	"github.com/vmware/govmomi/view"
	"github.com/vmware/govmomi/vim25/methods"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"
)

// MachineUpdate is the state of one VM in a watched folder after a change. Deleted is set once
// when the VM is gone (destroyed, unregistered or moved out of the folder).
type MachineUpdate struct {
	Machine
	Deleted bool
}

// watchWait is how long one WaitForUpdatesEx may hold the connection (vCenter answers earlier
// when something changed).
const watchWait = 20 * time.Second

var watchProps = []string{"name", "runtime.powerState", "guest.ipAddress", "guest.net", "guest.toolsRunningStatus", "config.extraConfig", "config.uuid"}

// Watch reports every VM directly in the folder, first as it is and then at every change of power
// state, guest addresses or Tools status, and its deletion, until ctx ends. It uses a container
// view of the folder and its own PropertyCollector with WaitForUpdatesEx. When the collector is
// lost (a re-established session does not carry it over) the watch is set up again and VMs that
// vanished meanwhile are reported deleted. fn is called from this goroutine only.
func (s *Session) Watch(ctx context.Context, datacenter, folder string, fn func(MachineUpdate)) error {
	p, err := under(datacenter, "vm", "folder", folder)
	if err != nil {
		return stepErr("resolve folder", err)
	}
	ref, err := s.lookup(ctx, p, "Folder")
	if err != nil {
		return stepErr("resolve folder", err)
	}
	known := map[string]*mo.VirtualMachine{}
	failures := 0
	for {
		progressed, err := s.watchOnce(ctx, ref, known, fn)
		if ctx.Err() != nil {
			return nil
		}
		if progressed {
			failures = 0 // only failures in a row give up
		}
		failures++
		if failures > 5 {
			return stepErr("watch "+p, err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(time.Duration(failures) * time.Second):
		}
	}
}

// watchOnce sets up view, collector and filter and waits for updates until an error; progressed
// says whether any update arrived.
func (s *Session) watchOnce(ctx context.Context, folder types.ManagedObjectReference, known map[string]*mo.VirtualMachine, fn func(MachineUpdate)) (progressed bool, err error) {
	cctx, cancel := s.call(ctx)
	v, err := view.NewManager(s.vc).CreateContainerView(cctx, folder, []string{"VirtualMachine"}, false)
	if err != nil {
		cancel()
		return false, stepErr("create container view", err)
	}
	pc, err := property.DefaultCollector(s.vc).Create(cctx)
	if err != nil {
		cancel()
		return false, stepErr("create property collector", err)
	}
	defer func() {
		dctx, dcancel := s.call(context.WithoutCancel(ctx))
		defer dcancel()
		_ = pc.Destroy(dctx)
		_ = v.Destroy(dctx)
	}()
	_, err = pc.CreateFilter(cctx, types.CreateFilter{
		Spec: types.PropertyFilterSpec{
			ObjectSet: []types.ObjectSpec{{
				Obj:       v.Reference(),
				Skip:      types.NewBool(true),
				SelectSet: []types.BaseSelectionSpec{&types.TraversalSpec{Type: "ContainerView", Path: "view"}},
			}},
			PropSet: []types.PropertySpec{{Type: "VirtualMachine", PathSet: watchProps}},
		},
	})
	cancel()
	if err != nil {
		return false, stepErr("create property filter", err)
	}

	version := ""
	wait := int32(watchWait / time.Second)
	for {
		wctx, wcancel := context.WithTimeout(ctx, watchWait+s.opts.callTimeout)
		res, err := methods.WaitForUpdatesEx(wctx, s.vc, &types.WaitForUpdatesEx{
			This: pc.Reference(), Version: version, Options: &types.WaitOptions{MaxWaitSeconds: &wait},
		})
		wcancel()
		if err != nil {
			if ctx.Err() != nil {
				return progressed, ctx.Err()
			}
			return progressed, stepErr("wait for updates", err)
		}
		set := res.Returnval
		if set == nil {
			continue
		}
		progressed = true
		first := version == ""
		version = set.Version
		seen := map[string]bool{}
		for _, f := range set.FilterSet {
			for _, ou := range f.ObjectSet {
				id := ou.Obj.Value
				seen[id] = true
				switch ou.Kind {
				case types.ObjectUpdateKindLeave:
					vm := known[id]
					delete(known, id)
					fn(MachineUpdate{Machine: gone(ou.Obj, vm), Deleted: true})
				default:
					vm := known[id]
					if vm == nil || ou.Kind == types.ObjectUpdateKindEnter {
						vm = &mo.VirtualMachine{}
						vm.Self = ou.Obj
						known[id] = vm
					}
					if err := applyChanges(vm, ou.ChangeSet); err != nil {
						return progressed, stepErr("apply update", err)
					}
					fn(MachineUpdate{Machine: toMachine(vm)})
				}
			}
		}
		if first {
			// A fresh filter reports what exists; whatever we knew that is not there went away
			// while we were not watching.
			for _, id := range sortedKeys(known) {
				if !seen[id] {
					vm := known[id]
					delete(known, id)
					fn(MachineUpdate{Machine: gone(vm.Self, vm), Deleted: true})
				}
			}
		}
	}
}

func gone(ref types.ManagedObjectReference, vm *mo.VirtualMachine) Machine {
	if vm == nil {
		return Machine{Ref: ref.String()}
	}
	m := toMachine(vm)
	m.PowerState, m.IPs, m.ToolsRunning = "", nil, false
	return m
}

// applyChanges applies assignments of whole properties to the VM, as property.Wait does; keyed
// changes (one extraConfig entry) are notifications only. A path the types do not know is an
// error, not a panic.
func applyChanges(vm *mo.VirtualMachine, changes []types.PropertyChange) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("property change: %v", r)
		}
	}()
	for _, c := range changes {
		if c.Op != types.PropertyChangeOpAssign || c.Val == nil {
			continue
		}
		mo.ApplyPropertyChange(vm, []types.PropertyChange{c})
	}
	return nil
}
