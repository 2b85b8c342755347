package vsphere

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/source"

	infrav1 "banlieue.io/banlieue/api/infrastructure/v1alpha1"
	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
	"banlieue.io/banlieue/internal/app"
	"banlieue.io/banlieue/internal/capi"
	"banlieue.io/banlieue/internal/finalizer"
	"banlieue.io/banlieue/internal/ssa"
	"banlieue.io/banlieue/internal/tenancy"
)

// machineTimeout bounds one pass over a machine, the session's dial included; a graceful
// power-off gets its powerOffTimeout on top.
const machineTimeout = 2 * time.Minute

// defaultResync is how often a converged machine is looked at again when no vCenter event
// brings it earlier.
const defaultResync = 5 * time.Minute

// MachineReconciler realises VSphereMachines as vCenter virtual machines through a Backend. It
// never reads VirtualMachines: everything it needs is in the VSphereMachine and its Provider.
type MachineReconciler struct {
	Client client.Client
	// APIReader reads the Provider's Secret and CA, the machine's user-data Secret and a
	// foreign namespace uncached, by name.
	APIReader client.Reader
	Sessions  *Sessions
	// ProviderName and ProviderNamespace limit this process to the machines of one Provider.
	ProviderName, ProviderNamespace string
	// Folder is the folder below each datacenter's VM folder the machines are cloned into and
	// watched in; empty is the root VM folder.
	Folder string
	// Workers is how many machines are reconciled at once; zero means one.
	Workers int
	// Resync is how often a machine is looked at again; zero means defaultResync (5 min), or
	// app.ErrorRetry after a failed pass.
	Resync time.Duration

	// owners maps a virtual machine's owner UID to its VSphereMachine, for vCenter's events.
	owners sync.Map
	// events brings vCenter's changes to the controller.
	events chan event.GenericEvent
	mu     sync.Mutex
	// watches runs one Watch per Provider session and datacenter.
	watches map[watchKey]context.CancelFunc
}

type watchKey struct {
	b          Backend
	datacenter string
}

// SetupWithManager registers the reconciler.
func (r *MachineReconciler) SetupWithManager(mgr ctrl.Manager) error {
	r.events = make(chan event.GenericEvent, 256)
	mine := predicate.NewPredicateFuncs(func(o client.Object) bool {
		m, ok := o.(*infrav1.VSphereMachine)
		return ok && r.serves(m)
	})
	return ctrl.NewControllerManagedBy(mgr).Named("vspheremachine").
		For(&infrav1.VSphereMachine{}, builder.WithPredicates(mine,
			predicate.Or[client.Object](predicate.GenerationChangedPredicate{}, deletionRequested))).
		WatchesRawSource(source.Channel(r.events, &handler.EnqueueRequestForObject{})).
		WithOptions(app.ControllerOptions(r.Workers)).
		Complete(r)
}

// Stop ends every watch and logs the sessions out.
func (r *MachineReconciler) Stop() {
	r.mu.Lock()
	for k, cancel := range r.watches {
		cancel()
		delete(r.watches, k)
	}
	r.mu.Unlock()
	r.Sessions.CloseAll()
}

// deletionRequested passes the update that sets deletionTimestamp, so teardown starts at once.
var deletionRequested = predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
	return e.ObjectOld.GetDeletionTimestamp().IsZero() && !e.ObjectNew.GetDeletionTimestamp().IsZero()
}}

// serves reports whether m names exactly this process's Provider.
func (r *MachineReconciler) serves(m *infrav1.VSphereMachine) bool {
	key := m.ProviderKey()
	return m.Spec.ProviderRef != nil && (r.ProviderName == "" || key.Name == r.ProviderName) &&
		(r.ProviderNamespace == "" || key.Namespace == r.ProviderNamespace)
}

// pass is one reconcile of one machine: what the phases found, the status written once at the
// end.
type pass struct {
	m *infrav1.VSphereMachine
	p *banlieuev1.Provider
	b Backend
	// capi is set for a machine a Cluster API Machine controls (machine_capi.go).
	capi *capiPass
}

// Reconcile converges one machine, or tears it down when it is being deleted. Phases: the
// Provider and its session; then teardown, or refusal checks, identity (the finalizer, the one
// early write), Ensure, power, providerID and the status.
func (r *MachineReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var m infrav1.VSphereMachine
	if err := r.Client.Get(ctx, req.NamespacedName, &m); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !r.serves(&m) {
		return ctrl.Result{}, nil
	}
	r.owners.Store(string(m.UID), req.NamespacedName)
	ctx, cancel := context.WithTimeout(ctx, machineTimeout)
	defer cancel()

	ps := &pass{m: &m}
	// A machine of a Cluster API Machine is served as the contract asks (machine_capi.go).
	if capi.Managed(&m) {
		if res, done, err := r.clusterAPI(ctx, ps); done {
			return res, err
		}
	}
	if res, done, err := r.connect(ctx, ps); done {
		return res, err
	}
	if !m.DeletionTimestamp.IsZero() {
		return r.reconcileDelete(ctx, ps)
	}
	return r.reconcileNormal(ctx, ps)
}

// connect reads the Provider, checks it admits the machine's namespace and opens its session.
func (r *MachineReconciler) connect(ctx context.Context, ps *pass) (ctrl.Result, bool, error) {
	m := ps.m
	var p banlieuev1.Provider
	if err := r.Client.Get(ctx, m.ProviderKey(), &p); err != nil {
		res, err := r.fail(ctx, ps, infrav1.ReasonReconcileFailed, fmt.Errorf("reading Provider %s: %w", m.ProviderKey(), err))
		return res, true, err
	}
	ps.p = &p
	if m.Namespace != p.Namespace {
		var ns corev1.Namespace
		if err := r.APIReader.Get(ctx, client.ObjectKey{Name: m.Namespace}, &ns); err != nil {
			res, err := r.fail(ctx, ps, infrav1.ReasonReconcileFailed, fmt.Errorf("reading Namespace %s for Provider %s/%s's allowedNamespaces: %w", m.Namespace, p.Namespace, p.Name, err))
			return res, true, err
		}
		if ok, rule := tenancy.AdmitsNamespace(&p, m.Namespace, ns.Labels); !ok {
			res, err := r.fail(ctx, ps, banlieuev1.ReasonNamespaceNotAllowed,
				fmt.Errorf("invalid spec.providerRef: Provider %s/%s does not admit namespace %s (%s)", p.Namespace, p.Name, m.Namespace, rule))
			return res, true, err
		}
	}
	e, version, refusal, err := providerEndpoint(ctx, r.APIReader, &p)
	if err == nil && refusal != nil {
		err = refusal
	}
	if err != nil {
		reason := banlieuev1.ReasonCredentialsUnavailable
		if refusal != nil {
			reason = refusal.Reason
		}
		res, err := r.fail(ctx, ps, reason, err)
		return res, true, err
	}
	b, err := r.Sessions.Get(ctx, client.ObjectKeyFromObject(&p), e, version)
	if err != nil {
		res, err := r.fail(ctx, ps, banlieuev1.ReasonConnectFailed, err)
		return res, true, err
	}
	ps.b = b
	return ctrl.Result{}, false, nil
}

// failureDomains lists the Provider's failure domains narrowed to what m names.
func (r *MachineReconciler) failureDomains(ctx context.Context, ps *pass) ([]FailureDomain, error) {
	// vTPM is declared by the Provider (features: vtpm), never discovered (ADR-0039).
	q := FailureDomainQuery{Folder: r.Folder, VTPM: slices.Contains(ps.p.Spec.Capabilities.Features, "vtpm")}
	for _, d := range ps.m.Spec.Disks {
		if !slices.Contains(q.Datastores, d.Datastore) {
			q.Datastores = append(q.Datastores, d.Datastore)
		}
	}
	for _, n := range ps.m.Spec.Network {
		if !slices.Contains(q.Networks, n.PortGroup) {
			q.Networks = append(q.Networks, n.PortGroup)
		}
	}
	fds, err := ps.b.FailureDomains(ctx, q)
	if err != nil {
		return nil, fmt.Errorf("listing failure domains: %w", err)
	}
	return fds, nil
}

// reconcileDelete destroys the machine's virtual machine, only one carrying its UID, and lets
// the machine go once vCenter no longer knows it. A virtual machine of its name that is not its
// own is left alone: the machine never created it.
func (r *MachineReconciler) reconcileDelete(ctx context.Context, ps *pass) (ctrl.Result, error) {
	m := ps.m
	if !slices.Contains(m.Finalizers, infrav1.FinalizerVSphereMachine) {
		return ctrl.Result{}, nil
	}
	ref := m.Status.VMRef
	if ref == "" && m.Spec.VMName != "" {
		// A clone may exist that no status recorded (the pass that made it failed after).
		fds, err := r.failureDomains(ctx, ps)
		if err != nil {
			return r.fail(ctx, ps, infrav1.ReasonReconcileFailed, err)
		}
		if i := slices.IndexFunc(fds, func(fd FailureDomain) bool { return fd.Name == m.Spec.FailureDomain }); i >= 0 {
			vm, err := ps.b.Get(ctx, fds[i].Datacenter, fds[i].Folder, m.Spec.VMName, string(m.UID))
			switch {
			case err == nil:
				ref = vm.Ref
			case errors.Is(err, ErrNotFound), errors.Is(err, ErrNotOwned):
			default:
				return r.fail(ctx, ps, infrav1.ReasonReconcileFailed, fmt.Errorf("finding virtual machine %s before deletion: %w", m.Spec.VMName, err))
			}
		}
	}
	if ref != "" {
		if err := ps.b.Delete(ctx, ref, string(m.UID)); err != nil {
			reason := infrav1.ReasonReconcileFailed
			if errors.Is(err, ErrNotOwned) {
				reason = infrav1.ReasonVMNameConflict
			}
			return r.fail(ctx, ps, reason, fmt.Errorf("deleting virtual machine %s: %w", ref, err))
		}
	}
	if _, err := finalizer.Remove(ctx, r.Client, m, infrav1.FinalizerVSphereMachine); err != nil {
		return ctrl.Result{}, err
	}
	r.owners.Delete(string(m.UID))
	log.FromContext(ctx).Info("virtual machine removed", "vm", m.Spec.VMName, "ref", ref)
	return ctrl.Result{}, nil
}

// reconcileNormal refuses what cannot be served before any change in vCenter, then claims the
// machine's identity, ensures the virtual machine, brings its power to spec and writes the status
// once.
func (r *MachineReconciler) reconcileNormal(ctx context.Context, ps *pass) (ctrl.Result, error) {
	m := ps.m
	fds, err := r.failureDomains(ctx, ps)
	if err != nil {
		return r.fail(ctx, ps, infrav1.ReasonReconcileFailed, err)
	}
	var userData []byte
	if ps.capi != nil {
		var refusal *Refusal
		userData, refusal, err = ps.capi.bootstrapData(ctx, r.APIReader, m)
		if err == nil && refusal != nil {
			return r.fail(ctx, ps, refusal.Reason, refusal)
		}
	} else {
		userData, err = machineUserData(ctx, r.APIReader, m)
	}
	if err != nil {
		return r.fail(ctx, ps, infrav1.ReasonReconcileFailed, err)
	}
	spec, refusal := machineSpec(m, fds, userData)
	if refusal != nil {
		return r.fail(ctx, ps, refusal.Reason, refusal)
	}
	r.watch(ps.b, spec.Datacenter, spec.Folder)
	// Identity: the finalizer is the pass's one write before vCenter is changed, so no clone
	// exists that the machine's deletion would not wait for.
	if err := finalizer.EnsureWith(ctx, r.Client, m, infrav1.FinalizerVSphereMachine, nil,
		client.FieldOwner(banlieuev1.FieldManagerProviderVSphere)); err != nil {
		return ctrl.Result{}, err
	}
	vm, err := ps.b.Ensure(ctx, spec)
	if errors.Is(err, ErrNotOwned) {
		return r.fail(ctx, ps, infrav1.ReasonVMNameConflict, fmt.Errorf("virtual machine %s exists in vCenter and is not this machine's; it is left untouched: %w", spec.Name, err))
	}
	if err != nil {
		return r.fail(ctx, ps, infrav1.ReasonReconcileFailed, fmt.Errorf("ensuring virtual machine %s: %w", spec.Name, err))
	}
	blocked, err := r.power(ctx, ps, spec, &vm)
	if err != nil {
		return r.fail(ctx, ps, infrav1.ReasonReconcileFailed, err)
	}
	if id := providerIDFor(vm.BIOSUUID); id != "" && m.Spec.ProviderID != id {
		patch := client.MergeFrom(m.DeepCopy())
		m.Spec.ProviderID = id
		if err := r.Client.Patch(ctx, m, patch, client.FieldOwner(banlieuev1.FieldManagerProviderVSphere)); err != nil {
			return ctrl.Result{}, err
		}
	}
	status := succeededStatus(m, vm, blocked)
	if ps.capi != nil {
		capiStatus(m, &status, true)
	}
	if !equality.Semantic.DeepEqual(status, m.Status) {
		if err := ssa.ApplyStatus(ctx, r.Client, m, &status, banlieuev1.FieldManagerProviderVSphere); err != nil {
			return ctrl.Result{}, err
		}
	}
	if blocked != nil || observedPower(vm.PowerState) != cmp.Or(m.Spec.DesiredPowerState, banlieuev1.PoweredOn) {
		return ctrl.Result{RequeueAfter: cmp.Or(r.Resync, app.ErrorRetry)}, nil
	}
	return ctrl.Result{RequeueAfter: cmp.Or(r.Resync, defaultResync)}, nil
}

// power takes decidePower's step and reads the virtual machine back; blocked is why the power
// state cannot be reached as the spec stands.
func (r *MachineReconciler) power(ctx context.Context, ps *pass, spec MachineSpec, vm *Machine) (*Refusal, error) {
	m := ps.m
	timeout := 2 * time.Minute
	if m.Spec.PowerOffTimeout != nil {
		timeout = m.Spec.PowerOffTimeout.Duration
	}
	uid := string(m.UID)
	var err error
	switch decidePower(m.Spec.DesiredPowerState, m.Spec.PowerOffMode, timeout, nil, *vm, time.Now()) {
	case powerNone, powerWait:
		return nil, nil
	case powerUnsupported:
		return &Refusal{Reason: infrav1.ReasonUnsupportedSpec, Message: "spec.desiredPowerState Suspended is not served by the vsphere provider yet"}, nil
	case powerNoTools:
		return &Refusal{Reason: infrav1.ReasonToolsNotRunning, Message: "spec.powerOffMode Soft asks the guest to shut down through VMware Tools, which are not running; set powerOffMode TrySoft or Hard"}, nil
	case powerOn:
		err = ps.b.PowerOn(ctx, vm.Ref, uid)
	case powerOff:
		err = ps.b.PowerOff(ctx, vm.Ref, uid, false, 0)
	case powerShutdown:
		if m.Spec.PowerOffMode == banlieuev1.PowerOffSoft {
			return &Refusal{Reason: infrav1.ReasonUnsupportedSpec, Message: "spec.powerOffMode Soft is not served by the vsphere provider yet; set TrySoft or Hard"}, nil
		}
		// TrySoft: vCenter asks the guest and cuts the power once the timeout has passed; the
		// pass gets that long on top of its own bound.
		pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout+machineTimeout)
		err = ps.b.PowerOff(pctx, vm.Ref, uid, true, timeout)
		cancel()
	}
	if err != nil {
		return nil, fmt.Errorf("changing the power of virtual machine %s: %w", vm.Ref, err)
	}
	got, err := ps.b.Get(ctx, spec.Datacenter, spec.Folder, spec.Name, uid)
	if err != nil {
		return nil, fmt.Errorf("reading virtual machine %s after the power change: %w", vm.Ref, err)
	}
	*vm = got
	return nil, nil
}

// fail writes Ready=False with reason and err's message (never a secret: the Backend's errors
// name steps and objects, not credentials) and tries again on the error interval. It is the
// one retry policy of every phase.
func (r *MachineReconciler) fail(ctx context.Context, ps *pass, reason string, err error) (ctrl.Result, error) {
	m := ps.m
	log.FromContext(ctx).Info("machine not reconciled", "reason", reason, "error", err.Error())
	status := failedStatus(m, reason, err.Error())
	if capi.Managed(m) {
		capiStatus(m, &status, ps.capi != nil)
	}
	if !equality.Semantic.DeepEqual(status, m.Status) {
		if serr := ssa.ApplyStatus(ctx, r.Client, m, &status, banlieuev1.FieldManagerProviderVSphere, ssa.IfUnchanged); client.IgnoreNotFound(serr) != nil {
			return ctrl.Result{}, serr
		}
	}
	return ctrl.Result{RequeueAfter: cmp.Or(r.Resync, app.ErrorRetry)}, nil
}

// watch starts, once per session and datacenter, a Watch of the machines' folder that
// enqueues the VSphereMachine of every virtual machine that changed; it stops with a session
// that is replaced.
func (r *MachineReconciler) watch(b Backend, datacenter, folder string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	key := watchKey{b: b, datacenter: datacenter}
	if _, ok := r.watches[key]; ok {
		return
	}
	for k, cancel := range r.watches {
		if k.b != b {
			cancel()
			delete(r.watches, k)
		}
	}
	if r.watches == nil {
		r.watches = map[watchKey]context.CancelFunc{}
	}
	ctx, cancel := context.WithCancel(context.Background())
	r.watches[key] = cancel
	go func() {
		err := b.Watch(ctx, datacenter, folder, func(vm Machine, _ bool) {
			v, ok := r.owners.Load(vm.OwnerUID)
			if !ok || vm.OwnerUID == "" {
				return
			}
			nn := v.(types.NamespacedName)
			o := &infrav1.VSphereMachine{}
			o.Namespace, o.Name = nn.Namespace, nn.Name
			select {
			case r.events <- event.GenericEvent{Object: o}:
			case <-ctx.Done():
			}
		})
		if err != nil {
			log.Log.Info("vCenter watch ended; machines are looked at on their resync", "datacenter", datacenter, "error", err.Error())
		}
		// A watch that gave up is started again by the next pass.
		r.mu.Lock()
		if r.watches[key] != nil {
			delete(r.watches, key)
		}
		r.mu.Unlock()
	}()
}
