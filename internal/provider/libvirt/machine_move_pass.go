package libvirt

import (
	"context"
	"errors"
	"fmt"
	"path"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log"

	infrav1 "banlieue.io/banlieue/api/infrastructure/v1alpha1"
	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
	"banlieue.io/banlieue/pkg/libvirt"
)

// phaseMove is the pass's step for a live move of the machine.
const phaseMove = "moving the domain live"

// moveLook is how often a pass looks at a move under way or waiting for its target.
const moveLook = 5 * time.Second

// leftSource reports whether the source's report says the domain left the source host: moved
// with the handover pending (Succeeded, the request still there: the handover removes it), or
// moved with the source not yet clean. The pass must not converge then: it would make the
// domain again on the source.
func leftSource(m *infrav1.LibvirtMachine) bool {
	req, r := m.Spec.Migration, m.Status.Migration
	switch {
	case r == nil:
		return false
	case r.Phase == infrav1.MachineMigrationFailed && strings.HasPrefix(r.Message, stepCleanSource+":"):
		return true
	}
	return r.Phase == infrav1.MachineMigrationSucceeded && req != nil && req.MigrationName == r.MigrationName
}

// move is the pass's handling of spec.migration when this Provider is the source: it starts,
// watches, aborts, resumes or reports the move (decideMoveAction) and writes status.migration
// with the pass's one status write. done is false when the pass goes on to converge the domain
// as usual (no move, or the target not prepared yet: the domain runs on the source).
func (s *machineScope) move(ctx context.Context, c *libvirt.Client) (res ctrl.Result, done bool, err error) {
	r, m := s.r, s.machine
	s.phase = phaseMove
	again := ctrl.Result{RequeueAfter: moveLook}
	report := func(rep *infrav1.LibvirtMachineMigrationStatus) (ctrl.Result, bool, error) {
		st := *m.Status.DeepCopy()
		st.Migration = rep
		res, err := s.stop(ctx, &st, again)
		return res, true, err
	}
	if name, mres, merr, ok := r.moves.ended(m.UID); ok {
		res, done, err := report(moveReport(name, mres, merr))
		if err == nil {
			r.moves.forget(m.UID, name)
			log.FromContext(ctx).Info("live move ended", "migration", name, "error", fmt.Sprint(merr))
		}
		return res, done, err
	}
	_, running := r.moves.running(m.UID)
	req, rep := m.Spec.Migration, m.Status.Migration
	action := decideMoveAction(req, rep, running)
	switch action {
	case moveNothing:
		if leftSource(m) {
			if rep.Phase == infrav1.MachineMigrationFailed {
				// The domain runs on the target; the source's clean-up is finished before the
				// handover.
				if _, dom, err := ownDomain(ctx, c, m); err == nil && dom.Name != "" {
					srcEnd, err := s.sourceEnd(ctx, c)
					if err == nil {
						if err := cleanSource(ctx, srcEnd, dom, cleanPlanOf(m)); err == nil {
							done := rep.DeepCopy()
							done.Phase, done.Message = infrav1.MachineMigrationSucceeded, ""
							return report(done)
						}
					}
				}
			}
			return again, true, nil
		}
		return ctrl.Result{}, false, nil
	case moveWait:
		return again, true, nil
	case moveAbortJob:
		r.moves.abort(m.UID)
		return again, true, nil
	case moveRefuseAborted:
		return report(moveReport(req.MigrationName, moveResult{}, &moveError{Step: stepPrepareTarget, Reason: reasonMoveAborted,
			Err: fmt.Errorf("abort was asked before the move started; the domain runs on its source")}))
	case moveResume:
		_, dom, err := ownDomain(ctx, c, m)
		if err != nil {
			return ctrl.Result{}, true, fmt.Errorf("%s: %w", s.phase, err)
		}
		out := moveUnclear
		if dom.Name != "" {
			srcEnd, err := s.sourceEnd(ctx, c)
			if err != nil {
				return ctrl.Result{}, true, err
			}
			if out, err = resumeFromSource(ctx, srcEnd, dom); err != nil {
				return ctrl.Result{}, true, fmt.Errorf("%s: resuming migration %s: %w", s.phase, rep.MigrationName, err)
			}
		}
		if out = resumeWithTarget(out, req, m.Status.MigrationTarget, rep.MigrationName); out == moveDone {
			if err := s.cleanMovedSource(ctx, c, dom); err != nil {
				return ctrl.Result{}, true, fmt.Errorf("%s: resuming migration %s: %s: %w", s.phase, rep.MigrationName, stepCleanSource, err)
			}
		}
		if next := resumeReport(rep.MigrationName, out, req != nil && req.Abort); next != nil {
			return report(next)
		}
		log.FromContext(ctx).Info("live move interrupted; its migration job still runs on the source", "migration", rep.MigrationName)
		return again, true, nil
	}

	// moveBegin: once the target reports its host prepared.
	dest, ok, failed := preparedTarget(m)
	if failed != nil {
		return report(moveReport(req.MigrationName, moveResult{}, failed))
	}
	if !ok {
		// The domain runs on as usual meanwhile; the target's record is not a change the
		// machine's watch passes on, hence the look again.
		return ctrl.Result{}, false, nil
	}
	var target banlieuev1.Provider
	key := req.TargetProvider
	if key.Namespace == "" {
		key.Namespace = m.Namespace
	}
	if err := r.APIReader.Get(ctx, types.NamespacedName{Namespace: key.Namespace, Name: key.Name}, &target); err != nil {
		return report(moveReport(req.MigrationName, moveResult{}, &moveError{Step: stepPrepareTarget, Reason: reasonMoveFailed,
			Err: fmt.Errorf("reading the target Provider %s/%s: %w", key.Namespace, key.Name, err)}))
	}
	plan, err := movePlanOf(m, &s.provider, &target)
	if err != nil {
		return report(moveReport(req.MigrationName, moveResult{}, err))
	}
	_, dom, err := ownDomain(ctx, c, m)
	if err == nil && dom.Name == "" {
		err = errors.New("not defined")
	}
	if err != nil {
		return report(moveReport(req.MigrationName, moveResult{}, &moveError{Step: stepPrepareTarget, Reason: reasonMoveFailed,
			Err: fmt.Errorf("the machine's domain on the source: %w", err)}))
	}
	def, err := readDefinition(ctx, c, dom)
	if err != nil {
		err = fmt.Errorf("reading the domain's definition: %w", err)
	} else {
		err = checkSeedMACs(m, interfaceMACs(def))
	}
	if err != nil {
		return report(moveReport(req.MigrationName, moveResult{}, &moveError{Step: stepPrepareTarget, Reason: reasonMoveFailed, Err: err}))
	}
	srcEnd, err := s.sourceEnd(ctx, c)
	if err != nil {
		return ctrl.Result{}, true, err
	}
	name := req.MigrationName
	r.moves.start(m.UID, name, func(ctx context.Context, abort <-chan struct{}) (moveResult, error) {
		return moveFromSource(ctx, srcEnd, dest, dom, plan, abort)
	}, nil)
	log.FromContext(ctx).Info("live move started", "migration", name, "target", target.Namespace+"/"+target.Name, "uri", dest.uri)
	return report(&infrav1.LibvirtMachineMigrationStatus{MigrationName: name, Phase: infrav1.MachineMigrationMigrating})
}

// cleanPlanOf is what cleanSource removes of m from the source: its disks' volumes and seed.
func cleanPlanOf(m *infrav1.LibvirtMachine) movePlan {
	plan := movePlan{Domain: m.Spec.DomainName, Seed: seedVolume(m.Spec.DomainName)}
	for _, d := range m.Spec.Disks {
		plan.Disks = append(plan.Disks, diskVolume(m.Spec.DomainName, d.Name))
	}
	return plan
}

// cleanMovedSource cleans the source of a move found done on resuming: dom is the machine's
// domain on the source, or none when a pass before the restart undefined it already.
func (s *machineScope) cleanMovedSource(ctx context.Context, c *libvirt.Client, dom libvirt.Domain) error {
	m := s.machine
	pool, err := c.StoragePoolLookupByName(ctx, m.Spec.Pool)
	if err != nil {
		return fmt.Errorf("storage pool %s: %w", m.Spec.Pool, err)
	}
	if dom.Name == "" {
		// Looked up by name alone: a domain of the name that is not the machine's (its UUID
		// differs from this zero one) is left alone by cleanSource.
		dom.Name = m.Spec.DomainName
	}
	return cleanSource(ctx, moveEnd{c: c, pool: pool}, dom, cleanPlanOf(m))
}

// sourceEnd is the source host's end of a move: the machine's pool and its directory, read from
// its first disk's volume.
func (s *machineScope) sourceEnd(ctx context.Context, c *libvirt.Client) (moveEnd, error) {
	m := s.machine
	pool, err := c.StoragePoolLookupByName(ctx, m.Spec.Pool)
	if err != nil {
		return moveEnd{}, fmt.Errorf("%s: storage pool %s: %w", s.phase, m.Spec.Pool, err)
	}
	if len(m.Spec.Disks) == 0 {
		return moveEnd{}, fmt.Errorf("%s: the machine has no disk", s.phase)
	}
	v, err := c.StorageVolLookupByName(ctx, pool, diskVolume(m.Spec.DomainName, m.Spec.Disks[0].Name))
	if err != nil {
		return moveEnd{}, fmt.Errorf("%s: the machine's first disk: %w", s.phase, err)
	}
	return moveEnd{c: c, pool: pool, poolPath: path.Dir(v.Key)}, nil
}
