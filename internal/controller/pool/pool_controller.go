package pool

import (
	"context"
	"fmt"
	"math"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
	"banlieue.io/banlieue/internal/app"
	"banlieue.io/banlieue/internal/ssa"
)

// The CRD defaults these; the fallbacks only matter for a pool that skipped admission defaulting.
const (
	defaultMaxSurge            = 2
	defaultProvisioningTimeout = 1800
)

// poolReconciler keeps a VirtualMachinePool's warm members (docs/guides/virtualmachine-pools.md).
type poolReconciler struct {
	client client.Client
	// apiReader lists members: a cache that has not yet seen the members the last pass created
	// would make this pass create them again.
	apiReader client.Reader
}

func (r *poolReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var pool banlieuev1.VirtualMachinePool
	if err := r.client.Get(ctx, req.NamespacedName, &pool); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	// Garbage collection removes the unclaimed members; claimed ones belong to their claims.
	if !pool.DeletionTimestamp.IsZero() {
		return ctrl.Result{RequeueAfter: app.RequeueLong}, nil
	}
	var image banlieuev1.VMImage
	if err := r.client.Get(ctx, client.ObjectKey{Name: pool.Spec.Template.Spec.ImageRef.Name}, &image); err != nil {
		return ctrl.Result{}, fmt.Errorf("getting VMImage %s: %w", pool.Spec.Template.Spec.ImageRef.Name, err)
	}
	revision := imageRevision(&image)

	// The label only narrows the list; poolMembers decides.
	var listed banlieuev1.VirtualMachineList
	if err := r.apiReader.List(ctx, &listed, client.InNamespace(pool.Namespace), client.MatchingLabels{banlieuev1.LabelPool: pool.Name}); err != nil {
		return ctrl.Result{}, fmt.Errorf("listing members of pool %s: %w", pool.Name, err)
	}
	vms := poolMembers(&pool, listed.Items)
	now := time.Now()
	members := make([]member, 0, len(vms))
	for i := range vms {
		members = append(members, projectMember(&vms[i], pool.Spec.Readiness, now))
	}

	var ranges []addressRange
	if a := pool.Spec.Addressing; a != nil {
		var err error
		if ranges, err = parseAddressPool(a.Pool); err != nil {
			status := poolStatus(&pool, members, revision, blockage{banlieuev1.ReasonAddressRangeExhausted, err.Error()})
			return ctrl.Result{RequeueAfter: app.RequeueLong}, r.writeStatus(ctx, &pool, status)
		}
	}
	p := planPool(planInput{
		Members:              members,
		Warm:                 int(pool.Spec.WarmReplicas),
		MaxReplicas:          int(pool.Spec.MaxReplicas),
		MaxSurge:             int(ptr.Deref(pool.Spec.MaxSurge, defaultMaxSurge)),
		ProvisioningTimeout:  seconds(ptr.Deref(pool.Spec.ProvisioningTimeoutSeconds, defaultProvisioningTimeout)),
		MaxIdle:              seconds(ptr.Deref(pool.Spec.MaxIdleSeconds, 0)),
		RecycleOnImageChange: ptr.Deref(pool.Spec.RecycleOnImageChange, true),
		Revision:             revision,
		Addresses:            ranges,
	})
	changed, err := r.apply(ctx, &pool, vms, p, revision)
	if err != nil {
		return ctrl.Result{}, err
	}
	status := poolStatus(&pool, members, revision, blockedBy(members, pool.Spec.Readiness, p))
	if err := r.writeStatus(ctx, &pool, status); err != nil {
		return ctrl.Result{}, err
	}
	// Time-based rules (provisioning timeout, idle expiry) are noticed at the next resync.
	if changed {
		return ctrl.Result{RequeueAfter: app.RequeueDefault}, nil
	}
	return ctrl.Result{RequeueAfter: app.RequeueLong}, nil
}

// apply carries out p and reports whether it changed anything.
func (r *poolReconciler) apply(ctx context.Context, pool *banlieuev1.VirtualMachinePool,
	vms []banlieuev1.VirtualMachine, p plan, revision string) (bool, error) {
	log := ctrl.LoggerFrom(ctx)
	byName := make(map[string]*banlieuev1.VirtualMachine, len(vms))
	for i := range vms {
		byName[vms[i].Name] = &vms[i]
	}
	changed := false
	for _, d := range p.Deletes {
		vm := byName[d.Name]
		// The planner deletes no claimed member and sees no VM but poolMembers'; this last check
		// stands in case either ever changes, since a wrong delete cannot be undone.
		if vm == nil || !controlledBy(vm, pool) {
			log.Error(nil, "refusing to delete a VM the pool does not control", "member", d.Name, "reason", d.Reason)
			continue
		}
		// The preconditions make the delete lose any race with a claim binding this member after
		// the list: a claimed member must never be deleted by its pool.
		err := r.client.Delete(ctx, vm, client.PropagationPolicy(metav1.DeletePropagationBackground),
			client.Preconditions{UID: &vm.UID, ResourceVersion: &vm.ResourceVersion})
		switch {
		case apierrors.IsConflict(err):
			log.V(1).Info("member changed since it was listed; deciding again", "member", d.Name)
			changed = true
		case client.IgnoreNotFound(err) != nil:
			return changed, fmt.Errorf("deleting member %s: %w", d.Name, err)
		default:
			log.Info("deleted pool member", "member", d.Name, "reason", d.Reason)
			changed = true
		}
	}
	for _, address := range p.Creates {
		vm, err := newMember(pool, revision, address, r.client.Scheme())
		if err != nil {
			return changed, err
		}
		if err := r.client.Create(ctx, vm, client.FieldOwner(banlieuev1.FieldManagerPoolController)); err != nil {
			return changed, fmt.Errorf("creating a member of pool %s: %w", pool.Name, err)
		}
		log.Info("created pool member", "member", vm.Name, "address", address)
		changed = true
	}
	return changed, nil
}

// writeStatus applies status even when it equals the cached pool's: the pool ignores its own
// status events, so a cached copy that has not yet seen the last write can equal a status the
// API server no longer holds (counts flip back as members turn Ready), and skipping would leave
// the older status standing until the long resync. An apply that changes nothing is not stored.
func (r *poolReconciler) writeStatus(ctx context.Context, pool *banlieuev1.VirtualMachinePool, status *banlieuev1.VirtualMachinePoolStatus) error {
	return client.IgnoreNotFound(ssa.ApplyStatus(ctx, r.client, pool, status, banlieuev1.FieldManagerPoolController))
}

// seconds converts a spec's seconds, saturating: a huge timeout means "never", not a negative one.
func seconds(s int64) time.Duration {
	if s > int64(math.MaxInt64/time.Second) {
		return math.MaxInt64
	}
	return time.Duration(s) * time.Second
}
