package libvirt

import (
	"errors"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	infrav1 "banlieue.io/banlieue/api/infrastructure/v1alpha1"
)

func TestMoveRoleOf(t *testing.T) {
	machine := func(ref *infrav1.ProviderReference, target *infrav1.ProviderReference) *infrav1.LibvirtMachine {
		m := &infrav1.LibvirtMachine{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web"}}
		m.Spec.ProviderRef = ref
		if target != nil {
			m.Spec.Migration = &infrav1.LibvirtMachineMigration{MigrationName: "mv", TargetProvider: *target}
		}
		return m
	}
	a := &infrav1.ProviderReference{Name: "a"}
	b := &infrav1.ProviderReference{Name: "b"}
	bFleet := &infrav1.ProviderReference{Name: "b", Namespace: "fleet"}
	for _, tc := range []struct {
		name string
		m    *infrav1.LibvirtMachine
		self types.NamespacedName
		want moveRole
	}{
		{"no request", machine(a, nil), types.NamespacedName{Namespace: "ns", Name: "a"}, moveRoleNone},
		{"source", machine(a, b), types.NamespacedName{Namespace: "ns", Name: "a"}, moveRoleSource},
		{"target in the machine's namespace", machine(a, b), types.NamespacedName{Namespace: "ns", Name: "b"}, moveRoleTarget},
		{"target of another namespace", machine(a, bFleet), types.NamespacedName{Namespace: "fleet", Name: "b"}, moveRoleTarget},
		{"same name, other namespace", machine(a, bFleet), types.NamespacedName{Namespace: "ns", Name: "b"}, moveRoleNone},
		{"neither end", machine(a, b), types.NamespacedName{Namespace: "ns", Name: "c"}, moveRoleNone},
	} {
		if got := moveRoleOf(tc.m, tc.self); got != tc.want {
			t.Errorf("%s: role %d, want %d", tc.name, got, tc.want)
		}
	}
}

func TestDecideMoveAction(t *testing.T) {
	req := &infrav1.LibvirtMachineMigration{MigrationName: "mv", TargetProvider: infrav1.ProviderReference{Name: "b"}}
	abort := &infrav1.LibvirtMachineMigration{MigrationName: "mv", TargetProvider: infrav1.ProviderReference{Name: "b"}, Abort: true}
	other := &infrav1.LibvirtMachineMigration{MigrationName: "mv2", TargetProvider: infrav1.ProviderReference{Name: "b"}}
	rep := func(name string, p infrav1.LibvirtMachineMigrationPhase) *infrav1.LibvirtMachineMigrationStatus {
		return &infrav1.LibvirtMachineMigrationStatus{MigrationName: name, Phase: p}
	}
	for _, tc := range []struct {
		name    string
		req     *infrav1.LibvirtMachineMigration
		report  *infrav1.LibvirtMachineMigrationStatus
		running bool
		want    moveAction
	}{
		{"nothing asked", nil, nil, false, moveNothing},
		{"final report kept once the request is gone", nil, rep("mv", infrav1.MachineMigrationSucceeded), false, moveNothing},
		{"new request", req, nil, false, moveBegin},
		{"new request after another's final report", other, rep("mv", infrav1.MachineMigrationFailed), false, moveBegin},
		{"abort before start", abort, nil, false, moveRefuseAborted},
		{"running", req, rep("mv", infrav1.MachineMigrationMigrating), true, moveWait},
		{"running, abort asked", abort, rep("mv", infrav1.MachineMigrationMigrating), true, moveAbortJob},
		{"running, request removed", nil, rep("mv", infrav1.MachineMigrationMigrating), true, moveAbortJob},
		{"running, request replaced", other, rep("mv", infrav1.MachineMigrationMigrating), true, moveAbortJob},
		{"running, report not yet written", req, nil, true, moveAbortJob},
		{"restarted mid-move", req, rep("mv", infrav1.MachineMigrationMigrating), false, moveResume},
		{"restarted while preparing", req, rep("mv", infrav1.MachineMigrationPreparingTarget), false, moveResume},
		{"restarted, abort asked", abort, rep("mv", infrav1.MachineMigrationMigrating), false, moveResume},
		{"restarted, request removed", nil, rep("mv", infrav1.MachineMigrationMigrating), false, moveResume},
		{"restarted, request replaced: the old move first", other, rep("mv", infrav1.MachineMigrationMigrating), false, moveResume},
		{"succeeded: never again under the same name", req, rep("mv", infrav1.MachineMigrationSucceeded), false, moveNothing},
		{"failed: never again under the same name", req, rep("mv", infrav1.MachineMigrationFailed), false, moveNothing},
		{"aborted, abort still asked", abort, rep("mv", infrav1.MachineMigrationAborted), false, moveNothing},
	} {
		if got := decideMoveAction(tc.req, tc.report, tc.running); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, got, tc.want)
		}
	}
}

// A move never begins twice under one name, and one under way is never left unattended: for
// every request, report and running state, begin only without a report of that name, and
// nothing only when no move can be mid-way.
func TestDecideMoveActionInvariants(t *testing.T) {
	reqs := []*infrav1.LibvirtMachineMigration{nil, {MigrationName: "mv"}, {MigrationName: "mv", Abort: true}, {MigrationName: "mv2"}}
	reports := []*infrav1.LibvirtMachineMigrationStatus{nil}
	for _, name := range []string{"mv", "mv2"} {
		for _, p := range []infrav1.LibvirtMachineMigrationPhase{infrav1.MachineMigrationPreparingTarget, infrav1.MachineMigrationMigrating,
			infrav1.MachineMigrationSucceeded, infrav1.MachineMigrationFailed, infrav1.MachineMigrationAborted} {
			reports = append(reports, &infrav1.LibvirtMachineMigrationStatus{MigrationName: name, Phase: p})
		}
	}
	for _, req := range reqs {
		for _, rep := range reports {
			for _, running := range []bool{false, true} {
				got := decideMoveAction(req, rep, running)
				if got == moveBegin && (req == nil || req.Abort || running || rep != nil && rep.MigrationName == req.MigrationName || underWay(rep)) {
					t.Errorf("req %+v report %+v running %v: begins", req, rep, running)
				}
				if got == moveNothing && (running || underWay(rep)) {
					t.Errorf("req %+v report %+v running %v: leaves a move under way unattended", req, rep, running)
				}
				if running && got != moveWait && got != moveAbortJob {
					t.Errorf("req %+v report %+v running %v: %s while a move runs", req, rep, running, got)
				}
			}
		}
	}
}

func TestMoveReport(t *testing.T) {
	ok := moveReport("mv", moveResult{Total: 9500 * time.Millisecond, Downtime: 205 * time.Millisecond}, nil)
	if ok.Phase != infrav1.MachineMigrationSucceeded || *ok.TotalMilliseconds != 9500 || *ok.DowntimeMilliseconds != 205 || ok.Message != "" {
		t.Errorf("succeeded: %+v", ok)
	}
	failed := moveReport("mv", moveResult{}, &moveError{Step: stepPrepareTarget, Reason: reasonBaseImageMissing, Err: errors.New("no base")})
	if failed.Phase != infrav1.MachineMigrationFailed || failed.Message != "PreparingTarget: BaseImageMissing: no base" || failed.TotalMilliseconds != nil {
		t.Errorf("failed: %+v", failed)
	}
	aborted := moveReport("mv", moveResult{}, &moveError{Step: stepMigrate, Reason: reasonMoveAborted, Err: errors.New("operation aborted")})
	if aborted.Phase != infrav1.MachineMigrationAborted || !strings.HasPrefix(aborted.Message, "Migrating: Aborted: ") {
		t.Errorf("aborted: %+v", aborted)
	}
	// The domain runs on the target though the source was not cleaned: the timings are real.
	clean := moveReport("mv", moveResult{Total: time.Second, Downtime: 300 * time.Millisecond},
		&moveError{Step: stepCleanSource, Reason: reasonMoveFailed, Err: errors.New("busy")})
	if clean.Phase != infrav1.MachineMigrationFailed || clean.TotalMilliseconds == nil || *clean.DowntimeMilliseconds != 300 {
		t.Errorf("clean-up failed: %+v", clean)
	}
	plain := moveReport("mv", moveResult{}, errors.New("boom"))
	if plain.Phase != infrav1.MachineMigrationFailed || plain.Message != "boom" {
		t.Errorf("plain error: %+v", plain)
	}
	long := moveReport("mv", moveResult{}, errors.New(strings.Repeat("é", 2000)))
	if len(long.Message) > maxMoveMessage || !utf8.ValidString(long.Message) || !strings.HasSuffix(long.Message, "…") {
		t.Errorf("long message: %d bytes, valid %v", len(long.Message), utf8.ValidString(long.Message))
	}
}

func TestResumeReport(t *testing.T) {
	if r := resumeReport("mv", moveUnderWay, false); r != nil {
		t.Errorf("under way: %+v", r)
	}
	if r := resumeReport("mv", moveUnclear, false); r == nil || r.Phase != infrav1.MachineMigrationMigrating ||
		!strings.Contains(r.Message, "does not run on the source") {
		t.Errorf("unclear: %+v, want Migrating with a message that says where the domain is not", r)
	}
	if r := resumeReport("mv", moveDone, false); r.Phase != infrav1.MachineMigrationSucceeded {
		t.Errorf("done: %+v", r)
	}
	if r := resumeReport("mv", moveStayed, false); r.Phase != infrav1.MachineMigrationFailed || !strings.HasPrefix(r.Message, "Migrating: MigrationFailed: ") {
		t.Errorf("stayed: %+v", r)
	}
	if r := resumeReport("mv", moveStayed, true); r.Phase != infrav1.MachineMigrationAborted || !strings.HasPrefix(r.Message, "Migrating: Aborted: ") {
		t.Errorf("stayed, aborted: %+v", r)
	}
}

func TestResumeWithTarget(t *testing.T) {
	rec := func(name string, phase infrav1.LibvirtMachineMigrationTargetPhase) *infrav1.LibvirtMachineMigrationTargetStatus {
		return &infrav1.LibvirtMachineMigrationTargetStatus{MigrationName: name, Phase: phase}
	}
	asked := &infrav1.LibvirtMachineMigration{MigrationName: "mv"}
	for _, tc := range []struct {
		name   string
		source moveOutcome
		req    *infrav1.LibvirtMachineMigration
		rec    *infrav1.LibvirtMachineMigrationTargetStatus
		want   moveOutcome
	}{
		{"neither host known to run it", moveUnclear, asked, rec("mv", infrav1.MachineMigrationTargetPrepared), moveUnclear},
		{"no record", moveUnclear, asked, nil, moveUnclear},
		{"the target received it", moveUnclear, asked, rec("mv", infrav1.MachineMigrationTargetReceived), moveDone},
		{"received, but the request was removed: no handover would follow", moveUnclear, nil,
			rec("mv", infrav1.MachineMigrationTargetReceived), moveUnclear},
		{"received, but the request was replaced", moveUnclear, &infrav1.LibvirtMachineMigration{MigrationName: "mv2"},
			rec("mv", infrav1.MachineMigrationTargetReceived), moveUnclear},
		{"a record of another move", moveUnclear, asked, rec("mv0", infrav1.MachineMigrationTargetReceived), moveUnclear},
		{"a job on the source wins", moveUnderWay, asked, rec("mv", infrav1.MachineMigrationTargetReceived), moveUnderWay},
		{"running on the source wins", moveStayed, asked, rec("mv", infrav1.MachineMigrationTargetReceived), moveStayed},
	} {
		if got := resumeWithTarget(tc.source, tc.req, tc.rec, "mv"); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, got, tc.want)
		}
	}
}
