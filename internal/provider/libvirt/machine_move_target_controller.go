package libvirt

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/source"

	infrav1 "banlieue.io/banlieue/api/infrastructure/v1alpha1"
	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
	"banlieue.io/banlieue/internal/app"
	"banlieue.io/banlieue/internal/provider/libvirt/hostconn"
	"banlieue.io/banlieue/internal/ssa"
	"banlieue.io/banlieue/pkg/libvirt"
	"banlieue.io/banlieue/pkg/nocloud"
)

// MoveTargetFieldSelector selects the LibvirtMachines moving live to the Provider of that name.
func MoveTargetFieldSelector(name string) fields.Selector {
	return fields.OneTermEqualSelector("spec.migration.targetProvider.name", name)
}

// moveTargetRetry is how often a machine moving to this Provider is looked at while the move
// is asked: the source's report decides whether the prepared volumes stay.
const moveTargetRetry = 15 * time.Second

// MoveTargetReconciler is the target Provider's side of a live move: it prepares this
// Provider's host for the machines whose spec.migration.targetProvider names it, and releases
// or adopts what it made once the move is over. It writes status.migrationTarget alone, under
// its own field manager; the rest of the machine is the source Provider's until the handover.
type MoveTargetReconciler struct {
	Client client.Client
	// APIReader reads the machine, its Provider and its user-data Secret uncached.
	APIReader   client.Reader
	Connections *hostconn.Connections
	// ProviderName and ProviderNamespace, when set, are the Provider this process serves, as
	// for MachineReconciler; unset serves every Provider.
	ProviderName      string
	ProviderNamespace string
	Workers           int
}

// SetupWithManager watches the machines moving to this process's Provider. The manager's cache
// selects machines by spec.providerRef.name (ADR-0146), so a process of one Provider watches
// those moving to it through a cache of its own, selected by the target's name.
func (r *MoveTargetReconciler) SetupWithManager(mgr ctrl.Manager) error {
	watch := mgr.GetCache()
	if r.ProviderName != "" {
		c, err := cache.New(mgr.GetConfig(), cache.Options{Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper(),
			ByObject: map[client.Object]cache.ByObject{&infrav1.LibvirtMachine{}: {Field: MoveTargetFieldSelector(r.ProviderName)}}})
		if err != nil {
			return fmt.Errorf("the cache of machines moving to Provider %s: %w", r.ProviderName, err)
		}
		if err := mgr.Add(c); err != nil {
			return err
		}
		watch = c
	}
	return ctrl.NewControllerManagedBy(mgr).Named("libvirtmachine-movetarget").
		WatchesRawSource(source.Kind(watch, &infrav1.LibvirtMachine{}, &handler.TypedEnqueueRequestForObject[*infrav1.LibvirtMachine]{})).
		WithOptions(app.ControllerOptions(r.Workers)).
		Complete(r)
}

// self is the Provider this process is to m's move, and whether it serves it: the request's
// target, else the one its record names.
func (r *MoveTargetReconciler) self(m *infrav1.LibvirtMachine) (types.NamespacedName, bool) {
	var ref infrav1.ProviderReference
	switch {
	case m.Spec.Migration != nil:
		ref = m.Spec.Migration.TargetProvider
	case m.Status.MigrationTarget != nil:
		ref = m.Status.MigrationTarget.Provider
	default:
		return types.NamespacedName{}, false
	}
	key := types.NamespacedName{Namespace: ref.Namespace, Name: ref.Name}
	if key.Namespace == "" {
		key.Namespace = m.Namespace
	}
	return key, (r.ProviderName == "" || key.Name == r.ProviderName) && (r.ProviderNamespace == "" || key.Namespace == r.ProviderNamespace)
}

// Reconcile takes the target's next step for one machine (decideTargetAction) and writes its
// record once.
func (r *MoveTargetReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var m infrav1.LibvirtMachine
	if err := r.APIReader.Get(ctx, req.NamespacedName, &m); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	self, ok := r.self(&m)
	if !ok {
		return ctrl.Result{}, nil
	}
	action := decideTargetAction(&m, self)
	if action == targetNothing {
		if m.Spec.Migration != nil {
			return ctrl.Result{RequeueAfter: moveTargetRetry}, nil
		}
		return ctrl.Result{}, nil
	}
	ctx, cancel := context.WithTimeout(ctx, machineTimeout)
	defer cancel()
	log.FromContext(ctx).Info("live move, target side", "action", action.String(), "provider", self.String())
	rec := recordOf(&m, self)
	if action == targetForget {
		return ctrl.Result{}, r.write(ctx, &m, nil)
	}

	var p banlieuev1.Provider
	if err := r.APIReader.Get(ctx, self, &p); err != nil {
		return ctrl.Result{}, fmt.Errorf("reading target Provider %s: %w", self, err)
	}
	c, err := r.Connections.Connect(ctx, r.APIReader, &p)
	if err != nil {
		r.Connections.Forget(self)
		if action == targetRecord || action == targetPrepare {
			return r.fail(ctx, &m, self, rec, reasonTargetPreparationFailed, fmt.Errorf("%s: connecting to Provider %s: %w", stepPrepareTarget, self, err))
		}
		return ctrl.Result{}, fmt.Errorf("connecting to Provider %s: %w", self, err)
	}
	release, err := r.Connections.Acquire(ctx, self, hostconn.OperationDomain)
	if err != nil {
		return ctrl.Result{}, err
	}
	defer release()

	switch action {
	case targetRecord:
		return r.record(ctx, c, &m, self, &p)
	case targetPrepare:
		poolPath, err := r.prepare(ctx, c, &m, rec)
		if err != nil {
			reason := reasonTargetPreparationFailed
			var me *moveError
			if errors.As(err, &me) {
				reason = me.Reason
			}
			return r.fail(ctx, &m, self, rec, reason, err)
		}
		ep, err := libvirt.ParseEndpoint(p.Spec.Connection.Endpoint)
		if err != nil {
			return r.fail(ctx, &m, self, rec, reasonTargetPreparationFailed, fmt.Errorf("%s: Provider %s's endpoint: %w", stepPrepareTarget, self, err))
		}
		done := rec.DeepCopy()
		done.Phase, done.Reason, done.Message = infrav1.MachineMigrationTargetPrepared, "", ""
		done.PoolPath, done.URI, done.Address = poolPath, ep.String(), ep.Host
		return ctrl.Result{RequeueAfter: moveTargetRetry}, r.write(ctx, &m, done)
	case targetObserve:
		received, err := receivedOnHost(ctx, c, &m)
		if err != nil {
			return ctrl.Result{}, fmt.Errorf("%s: reading domain %s on the target: %w", stepMigrate, m.Spec.DomainName, err)
		}
		if !received {
			return ctrl.Result{RequeueAfter: moveTargetRetry}, nil
		}
		got := rec.DeepCopy()
		got.Phase = infrav1.MachineMigrationTargetReceived
		return ctrl.Result{RequeueAfter: moveTargetRetry}, r.write(ctx, &m, got)
	case targetRelease:
		if err := releaseTarget(ctx, c, &m, rec); err != nil {
			if rec.Phase != infrav1.MachineMigrationTargetFailed || rec.Reason != reasonTargetPreparationFailed {
				// Said on the record, which stays until the host lets the volumes go.
				_ = r.write(ctx, &m, targetFailed(&m, self, rec, reasonTargetPreparationFailed, err))
			}
			return ctrl.Result{RequeueAfter: moveTargetRetry}, nil
		}
		return ctrl.Result{}, r.write(ctx, &m, nil)
	}
	return ctrl.Result{}, nil
}

// record checks the target may take the machine and none of its volume names is taken on the
// host, then writes the record of the volumes before any is made.
func (r *MoveTargetReconciler) record(ctx context.Context, c *libvirt.Client, m *infrav1.LibvirtMachine, self types.NamespacedName,
	p *banlieuev1.Provider) (ctrl.Result, error) {
	vols, err := targetVolumes(m)
	if err != nil {
		return r.fail(ctx, m, self, nil, reasonTargetPreparationFailed, fmt.Errorf("%s: %w", stepPrepareTarget, err))
	}
	rec := targetRecordFor(m, self, vols)
	if err := r.mayTake(ctx, m, p, rec.Pool); err != nil {
		return r.fail(ctx, m, self, nil, reasonTargetPreparationFailed, fmt.Errorf("%s: %w", stepPrepareTarget, err))
	}
	pool, err := c.StoragePoolLookupByName(ctx, rec.Pool)
	if err != nil {
		return r.fail(ctx, m, self, nil, reasonTargetPreparationFailed, fmt.Errorf("%s: storage pool %s on the target: %w", stepPrepareTarget, rec.Pool, err))
	}
	if _, err := c.DomainLookupByName(ctx, m.Spec.DomainName); err == nil {
		return r.fail(ctx, m, self, nil, reasonTargetPreparationFailed, fmt.Errorf("%s: the target host already has a domain %s: it is not this move's", stepPrepareTarget, m.Spec.DomainName))
	} else if !libvirt.IsNotFound(err) {
		return ctrl.Result{}, fmt.Errorf("%s: looking up domain %s on the target: %w", stepPrepareTarget, m.Spec.DomainName, err)
	}
	for _, v := range vols {
		if _, err := c.StorageVolLookupByName(ctx, pool, v.name); err == nil {
			return r.fail(ctx, m, self, nil, reasonTargetVolumeExists, fmt.Errorf("%s: volume %s is already in the target pool %s: it is not this machine's to overwrite",
				stepPrepareTarget, v.name, rec.Pool))
		} else if !libvirt.IsNotFound(err) {
			return ctrl.Result{}, fmt.Errorf("%s: looking up volume %s on the target: %w", stepPrepareTarget, v.name, err)
		}
	}
	// Recorded before anything is made: a pass that dies after a create still knows it.
	return ctrl.Result{RequeueAfter: time.Second}, r.write(ctx, m, rec)
}

// mayTake refuses a machine the target Provider does not admit (its namespace) or whose target
// pool is none of its storage classes'.
func (r *MoveTargetReconciler) mayTake(ctx context.Context, m *infrav1.LibvirtMachine, p *banlieuev1.Provider, pool string) error {
	if m.Namespace != p.Namespace {
		var ns corev1.Namespace
		if err := r.APIReader.Get(ctx, client.ObjectKey{Name: m.Namespace}, &ns); err != nil {
			return fmt.Errorf("reading Namespace %s for Provider %s/%s's allowedNamespaces: %w", m.Namespace, p.Namespace, p.Name, err)
		}
		if msg := namespaceRefusal(p, m.Namespace, ns.Labels); msg != "" {
			return errors.New(msg)
		}
	}
	for _, sc := range p.Spec.Capabilities.StorageClasses {
		if targetIs(sc.Target, targetPool, pool) {
			return nil
		}
	}
	return fmt.Errorf("spec.migration.targetPool: %q is not the target of any storage class of Provider %s/%s", pool, p.Namespace, p.Name)
}

// prepare makes the recorded volumes still missing on the target's host: the disks empty over
// the same base, and the seed rendered from the machine's user-data (remade each time: it is
// never attached before the move, and a pass that died mid-upload left it partial).
func (r *MoveTargetReconciler) prepare(ctx context.Context, c *libvirt.Client, m *infrav1.LibvirtMachine,
	rec *infrav1.LibvirtMachineMigrationTargetStatus) (poolPath string, err error) {
	vols, err := targetVolumes(m)
	if err != nil {
		return "", &moveError{Step: stepPrepareTarget, Reason: reasonTargetPreparationFailed, Err: err}
	}
	pool, err := c.StoragePoolLookupByName(ctx, rec.Pool)
	if err != nil {
		return "", &moveError{Step: stepPrepareTarget, Reason: reasonTargetPreparationFailed, Err: fmt.Errorf("storage pool %s on the target: %w", rec.Pool, err)}
	}
	for _, v := range vols {
		if !slices.Contains(rec.Volumes, v.name) {
			return "", &moveError{Step: stepPrepareTarget, Reason: reasonTargetPreparationFailed,
				Err: fmt.Errorf("volume %s is not in status.migrationTarget.volumes: the machine's disks changed since the target recorded them", v.name)}
		}
		if v.seed {
			if err := r.makeSeed(ctx, c, pool, m, v.name); err != nil {
				return "", &moveError{Step: stepPrepareTarget, Reason: reasonTargetPreparationFailed, Err: err}
			}
			continue
		}
		if vol, err := c.StorageVolLookupByName(ctx, pool, v.name); err == nil {
			poolPath = path.Dir(vol.Key)
			continue // made by an earlier pass: it is recorded
		} else if !libvirt.IsNotFound(err) {
			return "", &moveError{Step: stepPrepareTarget, Reason: reasonTargetPreparationFailed, Err: fmt.Errorf("looking up volume %s: %w", v.name, err)}
		}
		spec := volumeSpec{name: v.name, capacity: v.capacity, format: formatQCOW2}
		if v.base != "" {
			base, err := c.StorageVolLookupByName(ctx, pool, v.base)
			if libvirt.IsNotFound(err) {
				return "", &moveError{Step: stepPrepareTarget, Reason: reasonBaseImageMissing,
					Err: fmt.Errorf("the target pool %s has no base image %s for disk volume %s: import the machine's VMImage on the target Provider first", rec.Pool, v.base, v.name)}
			} else if err != nil {
				return "", &moveError{Step: stepPrepareTarget, Reason: reasonTargetPreparationFailed, Err: fmt.Errorf("looking up base %s: %w", v.base, err)}
			}
			spec.backingPath, spec.backingFormat = base.Key, backingFormat(v.base)
		}
		xml, err := renderVolume(spec)
		if err != nil {
			return "", &moveError{Step: stepPrepareTarget, Reason: reasonTargetPreparationFailed, Err: err}
		}
		vol, err := c.StorageVolCreateXML(ctx, pool, xml, 0)
		if err != nil {
			return "", &moveError{Step: stepPrepareTarget, Reason: reasonTargetPreparationFailed, Err: fmt.Errorf("creating volume %s: %w", v.name, err)}
		}
		poolPath = path.Dir(vol.Key)
	}
	if poolPath == "" {
		return "", &moveError{Step: stepPrepareTarget, Reason: reasonTargetPreparationFailed, Err: errors.New("the machine has no disk to move")}
	}
	return poolPath, nil
}

// makeSeed (re)makes the seed ISO on the target from the machine's user-data, as a new
// machine's: the instance-id is the domain's UUID, so cloud-init on the moved guest sees the
// same instance.
func (r *MoveTargetReconciler) makeSeed(ctx context.Context, c *libvirt.Client, pool libvirt.StoragePool, m *infrav1.LibvirtMachine, name string) error {
	userData, err := machineUserData(ctx, r.APIReader, m)
	if err != nil {
		return fmt.Errorf("reading the user-data: %w", err)
	}
	id := m.Status.DomainUUID
	if id == "" {
		return errors.New("status.domainUuid is empty: the seed's instance-id is the domain's UUID")
	}
	seed := nocloud.Seed{InstanceID: id, Hostname: m.Spec.DomainName, UserData: append([]byte{}, userData...)}
	if seed.NetworkConfig, err = seedNetworkConfig(m, seedMACs(m)); err != nil {
		return err
	}
	image, err := seed.Build()
	if err != nil {
		return fmt.Errorf("building the cloud-init seed: %w", err)
	}
	var buf bytes.Buffer
	if _, err := image.WriteTo(&buf); err != nil {
		return err
	}
	if v, err := c.StorageVolLookupByName(ctx, pool, name); err == nil {
		if err := c.StorageVolDelete(ctx, v); err != nil && !libvirt.IsNotFound(err) {
			return fmt.Errorf("deleting the partial seed %s: %w", name, err)
		}
	} else if !libvirt.IsNotFound(err) {
		return fmt.Errorf("looking up seed %s: %w", name, err)
	}
	xml, err := renderVolume(volumeSpec{name: name, capacity: uint64(buf.Len()), format: formatRaw})
	if err != nil {
		return err
	}
	vol, err := c.StorageVolCreateXML(ctx, pool, xml, 0)
	if err != nil {
		return fmt.Errorf("creating seed %s: %w", name, err)
	}
	if err := c.StorageVolUpload(ctx, vol, &buf, int64(buf.Len()), nil); err != nil {
		return fmt.Errorf("uploading seed %s: %w", name, err)
	}
	return nil
}

// receivedOnHost reports whether c's host runs m's domain (its name and status.domainUUID)
// with no migration job: the copy to this host is over.
func receivedOnHost(ctx context.Context, c *libvirt.Client, m *infrav1.LibvirtMachine) (bool, error) {
	d, err := c.DomainLookupByName(ctx, m.Spec.DomainName)
	if libvirt.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if m.Status.DomainUUID == "" || d.UUID.String() != m.Status.DomainUUID {
		return false, nil
	}
	v, err := viewOf(ctx, moveEnd{c: c}, d)
	return err == nil && v.Running && !v.Job && !v.Incoming, err
}

// releaseTarget deletes the volumes the target recorded for a move that will not happen. A
// domain of the machine's name on the target host means the guest may run there: nothing is
// deleted, and the error says so.
func releaseTarget(ctx context.Context, c *libvirt.Client, m *infrav1.LibvirtMachine, rec *infrav1.LibvirtMachineMigrationTargetStatus) error {
	if _, err := c.DomainLookupByName(ctx, m.Spec.DomainName); err == nil {
		return fmt.Errorf("%s: the target host has a domain %s: the volumes recorded for the move are left as they are", stepMigrate, m.Spec.DomainName)
	} else if !libvirt.IsNotFound(err) {
		return fmt.Errorf("looking up domain %s on the target: %w", m.Spec.DomainName, err)
	}
	pool, err := c.StoragePoolLookupByName(ctx, rec.Pool)
	if libvirt.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("storage pool %s on the target: %w", rec.Pool, err)
	}
	return deleteVolumes(ctx, moveEnd{c: c, pool: pool}, rec.Volumes)
}

// fail writes rec (a fresh one when nil) Failed with err, and looks again later.
func (r *MoveTargetReconciler) fail(ctx context.Context, m *infrav1.LibvirtMachine, self types.NamespacedName,
	rec *infrav1.LibvirtMachineMigrationTargetStatus, reason string, err error) (ctrl.Result, error) {
	log.FromContext(ctx).Info("live move target not prepared", "reason", reason, "error", err.Error())
	if werr := r.write(ctx, m, targetFailed(m, self, rec, reason, err)); werr != nil {
		return ctrl.Result{}, werr
	}
	return ctrl.Result{RequeueAfter: moveTargetRetry}, nil
}

// write applies status.migrationTarget alone under the target's field manager; nil removes it.
func (r *MoveTargetReconciler) write(ctx context.Context, m *infrav1.LibvirtMachine, rec *infrav1.LibvirtMachineMigrationTargetStatus) error {
	if err := ssa.ApplyStatus(ctx, r.Client, m, &infrav1.LibvirtMachineStatus{MigrationTarget: rec},
		banlieuev1.FieldManagerProviderLibvirtMigrationTarget); err != nil {
		return fmt.Errorf("writing status.migrationTarget: %w", err)
	}
	m.Status.MigrationTarget = rec
	return nil
}
