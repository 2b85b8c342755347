package controller

import (
	"slices"
	"sync"

	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
)

// assumedPlacements are the placements this process decided and has not yet seen in its cache,
// as kube-scheduler assumes a pod bound until its informer shows the binding (ADR-0132). The
// scheduler reads the other placements of a namespace from the cache, which lags behind the
// writes: without them, two VMs decided at once by two workers, or one decided just after the
// other's write, could both take the one failure domain a required anti-affinity rule left
// them. Decisions in one namespace are made one at a time, under that namespace's lock, so each
// sees every placement decided before it; the writes that follow run in parallel.
type assumedPlacements struct {
	// deciding is held around each decision, whatever its namespace: a shared Provider's
	// capacity is taken by the VMs of several namespaces, and two decisions at once could each
	// see the room only one VM has. A decision is a pure function over lists already read, so
	// taking them one at a time costs little.
	deciding   sync.Mutex
	mu         sync.Mutex // guards namespaces
	namespaces map[string]*namespacePlacements
}

// namespacePlacements are one namespace's assumed placements, by VM name.
type namespacePlacements struct {
	mu     sync.Mutex // held around a decision: read, schedule, assume
	byName map[string]assumedPlacement
	seq    uint64 // numbers the assumptions, so an undo never drops a newer one
}

type assumedPlacement struct {
	placement banlieuev1.ScheduledPlacement
	seq       uint64
}

// assumption is one pass's assumed placement; nil when the pass assumed nothing.
type assumption struct {
	ns        *namespacePlacements
	name      string
	placement banlieuev1.ScheduledPlacement
	seq       uint64
	prev      *assumedPlacement
}

func newAssumedPlacements() *assumedPlacements {
	return &assumedPlacements{namespaces: map[string]*namespacePlacements{}}
}

func (a *assumedPlacements) namespace(ns string) *namespacePlacements {
	a.mu.Lock()
	defer a.mu.Unlock()
	np, ok := a.namespaces[ns]
	if !ok {
		np = &namespacePlacements{byName: map[string]assumedPlacement{}}
		a.namespaces[ns] = np
	}
	return np
}

// decide runs place, the decision for vm, under its namespace's lock, on the namespace's VMs as
// the cache shows them (cached) plus the placements still assumed, and on the placed VMs of
// other namespaces (elsewhere, from the cache) plus theirs. A decision that would change
// recorded, vm's placement in its status, is assumed until the cache shows it; the caller
// settles the returned assumption once it knows whether its pass wrote that placement.
func (a *assumedPlacements) decide(vm *banlieuev1.VirtualMachine, recorded *banlieuev1.ScheduledPlacement, cached, elsewhere []banlieuev1.VirtualMachine,
	place func(siblings, elsewhere []banlieuev1.VirtualMachine) (decision, error)) (decision, *assumption, error) {
	a.deciding.Lock()
	defer a.deciding.Unlock()
	elsewhere = a.assumedElsewhere(vm.Namespace, elsewhere)
	np := a.namespace(vm.Namespace)
	np.mu.Lock()
	defer np.mu.Unlock()
	current := make(map[string]banlieuev1.ScheduledPlacement, len(np.byName))
	for name, e := range np.byName {
		current[name] = e.placement
	}
	view, done := withAssumed(cached, current)
	for _, name := range done {
		delete(np.byName, name)
	}
	d, err := place(view, elsewhere)
	if err != nil {
		return d, nil, err
	}
	next := d.placement()
	if recorded != nil && placementDrift(recorded, next) == "" {
		return d, nil, nil // nothing new to write, nothing to assume
	}
	np.seq++
	as := &assumption{ns: np, name: vm.Name, placement: next, seq: np.seq}
	if prev, ok := np.byName[vm.Name]; ok {
		as.prev = &prev
	}
	np.byName[vm.Name] = assumedPlacement{placement: next, seq: np.seq}
	return d, as, nil
}

// assumedElsewhere is cached, the placed VMs of namespaces other than ns, plus a VM holding
// each placement those namespaces have assumed and cached does not show yet. It runs under
// a.deciding, so no other decision holds a namespace's lock meanwhile.
func (a *assumedPlacements) assumedElsewhere(ns string, cached []banlieuev1.VirtualMachine) []banlieuev1.VirtualMachine {
	a.mu.Lock()
	others := make(map[string]*namespacePlacements, len(a.namespaces))
	for name, np := range a.namespaces {
		if name != ns {
			others[name] = np
		}
	}
	a.mu.Unlock()
	shown := make(map[[2]string]*banlieuev1.ScheduledPlacement, len(cached))
	for i := range cached {
		shown[[2]string{cached[i].Namespace, cached[i].Name}] = cached[i].Status.Scheduled
	}
	out := cached
	for name, np := range others {
		np.mu.Lock()
		for vmName, e := range np.byName {
			if s := shown[[2]string{name, vmName}]; s != nil && placementDrift(s, e.placement) == "" {
				continue
			}
			held := banlieuev1.VirtualMachine{}
			held.Namespace, held.Name = name, vmName
			p := e.placement
			held.Status.Scheduled = &p
			out = append(slices.Clip(out), held)
		}
		np.mu.Unlock()
	}
	return out
}

// settle keeps the assumption when written, the placement its pass wrote (nil: it wrote none),
// is the one assumed; otherwise the assumption is dropped and the one it replaced, if any, is
// back. An assumption the cache has confirmed meanwhile is already gone.
func (as *assumption) settle(written *banlieuev1.ScheduledPlacement) {
	if as == nil || (written != nil && placementDrift(written, as.placement) == "") {
		return
	}
	as.ns.mu.Lock()
	defer as.ns.mu.Unlock()
	if e, ok := as.ns.byName[as.name]; !ok || e.seq != as.seq {
		return
	}
	if as.prev != nil {
		as.ns.byName[as.name] = *as.prev
		return
	}
	delete(as.ns.byName, as.name)
}

// withAssumed is the namespace's VMs as a decision must see them: the cached ones, and for each
// placement assumed (by VM name) that the cache does not show yet, a copy of its VM holding it,
// so that a VM moving counts in both places until the move is written. done are the
// assumptions that are over: the cache shows the placement, or no longer lists the VM (it was
// deleted; the VM being decided is read from the same cache, so it is listed). It is pure.
func withAssumed(cached []banlieuev1.VirtualMachine, assumed map[string]banlieuev1.ScheduledPlacement) (
	view []banlieuev1.VirtualMachine, done []string) {
	view = cached
	listed := make(map[string]bool, len(cached))
	var copied bool
	for i := range cached {
		vm := &cached[i]
		listed[vm.Name] = true
		p, ok := assumed[vm.Name]
		if !ok {
			continue
		}
		if vm.Status.Scheduled != nil && placementDrift(vm.Status.Scheduled, p) == "" {
			done = append(done, vm.Name)
			continue
		}
		if !copied {
			// A clone, so the caller's slice is never written past its length.
			view = append(make([]banlieuev1.VirtualMachine, 0, len(cached)+len(assumed)), cached...)
			copied = true
		}
		held := *vm.DeepCopy()
		held.Status.Scheduled = &p
		view = append(view, held)
	}
	for name := range assumed {
		if !listed[name] {
			done = append(done, name)
		}
	}
	slices.Sort(done)
	return view, done
}
