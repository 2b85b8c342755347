package pool

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
	"banlieue.io/banlieue/internal/app"
	"banlieue.io/banlieue/internal/finalizer"
	"banlieue.io/banlieue/internal/ssa"
)

// claimReconciler binds a VirtualMachineClaim to one Ready member of its pool, holds it for the
// TTL and then destroys it (docs/guides/virtualmachine-pools.md).
type claimReconciler struct {
	client client.Client
	// apiReader answers the questions a stale cache must not: is a member already labelled
	// for this claim (else a second one could be bound), and is the bound member really gone
	// (else the claim could fail for good, or drop its finalizer, too early).
	apiReader client.Reader
}

func (r *claimReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var claim banlieuev1.VirtualMachineClaim
	if err := r.client.Get(ctx, req.NamespacedName, &claim); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	now := time.Now()
	member, err := r.boundMember(ctx, &claim)
	if err != nil {
		return ctrl.Result{}, err
	}
	snap := claimSnapshot{
		Deleting:     !claim.DeletionTimestamp.IsZero(),
		Expired:      claim.Status.ExpiresAt != nil && !now.Before(claim.Status.ExpiresAt.Time),
		Bound:        claim.Status.VirtualMachineRef != nil,
		MemberExists: member != nil,
	}
	switch nextStep(snap) {
	case stepRelease:
		return r.release(ctx, &claim, member, snap)
	case stepFail:
		return r.fail(ctx, &claim, now)
	case stepHold:
		return r.hold(ctx, &claim, member, now)
	}
	return r.bind(ctx, &claim, now)
}

// boundMember is the member the claim is bound to, or nil when unbound or when the member is
// gone. A VM under the recorded name that the claim did not take (the name reused after the
// member went) is not it: the claim would mirror and then destroy a stranger. Absence is
// confirmed against the API server, since it makes a claim fail for good, and so is a cached
// copy that does not look taken: it may predate the take.
func (r *claimReconciler) boundMember(ctx context.Context, claim *banlieuev1.VirtualMachineClaim) (*banlieuev1.VirtualMachine, error) {
	ref := claim.Status.VirtualMachineRef
	if ref == nil {
		return nil, nil
	}
	key := client.ObjectKey{Namespace: claim.Namespace, Name: ref.Name}
	vm := &banlieuev1.VirtualMachine{}
	err := r.client.Get(ctx, key, vm)
	if apierrors.IsNotFound(err) || err == nil && !takenBy(vm, claim) {
		vm = &banlieuev1.VirtualMachine{}
		err = r.apiReader.Get(ctx, key, vm)
	}
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("getting bound member %s: %w", ref.Name, err)
	case !takenBy(vm, claim):
		return nil, nil
	}
	return vm, nil
}

// release destroys the member and then lets the claim go: the finalizer comes off a deleted
// claim, an expired one is deleted (and comes back here to drop its finalizer). Only VMs the
// claim took are destroyed (takenBy); a VM that merely carries the claim's label stays.
func (r *claimReconciler) release(ctx context.Context, claim *banlieuev1.VirtualMachineClaim,
	member *banlieuev1.VirtualMachine, snap claimSnapshot) (ctrl.Result, error) {
	// Members the claim took but never recorded (a bind that lost a race with another controller
	// instance) go too; they were never handed out.
	extras, err := r.strayMembers(ctx, r.apiReader, claim)
	if err != nil {
		return ctrl.Result{}, err
	}
	if err := r.deleteMembers(ctx, extras); err != nil {
		return ctrl.Result{}, err
	}
	if member != nil {
		if err := r.deleteMembers(ctx, []banlieuev1.VirtualMachine{*member}); err != nil {
			return ctrl.Result{}, err
		}
		reason := banlieuev1.ReasonReleased
		if !snap.Deleting {
			reason = banlieuev1.ReasonExpired
		}
		err := r.patchStatus(ctx, claim, func(s *banlieuev1.VirtualMachineClaimStatus) {
			s.Phase = banlieuev1.ClaimReleasing
			setBound(s, claim, metav1.ConditionFalse, reason, fmt.Sprintf("destroying member %s", member.Name))
		})
		return ctrl.Result{RequeueAfter: app.RequeueDefault}, err
	}
	if snap.Deleting {
		_, err := finalizer.Remove(ctx, r.client, claim, banlieuev1.FinalizerClaimProtection)
		return ctrl.Result{}, err
	}
	uid := claim.UID
	if err := r.client.Delete(ctx, claim, client.Preconditions{UID: &uid}); client.IgnoreNotFound(err) != nil {
		return ctrl.Result{}, fmt.Errorf("deleting expired claim %s: %w", claim.Name, err)
	}
	return ctrl.Result{RequeueAfter: app.RequeueLong}, nil
}

// fail records that the bound member is gone. A claim is never rebound: its consumer was handed
// that member, its addresses and its nonce, and a different VM under the same claim would be a
// lie. The TTL still ends the claim.
func (r *claimReconciler) fail(ctx context.Context, claim *banlieuev1.VirtualMachineClaim, now time.Time) (ctrl.Result, error) {
	name := claim.Status.VirtualMachineRef.Name
	err := r.patchStatus(ctx, claim, func(s *banlieuev1.VirtualMachineClaimStatus) {
		s.Phase = banlieuev1.ClaimFailed
		setBound(s, claim, metav1.ConditionFalse, banlieuev1.ReasonMemberLost,
			fmt.Sprintf("bound member %s no longer exists; claims are never rebound", name))
	})
	if err != nil || claim.Status.ExpiresAt == nil {
		return ctrl.Result{}, err
	}
	return ctrl.Result{RequeueAfter: max(claim.Status.ExpiresAt.Sub(now), time.Millisecond)}, nil
}

// hold mirrors the bound member's addresses and keeps the claim Bound until it expires.
func (r *claimReconciler) hold(ctx context.Context, claim *banlieuev1.VirtualMachineClaim,
	member *banlieuev1.VirtualMachine, now time.Time) (ctrl.Result, error) {
	extras, err := r.strayMembers(ctx, r.client, claim)
	if err != nil {
		return ctrl.Result{}, err
	}
	if err := r.deleteMembers(ctx, extras); err != nil {
		return ctrl.Result{}, err
	}
	err = r.patchStatus(ctx, claim, func(s *banlieuev1.VirtualMachineClaimStatus) {
		s.Phase = banlieuev1.ClaimBound
		s.Addresses = member.Status.Addresses
		s.TPMEndorsementCertificates = member.Status.TPMEndorsementCertificates
		setBound(s, claim, metav1.ConditionTrue, banlieuev1.ReasonBound, fmt.Sprintf("bound to %s", member.Name))
	})
	return ctrl.Result{RequeueAfter: untilExpiry(claim, now)}, err
}

// bind finishes a bind a previous pass started, or takes a Ready member of the pool, or waits.
func (r *claimReconciler) bind(ctx context.Context, claim *banlieuev1.VirtualMachineClaim, now time.Time) (ctrl.Result, error) {
	// A member this claim already took is its member, whatever the cache says: picking another
	// would bind two.
	taken, err := r.strayMembers(ctx, r.apiReader, claim)
	if err != nil {
		return ctrl.Result{}, err
	}
	if len(taken) > 0 {
		return r.recordBind(ctx, claim, &taken[0], now)
	}

	var pool banlieuev1.VirtualMachinePool
	if err := r.client.Get(ctx, client.ObjectKey{Namespace: claim.Namespace, Name: claim.Spec.PoolRef.Name}, &pool); apierrors.IsNotFound(err) {
		return r.wait(ctx, claim, banlieuev1.ReasonPoolNotFound, fmt.Sprintf("pool %s does not exist", claim.Spec.PoolRef.Name))
	} else if err != nil {
		return ctrl.Result{}, fmt.Errorf("getting pool %s: %w", claim.Spec.PoolRef.Name, err)
	}
	// The label only narrows the list: a VM that merely carries it is not the pool's to hand out.
	var listed banlieuev1.VirtualMachineList
	if err := r.client.List(ctx, &listed, client.InNamespace(claim.Namespace), client.MatchingLabels{banlieuev1.LabelPool: pool.Name}); err != nil {
		return ctrl.Result{}, fmt.Errorf("listing members of pool %s: %w", pool.Name, err)
	}
	vms := poolMembers(&pool, listed.Items)
	members := make([]member, 0, len(vms))
	byName := make(map[string]*banlieuev1.VirtualMachine, len(vms))
	for i := range vms {
		members = append(members, projectMember(&vms[i], pool.Spec.Readiness, now))
		byName[vms[i].Name] = &vms[i]
	}
	name, ok := pickMember(members, pool.Status.ImageRevision)
	if !ok {
		return r.wait(ctx, claim, banlieuev1.ReasonNoMemberAvailable, noMemberMessage(&pool))
	}

	if err := r.ensureFinalizer(ctx, claim); err != nil {
		return conflictOr(err)
	}
	vm := byName[name]
	orig := vm.DeepCopy()
	if err := takeMember(vm, claim, r.client.Scheme()); err != nil {
		return ctrl.Result{}, err
	}
	// The patch carries the member's resourceVersion: of two claims racing for it (or a claim
	// racing the pool's scale-down), exactly one wins and the others look again.
	if err := r.client.Patch(ctx, vm, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); err != nil {
		if apierrors.IsNotFound(err) {
			return ctrl.Result{RequeueAfter: claimConflictRequeue}, nil
		}
		return conflictOr(err)
	}
	ctrl.LoggerFrom(ctx).Info("bound pool member", "member", vm.Name, "pool", pool.Name)
	return r.recordBind(ctx, claim, vm, now)
}

// recordBind writes the binding into the claim's status. The write carries the claim's
// resourceVersion, so a pass working from a stale claim cannot mint a second nonce.
func (r *claimReconciler) recordBind(ctx context.Context, claim *banlieuev1.VirtualMachineClaim,
	vm *banlieuev1.VirtualMachine, now time.Time) (ctrl.Result, error) {
	if err := r.ensureFinalizer(ctx, claim); err != nil {
		return conflictOr(err)
	}
	nonce, err := newNonce()
	if err != nil {
		return ctrl.Result{}, err
	}
	boundAt := metav1.NewTime(now.Truncate(time.Second))
	expiresAt := metav1.NewTime(boundAt.Add(seconds(claim.Spec.TTLSeconds)))
	s := claim.Status.DeepCopy()
	s.Phase = banlieuev1.ClaimBound
	s.VirtualMachineRef = &banlieuev1.LocalObjectReference{Name: vm.Name}
	s.Addresses = vm.Status.Addresses
	s.TPMEndorsementCertificates = vm.Status.TPMEndorsementCertificates
	s.Nonce = nonce
	s.BoundAt, s.ExpiresAt = &boundAt, &expiresAt
	s.ObservedGeneration = claim.Generation
	setBound(s, claim, metav1.ConditionTrue, banlieuev1.ReasonBound, fmt.Sprintf("bound to %s", vm.Name))
	if err := r.applyStatus(ctx, claim, s); err != nil {
		return conflictOr(err)
	}
	return ctrl.Result{RequeueAfter: untilExpiry(claim, now)}, nil
}

// wait records why the claim is still Pending and looks again shortly.
func (r *claimReconciler) wait(ctx context.Context, claim *banlieuev1.VirtualMachineClaim, reason, msg string) (ctrl.Result, error) {
	err := r.patchStatus(ctx, claim, func(s *banlieuev1.VirtualMachineClaimStatus) {
		s.Phase = banlieuev1.ClaimPending
		setBound(s, claim, metav1.ConditionFalse, reason, msg)
	})
	return ctrl.Result{RequeueAfter: claimWaitRequeue}, err
}

// noMemberMessage carries the pool's own Warm explanation, so the claimant sees why the pool is
// empty without reading the pool.
func noMemberMessage(pool *banlieuev1.VirtualMachinePool) string {
	msg := fmt.Sprintf("no Ready, unclaimed member in pool %s ", pool.Name)
	if w := meta.FindStatusCondition(pool.Status.Conditions, banlieuev1.ConditionWarm); w != nil {
		return msg + fmt.Sprintf("(pool: %s: %s)", w.Reason, w.Message)
	}
	return msg + "(pool has not published a Warm condition yet)"
}

// strayMembers lists, through reader, the members the claim took other than the one it recorded.
// The label only narrows the list; strays decides.
func (r *claimReconciler) strayMembers(ctx context.Context, reader client.Reader,
	claim *banlieuev1.VirtualMachineClaim) ([]banlieuev1.VirtualMachine, error) {
	var vms banlieuev1.VirtualMachineList
	if err := reader.List(ctx, &vms, client.InNamespace(claim.Namespace), client.MatchingLabels{banlieuev1.LabelClaim: claim.Name}); err != nil {
		return nil, fmt.Errorf("listing members labelled for claim %s: %w", claim.Name, err)
	}
	return strays(claim, vms.Items), nil
}

// deleteMembers deletes the members not already going away; 404 is fine.
func (r *claimReconciler) deleteMembers(ctx context.Context, vms []banlieuev1.VirtualMachine) error {
	for i := range vms {
		if !vms[i].DeletionTimestamp.IsZero() {
			continue
		}
		err := r.client.Delete(ctx, &vms[i], client.PropagationPolicy(metav1.DeletePropagationBackground))
		if client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("deleting member %s: %w", vms[i].Name, err)
		}
	}
	return nil
}

// patchStatus applies the claim's status as mutate leaves it, skipping the request when nothing
// changed. A write refused because the claim moved (or went) is dropped; the newer claim's
// watch event brings another pass.
func (r *claimReconciler) patchStatus(ctx context.Context, claim *banlieuev1.VirtualMachineClaim,
	mutate func(*banlieuev1.VirtualMachineClaimStatus)) error {
	s := claim.Status.DeepCopy()
	mutate(s)
	s.ObservedGeneration = claim.Generation
	if equality.Semantic.DeepEqual(&claim.Status, s) {
		return nil
	}
	if err := r.applyStatus(ctx, claim, s); !apierrors.IsConflict(err) && !apierrors.IsNotFound(err) {
		return err
	}
	return nil
}

// applyStatus applies s as the claim's whole status and keeps it on claim. The apply carries
// the claim's resourceVersion: the whole status is sent, so a pass working from a stale cached
// claim (one that has not seen the bind yet) would otherwise erase the binding.
func (r *claimReconciler) applyStatus(ctx context.Context, claim *banlieuev1.VirtualMachineClaim,
	s *banlieuev1.VirtualMachineClaimStatus) error {
	if err := ssa.ApplyStatus(ctx, r.client, claim, s, banlieuev1.FieldManagerPoolController, ssa.IfUnchanged); err != nil {
		return err
	}
	claim.Status = *s
	return nil
}

// ensureFinalizer adds the claim's finalizer before anything is bound, so a deleted claim always
// gets to destroy its member.
func (r *claimReconciler) ensureFinalizer(ctx context.Context, claim *banlieuev1.VirtualMachineClaim) error {
	return finalizer.Ensure(ctx, r.client, claim, banlieuev1.FinalizerClaimProtection)
}

func setBound(s *banlieuev1.VirtualMachineClaimStatus, claim *banlieuev1.VirtualMachineClaim,
	status metav1.ConditionStatus, reason, msg string) {
	banlieuev1.SetCondition(&s.Conditions, claim.Generation, metav1.Condition{Type: banlieuev1.ConditionBound, Status: status,
		Reason: reason, Message: msg})
}

// untilExpiry is the default requeue, shortened so the TTL is honoured to the second. It is
// never zero, which would mean no requeue at all.
func untilExpiry(claim *banlieuev1.VirtualMachineClaim, now time.Time) time.Duration {
	if e := claim.Status.ExpiresAt; e != nil {
		return max(min(app.RequeueDefault, e.Sub(now)), time.Millisecond)
	}
	return app.RequeueDefault
}

// conflictOr turns a lost optimistic race into the short requeue of docs/guides/virtualmachine-pools.md; any other error
// goes to the error policy.
func conflictOr(err error) (ctrl.Result, error) {
	if apierrors.IsConflict(err) {
		return ctrl.Result{RequeueAfter: claimConflictRequeue}, nil
	}
	return ctrl.Result{}, err
}
