package libvirt

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/client-go/tools/events"
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
	"banlieue.io/banlieue/internal/provider/libvirt/hostconn"
	"banlieue.io/banlieue/internal/ssa"
	"banlieue.io/banlieue/pkg/libvirt"
)

// machineTimeout bounds one pass over a machine, connect included.
const machineTimeout = 2 * time.Minute

// MachineReconciler realises LibvirtMachines as libvirt domains. It never reads VirtualMachines:
// everything it needs is in the LibvirtMachine and its Provider.
type MachineReconciler struct {
	Client client.Client
	// APIReader reads the Provider's Secret and CA and the machine's user-data Secret uncached,
	// by name, and the machine's volume record when the cache may lag behind it.
	APIReader   client.Reader
	Connections *hostconn.Connections
	// ProviderName, when set, limits this process to the machines of one Provider.
	ProviderName string
	// ProviderNamespace, when set, is that Provider's namespace: machines are watched in every
	// namespace (a shared Provider serves the namespaces it admits), and only those whose
	// providerRef names exactly this Provider are served.
	ProviderNamespace string
	// starts tells a start libvirtd lost from one in flight.
	starts startWatch
	// Workers is how many machines are reconciled at once (--workers); zero means one. A machine
	// whose host call hangs (a frozen libvirtd holds it until keepalive gives up) must not hold
	// back the machines queued behind it; what one host takes at once is bounded apart
	// (hostconn.Limits).
	Workers int
	// Resync is how often a machine is looked at again; zero means the intervals of docs/operations.md, "Requeue intervals".
	Resync time.Duration

	// recorder announces the domain's transitions (machine_events.go); set up with the manager.
	recorder events.EventRecorder
	// announced keeps a pass reading a stale cache from announcing a transition twice.
	announced announced
	// events brings the hosts' domain events to the controller (machine_domainevents.go).
	events *domainEvents
	// moves are the live moves this process runs as their source (machine_move_pass.go).
	moves moveRuns
}

// SetupWithManager registers the reconciler.
func (r *MachineReconciler) SetupWithManager(mgr ctrl.Manager) error {
	r.recorder = mgr.GetEventRecorder(RecorderName)
	mine := predicate.NewPredicateFuncs(func(o client.Object) bool {
		m, ok := o.(*infrav1.LibvirtMachine)
		return ok && r.serves(m)
	})
	if err := mgr.GetFieldIndexer().IndexField(context.Background(), &infrav1.LibvirtMachine{}, machineDomainIndex, machineDomainKey); err != nil {
		return fmt.Errorf("indexing LibvirtMachines by domain: %w", err)
	}
	r.events = newDomainEvents()
	r.Connections.OnDomainEvent(r.events.offer)
	return ctrl.NewControllerManagedBy(mgr).Named("libvirtmachine").
		For(&infrav1.LibvirtMachine{}, builder.WithPredicates(mine,
			predicate.Or[client.Object](specChanged, deletionRequested))).
		WatchesRawSource(source.Channel(r.events.ch, handler.TypedEnqueueRequestsFromMapFunc(r.machinesFor))).
		WithOptions(app.ControllerOptions(r.Workers)).
		Complete(r.events.track(r))
}

// serves reports whether m is this process's: its providerRef names the Provider the process
// was started for, namespace and name. A machine of another namespace naming a Provider of the
// same name is someone else's, and a machine not placed yet (no providerRef) is nobody's.
func (r *MachineReconciler) serves(m *infrav1.LibvirtMachine) bool {
	key := m.ProviderKey()
	return m.Spec.ProviderRef != nil && (r.ProviderName == "" || key.Name == r.ProviderName) &&
		(r.ProviderNamespace == "" || key.Namespace == r.ProviderNamespace)
}

// deletionRequested passes the update that sets deletionTimestamp, so teardown starts at once.
var deletionRequested = predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
	return e.ObjectOld.GetDeletionTimestamp().IsZero() && !e.ObjectNew.GetDeletionTimestamp().IsZero()
}}

// Reconcile converges one machine, or tears it down when it is being deleted, through the
// phases of a machineScope.
func (r *MachineReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var m infrav1.LibvirtMachine
	if err := r.Client.Get(ctx, req.NamespacedName, &m); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !r.serves(&m) {
		return ctrl.Result{}, nil
	}
	ctx, cancel := context.WithTimeout(ctx, machineTimeout)
	defer cancel()
	s := &machineScope{r: r, machine: &m}

	// A machine of a Cluster API Machine is served as the contract asks (machine_capi.go).
	if capi.Managed(&m) {
		s.phase = phaseClusterAPI
		if res, done, err := s.clusterAPI(ctx, capi.OwnerMachine(&m)); done {
			return res, err
		}
	}

	// The host is reached on deletion too; that is why a Provider cannot go away while its
	// machines exist.
	s.phase = phaseProvider
	if err := r.Client.Get(ctx, m.ProviderKey(), &s.provider); err != nil {
		return s.fail(ctx, fmt.Errorf("reading Provider %q: %w", m.ProviderKey(), err))
	}
	s.phase = phaseAdmission
	if refusal, err := r.admits(ctx, &m, &s.provider); err != nil {
		return s.fail(ctx, err)
	} else if refusal != "" {
		return s.refuse(ctx, refusal)
	}

	if !m.DeletionTimestamp.IsZero() {
		return s.reconcileDelete(ctx)
	}
	return s.reconcileNormal(ctx)
}

// reconcileDelete tears the machine's domain and volumes down, then lets the machine go: its
// one write is the finalizer's removal. Teardown is not checked against the Provider: it
// touches only what the machine's ownership record proves its own (machine_teardown.go), and a
// machine whose Provider stopped granting its pool must still go.
func (s *machineScope) reconcileDelete(ctx context.Context) (ctrl.Result, error) {
	r, m := s.r, s.machine
	s.phase = phaseConnect
	c, err := r.connect(ctx, &s.provider)
	if err != nil {
		return s.fail(ctx, err)
	}
	s.phase = phaseTeardown
	release, err := r.Connections.Acquire(ctx, m.ProviderKey(), hostconn.OperationDomain)
	if err != nil {
		return s.fail(ctx, err)
	}
	err = teardown(ctx, c, m, &r.starts)
	release()
	if err != nil {
		return s.fail(ctx, err)
	}
	r.starts.clear(m.UID)
	r.announced.forget(announcedKeys(m)...)
	s.phase = phaseWrite
	removed, err := finalizer.Remove(ctx, r.Client, m, infrav1.FinalizerLibvirtMachine)
	if err != nil {
		return ctrl.Result{}, fmt.Errorf("%s: %w", s.phase, err)
	}
	if removed {
		// The finalizer's removal is the teardown's last step, done once: a pass from a cached
		// copy that still shows the finalizer (a resync, or a host event past the teardown's own,
		// selfCaused) finds the machine gone and announces nothing.
		r.recorder.Eventf(m, nil, corev1.EventTypeNormal, banlieuev1.ReasonDomainDestroyed, "Teardown",
			"domain %s and its volumes removed", m.Spec.DomainName)
	}
	log.FromContext(ctx).Info("domain and volumes removed", "domain", m.Spec.DomainName)
	return ctrl.Result{}, nil
}

// reconcileNormal checks the machine's authority over every host name it uses, claims its
// identity, converges the domain, and writes what it found once, at the end (finish).
func (s *machineScope) reconcileNormal(ctx context.Context) (ctrl.Result, error) {
	r, m, p := s.r, s.machine, &s.provider
	// Every host name of the machine is checked before the first call to the host, connecting
	// included (authority.go).
	s.phase = phaseAuthority
	var images banlieuev1.VMImageList
	if err := r.Client.List(ctx, &images); err != nil {
		return s.fail(ctx, fmt.Errorf("listing VMImages to check spec.bootSource.volume: %w", err))
	}
	if err := checkAuthority(m, p, images.Items); err != nil {
		return s.fail(ctx, err)
	}
	if s.capi != nil {
		if err := s.capi.check(m); err != nil {
			return s.fail(ctx, err)
		}
	}
	// Accepted: every status this pass writes records the boot volume (converge's first,
	// volumeRecord's, before any volume is created), so a later pass grants it whatever the
	// rows say then.
	m.Status.BootVolume = m.Spec.BootSource.Volume

	s.phase = phaseConnect
	c, err := r.connect(ctx, p)
	if err != nil {
		return s.fail(ctx, err)
	}

	s.phase = phaseIdentity
	if err := r.claimIdentity(ctx, m, p.Name); err != nil {
		return ctrl.Result{}, fmt.Errorf("%s: %w", s.phase, err)
	}
	s.claimed = true
	// The identity's patch read the stored status back into m: accepted all the same, and for a
	// Cluster API machine not paused.
	m.Status.BootVolume = m.Spec.BootSource.Volume
	if s.capi != nil {
		s.capi.notPaused(m)
	}

	s.phase = phaseUserData
	userData, err := machineUserData(ctx, r.APIReader, m)
	if s.capi != nil {
		userData, err = s.capi.bootstrapData(ctx, r.APIReader, m)
	}
	if err != nil {
		return s.fail(ctx, err)
	}

	// A live move this Provider is the source of (ADR-0154): while it runs, or once the domain
	// left this host, the pass only reports it; converging would touch a moving domain or make
	// a moved one again here.
	if m.Spec.Migration != nil || m.Status.Migration != nil || r.moves.has(m.UID) {
		if res, done, err := s.move(ctx, c); done {
			if err != nil {
				return s.fail(ctx, err)
			}
			return res, nil
		}
	}

	s.phase = phaseConverge
	release, err := r.Connections.Acquire(ctx, m.ProviderKey(), hostconn.OperationDomain)
	if err != nil {
		return s.fail(ctx, err)
	}
	obs, err := converge(ctx, c, m, userData, r.volumeRecord(m), &r.starts)
	release()
	if err != nil {
		return s.fail(ctx, err)
	}
	res, err := s.finish(ctx, obs)
	if m.Spec.Migration != nil && err == nil && (res.RequeueAfter == 0 || res.RequeueAfter > moveLook) {
		// Waiting for the target to report its host prepared: its record is no change the
		// machine's watch passes on.
		res.RequeueAfter = moveLook
	}
	return res, err
}

// finish is a converged pass's write: spec.providerID when the domain carries another UUID than
// the one recorded (a domain this machine defined before banlieue chose its UUIDs keeps
// libvirt's), then the status when it differs from the stored one; then the events of what
// changed, and when to look again.
func (s *machineScope) finish(ctx context.Context, obs observation) (ctrl.Result, error) {
	r, m := s.r, s.machine
	s.phase = phaseWrite
	if id := providerID(s.provider.Name, obs.domain.UUID.String()); m.Spec.ProviderID != id {
		if err := s.patchSpec(ctx, "spec.providerID", func(m *infrav1.LibvirtMachine) { m.Spec.ProviderID = id }); err != nil {
			return ctrl.Result{}, err
		}
	}
	status := succeededStatus(m, obs)
	if s.capi != nil {
		s.capi.status(m, &status)
	}
	// A pass that found everything as recorded sends nothing: the apply would be a no-op on the
	// API server, and a resync of many converged machines would still cost a request each.
	if !equality.Semantic.DeepEqual(status, m.Status) {
		if err := s.writeStatus(ctx, &status); err != nil {
			return ctrl.Result{}, err
		}
	}
	emitMachineTransitions(r.recorder, &r.announced, m, &m.Status, &status, obs.power)
	requeue := machineRequeue(obs, r.Connections.Watching(m.ProviderKey()))
	// A power-off under way is watched closely, whatever the resync.
	if w := obs.power.requeue(); w > 0 {
		requeue = w
		if r.Resync > 0 {
			requeue = min(r.Resync, w)
		}
		return ctrl.Result{RequeueAfter: requeue}, nil
	}
	return ctrl.Result{RequeueAfter: cmp.Or(r.Resync, requeue)}, nil
}

// connect returns the Provider's connection, forgetting it when it fails.
func (r *MachineReconciler) connect(ctx context.Context, p *banlieuev1.Provider) (*libvirt.Client, error) {
	c, err := r.Connections.Connect(ctx, r.APIReader, p)
	if err != nil {
		r.Connections.Forget(client.ObjectKeyFromObject(p))
		return nil, fmt.Errorf("connecting to Provider %q: %w", p.Name, err)
	}
	return c, nil
}

// volumeRecord returns converge's access to the machine's status.volumes. Every write applies
// the whole status, as every status write of this role does, and the machine in memory keeps
// the record for the rest of the pass.
func (r *MachineReconciler) volumeRecord(m *infrav1.LibvirtMachine) volumeRecord {
	write := func(ctx context.Context, names []string) error {
		st := *m.Status.DeepCopy()
		st.Volumes = names
		if err := ssa.ApplyStatus(ctx, r.Client, m, ownStatus(&st), banlieuev1.FieldManagerProviderLibvirt); err != nil {
			return err
		}
		m.Status = st
		return nil
	}
	return volumeRecord{
		add: func(ctx context.Context, names []string) error {
			all := slices.Clone(m.Status.Volumes)
			for _, n := range names {
				if !slices.Contains(all, n) {
					all = append(all, n)
				}
			}
			return write(ctx, all)
		},
		drop: func(ctx context.Context, name string) error {
			return write(ctx, slices.DeleteFunc(slices.Clone(m.Status.Volumes), func(n string) bool { return n == name }))
		},
		snapshots: func(ctx context.Context, snaps []infrav1.LibvirtMachineSnapshotStatus, volumes []string) error {
			st := *m.Status.DeepCopy()
			st.Snapshots = snaps
			for _, n := range volumes {
				if !slices.Contains(st.Volumes, n) {
					st.Volumes = append(st.Volumes, n)
				}
			}
			if err := ssa.ApplyStatus(ctx, r.Client, m, ownStatus(&st), banlieuev1.FieldManagerProviderLibvirt); err != nil {
				return err
			}
			m.Status = st
			return nil
		},
		restore: func(ctx context.Context, report *infrav1.LibvirtMachineRestoreStatus) error {
			st := *m.Status.DeepCopy()
			st.Restore = report
			if err := ssa.ApplyStatus(ctx, r.Client, m, ownStatus(&st), banlieuev1.FieldManagerProviderLibvirt); err != nil {
				return err
			}
			m.Status = st
			return nil
		},
		refresh: func(ctx context.Context) error {
			live, err := r.readStored(ctx, m)
			if err != nil {
				return err
			}
			m.Status.Volumes = live.Status.Volumes
			return nil
		},
		refreshSnapshots: func(ctx context.Context) error {
			live, err := r.readStored(ctx, m)
			if err != nil {
				return err
			}
			m.Status.Snapshots, m.Status.Restore, m.Status.Volumes = live.Status.Snapshots, live.Status.Restore, live.Status.Volumes
			return nil
		},
	}
}

// readStored reads the machine as the API server stores it, past the cache.
func (r *MachineReconciler) readStored(ctx context.Context, m *infrav1.LibvirtMachine) (*infrav1.LibvirtMachine, error) {
	var live infrav1.LibvirtMachine
	if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(m), &live); err != nil {
		return nil, err
	}
	return &live, nil
}

// claimIdentity makes the pass's first API write, before anything on the host is created: the
// finalizer and, when the machine records no domain UUID yet, a fresh one as spec.providerID
// (machine_identity.go), in one patch that fails on a stale read.
func (r *MachineReconciler) claimIdentity(ctx context.Context, m *infrav1.LibvirtMachine, provider string) error {
	id := identityToWrite(m, provider, uuid.NewString)
	return finalizer.EnsureWith(ctx, r.Client, m, infrav1.FinalizerLibvirtMachine, func() bool {
		if id == "" {
			return false
		}
		m.Spec.ProviderID = id
		return true
	}, client.FieldOwner(banlieuev1.FieldManagerProviderLibvirt))
}
