package libvirt

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/types"

	infrav1 "banlieue.io/banlieue/api/infrastructure/v1alpha1"
	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
	"banlieue.io/banlieue/pkg/libvirt"
)

// The source's half of a live move (docs/adr/0154-live-migration-peer-to-peer-over-tls.md,
// "Handover and providerRef"): once the target reports its host prepared
// (status.migrationTarget), the source's provider runs the peer-to-peer migration from its own
// connection alone (its libvirtd dials the target's with the hosts' own trust) and cleans the
// source. What the target made is the target's to release.

// moveDest is the prepared target as its record tells it.
type moveDest struct {
	uri, address, poolPath string
}

// preparedTarget is the target's record for migration name when it is Prepared (ok), or the
// failure it reports (a *moveError), or neither yet.
func preparedTarget(m *infrav1.LibvirtMachine) (dest moveDest, ok bool, failed error) {
	req, rec := m.Spec.Migration, m.Status.MigrationTarget
	if req == nil || rec == nil || rec.MigrationName != req.MigrationName ||
		(types.NamespacedName{Namespace: cmp.Or(rec.Provider.Namespace, m.Namespace), Name: rec.Provider.Name}) !=
			(types.NamespacedName{Namespace: cmp.Or(req.TargetProvider.Namespace, m.Namespace), Name: req.TargetProvider.Name}) {
		return moveDest{}, false, nil
	}
	switch rec.Phase {
	case infrav1.MachineMigrationTargetFailed:
		return moveDest{}, false, &moveError{Step: stepPrepareTarget, Reason: cmp.Or(rec.Reason, reasonTargetPreparationFailed),
			Err: fmt.Errorf("the target Provider %s reports: %s", rec.Provider.Name, rec.Message)}
	case infrav1.MachineMigrationTargetPrepared:
		if rec.URI == "" || rec.Address == "" || rec.PoolPath == "" {
			return moveDest{}, false, &moveError{Step: stepPrepareTarget, Reason: reasonTargetPreparationFailed,
				Err: errors.New("the target's record is Prepared without its uri, address and poolPath")}
		}
		return moveDest{uri: rec.URI, address: rec.Address, poolPath: rec.PoolPath}, true, nil
	}
	return moveDest{}, false, nil
}

// movePlanOf is what moves of m: its disks' volumes and seed, its networks mapped from the
// source Provider's names to the target's through their network classes, and the ownership
// record naming the target Provider.
func movePlanOf(m *infrav1.LibvirtMachine, src, dst *banlieuev1.Provider) (movePlan, error) {
	plan := movePlan{Domain: m.Spec.DomainName, Seed: seedVolume(m.Spec.DomainName), Networks: map[string]string{}}
	for _, d := range m.Spec.Disks {
		plan.Disks = append(plan.Disks, diskVolume(m.Spec.DomainName, d.Name))
	}
	for i, nic := range m.Spec.Network {
		key := targetNetwork
		if nic.Source.Kind == infrav1.SourceBridge {
			key = targetBridge
		}
		j := slices.IndexFunc(src.Spec.Capabilities.NetworkClasses, func(c banlieuev1.NetworkClassMapping) bool {
			return targetIs(c.Target, key, nic.Source.Name)
		})
		if j < 0 {
			return plan, &moveError{Step: stepPrepareTarget, Reason: reasonNetworkUnmapped,
				Err: fmt.Errorf("spec.network[%d]: %s %q is the target of no network class of the source Provider", i, key, nic.Source.Name)}
		}
		class := src.Spec.Capabilities.NetworkClasses[j].Name
		k := slices.IndexFunc(dst.Spec.Capabilities.NetworkClasses, func(c banlieuev1.NetworkClassMapping) bool {
			return c.Name == class && c.Target[key] != ""
		})
		if k < 0 {
			return plan, &moveError{Step: stepPrepareTarget, Reason: reasonNetworkUnmapped,
				Err: fmt.Errorf("spec.network[%d]: network class %s has no %s on the target Provider %s", i, class, key, dst.Name)}
		}
		plan.Networks[nic.Source.Name] = dst.Spec.Capabilities.NetworkClasses[k].Target[key]
	}
	plan.Owner = Owner{UID: string(m.UID), Namespace: m.Namespace, Name: m.Name, Provider: dst.Name}
	if dst.Namespace != m.Namespace {
		plan.Owner.ProviderNamespace = dst.Namespace
	}
	return plan, nil
}

// moveFromSource moves the running domain dom from src to the prepared target dst as plan
// says, from the source's connection alone, and cleans the source once it runs there. abort,
// closed, aborts the copy (DOMAIN_ABORT_JOB): the move then fails Aborted, as when ctx ends.
// Until stepCleanSource the domain runs on its source; the volumes the target made are its to
// release once the failure is reported.
func moveFromSource(ctx context.Context, src moveEnd, dst moveDest, dom libvirt.Domain, plan movePlan,
	abort <-chan struct{}) (moveResult, error) {
	params, err := migrationParams(ctx, src, dst.poolPath, dst.address, dom, plan)
	if err != nil {
		return moveResult{}, err
	}
	if plan.MaxDowntime > 0 {
		if err := src.c.DomainMigrateSetMaxDowntime(ctx, dom, plan.MaxDowntime); err != nil {
			return moveResult{}, &moveError{Step: stepMigrate, Reason: reasonMoveFailed, Err: fmt.Errorf("setting the max downtime: %w", err)}
		}
	}
	if reason, perr := migrate(ctx, src, dom, dst.uri, params, abort); perr != nil {
		// The report releases the target's volumes: only once the source's job is over.
		wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 3*time.Minute)
		defer cancel()
		if err := waitJobEnd(wctx, src, dom); err != nil {
			perr = errors.Join(perr, fmt.Errorf("waiting for the source's migration job to end: %w", err))
		}
		return moveResult{}, &moveError{Step: stepMigrate, Reason: reason, Err: perr}
	}
	res := moveResult{Domain: dom}
	// Not UNDEFINE_SOURCE: the source keeps the definition, and with it the completed job.
	if st, err := src.c.DomainGetJobStats(ctx, dom, libvirt.JobStatsCompleted); err == nil {
		res.Downtime, res.Total = st.Downtime, st.TimeElapsed
	}
	if err := cleanSource(ctx, src, dom, plan); err != nil {
		return res, &moveError{Step: stepCleanSource, Reason: reasonMoveFailed, Err: err}
	}
	return res, nil
}

// resumeFromSource is where an interrupted move stands by what the source alone shows: a job
// runs (under way), the domain runs (it stayed), or neither: unclear, since only the target
// can say whether it runs there (resumeWithTarget); nothing is touched.
func resumeFromSource(ctx context.Context, src moveEnd, dom libvirt.Domain) (moveOutcome, error) {
	v, err := viewOf(ctx, src, dom)
	if err != nil {
		return moveUnclear, fmt.Errorf("the source: %w", err)
	}
	switch {
	case v.Job:
		return moveUnderWay, nil
	case v.Running:
		return moveStayed, nil
	}
	return moveUnclear, nil
}

// resumeWithTarget settles what the source alone left unclear from the target's record: the
// target's provider reports the domain running on its host (Received) for the move still asked
// (req), so the move is done and the handover follows. Without the request no handover would
// follow and the pass would converge the machine on the source again: it stays unclear.
func resumeWithTarget(fromSource moveOutcome, req *infrav1.LibvirtMachineMigration, rec *infrav1.LibvirtMachineMigrationTargetStatus,
	name string) moveOutcome {
	if fromSource == moveUnclear && req != nil && req.MigrationName == name &&
		rec != nil && rec.MigrationName == name && rec.Phase == infrav1.MachineMigrationTargetReceived {
		return moveDone
	}
	return fromSource
}
