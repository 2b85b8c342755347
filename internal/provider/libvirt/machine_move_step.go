package libvirt

import (
	"cmp"
	"errors"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	infrav1 "banlieue.io/banlieue/api/infrastructure/v1alpha1"
)

// The machine pass's decisions about spec.migration (docs/adr/0154-live-migration-peer-to-peer-
// over-tls.md): pure functions of the request, the provider's last report and what this
// process runs, so the pass only reads, starts or aborts a move and writes the report.

// moveRole is what this provider is to a machine's requested move.
type moveRole int

const (
	// moveRoleNone: no move is asked, or this provider is neither end of it.
	moveRoleNone moveRole = iota
	// moveRoleSource: the machine is this provider's (providerRef): it runs the move.
	moveRoleSource
	// moveRoleTarget: spec.migration.targetProvider is this provider: it prepares its host.
	moveRoleTarget
)

// moveRoleOf is this provider's (self's) role in m's requested move. A target Provider without
// a namespace is in the machine's, as providerRef's.
func moveRoleOf(m *infrav1.LibvirtMachine, self types.NamespacedName) moveRole {
	if m.Spec.Migration == nil {
		return moveRoleNone
	}
	if m.ProviderKey() == self {
		return moveRoleSource
	}
	t := m.Spec.Migration.TargetProvider
	if (types.NamespacedName{Namespace: cmp.Or(t.Namespace, m.Namespace), Name: t.Name}) == self {
		return moveRoleTarget
	}
	return moveRoleNone
}

// moveAction is what the source's pass does about spec.migration.
type moveAction int

const (
	// moveNothing: no move is asked, or the asked one's report is final.
	moveNothing moveAction = iota
	// moveBegin: report PreparingTarget, then start the move in this process.
	moveBegin
	// moveWait: this process runs the move; look again.
	moveWait
	// moveAbortJob: abort the move this process runs (DOMAIN_ABORT_JOB on the source).
	moveAbortJob
	// moveResume: the report says a move is under way but this process runs none (restarted):
	// converge from what the hosts show (convergeMove), never start it again.
	moveResume
	// moveRefuseAborted: abort was asked before the move started: report Aborted, do nothing.
	moveRefuseAborted
)

func (a moveAction) String() string {
	return [...]string{"nothing", "begin", "wait", "abort", "resume", "aborted before start"}[a]
}

// underWay reports whether a provider's report says the hosts may be mid-move.
func underWay(r *infrav1.LibvirtMachineMigrationStatus) bool {
	return r != nil && (r.Phase == infrav1.MachineMigrationPreparingTarget || r.Phase == infrav1.MachineMigrationMigrating)
}

// decideMoveAction is the source's next action from the request (nil: none), its last report
// and whether this process runs a move of the machine. A request removed while a move runs
// aborts it: the controller removes the request only once the migration is final, or for a VM
// deleted. A report under way of a request removed or replaced resumes from the hosts, so the
// domain ends on exactly one host before anything else starts.
func decideMoveAction(req *infrav1.LibvirtMachineMigration, report *infrav1.LibvirtMachineMigrationStatus, running bool) moveAction {
	switch {
	case running && (req == nil || req.Abort || report == nil || report.MigrationName != req.MigrationName):
		return moveAbortJob
	case running:
		return moveWait
	case underWay(report):
		return moveResume
	case req == nil:
		return moveNothing
	case report != nil && report.MigrationName == req.MigrationName:
		// Final: Succeeded, Failed or Aborted, reported once; a new move needs a new name.
		return moveNothing
	case req.Abort:
		return moveRefuseAborted
	}
	return moveBegin
}

// maxMoveMessage is status.migration.message's schema bound; a longer write would be refused.
const maxMoveMessage = 1024

// moveReport is the provider's status.migration for migration name after its move ended: the
// move's result, or err (a *moveError names the step and reason: Aborted reports Aborted,
// anything else Failed).
func moveReport(name string, res moveResult, err error) *infrav1.LibvirtMachineMigrationStatus {
	r := &infrav1.LibvirtMachineMigrationStatus{MigrationName: name, Phase: infrav1.MachineMigrationSucceeded}
	if err != nil {
		r.Phase, r.Message = infrav1.MachineMigrationFailed, clipMessage(err.Error())
		var me *moveError
		if errors.As(err, &me) && me.Reason == reasonMoveAborted {
			r.Phase = infrav1.MachineMigrationAborted
		}
		if !errors.As(err, &me) || me.Step != stepCleanSource {
			return r
		}
		// Failed cleaning the source: the domain runs on the target, and its timings are real.
	}
	if res.Total > 0 {
		r.TotalMilliseconds = ptr.To(res.Total.Milliseconds())
		r.DowntimeMilliseconds = ptr.To(max(res.Downtime, 0).Milliseconds())
	}
	return r
}

// clipMessage bounds a message to maxMoveMessage bytes on a rune boundary.
func clipMessage(s string) string {
	if len(s) <= maxMoveMessage {
		return s
	}
	const more = "…"
	s = s[:maxMoveMessage-len(more)]
	for !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s + more
}

// resumeReport is the report after a resumed pass found where an interrupted move stands:
// nil keeps the report as it is (the move still runs), an under-way report that says why for a
// domain no host is known to run (nothing is touched), else the final report. aborted is
// whether the request asked to abort.
func resumeReport(name string, out moveOutcome, aborted bool) *infrav1.LibvirtMachineMigrationStatus {
	switch out {
	case moveUnclear:
		return &infrav1.LibvirtMachineMigrationStatus{MigrationName: name, Phase: infrav1.MachineMigrationMigrating,
			Message: "the provider was interrupted mid-move: the domain does not run on the source, and the target has not " +
				"reported it running there (status.migrationTarget.phase Received); nothing is touched until a host shows it"}
	case moveDone:
		return &infrav1.LibvirtMachineMigrationStatus{MigrationName: name, Phase: infrav1.MachineMigrationSucceeded}
	case moveStayed:
		reason := reasonMoveFailed
		if aborted {
			reason = reasonMoveAborted
		}
		return moveReport(name, moveResult{}, &moveError{Step: stepMigrate, Reason: reason,
			Err: errors.New("the provider was interrupted mid-move; the domain runs on its source, and the target releases what it prepared")})
	}
	return nil
}
