package libvirt

import (
	"context"
	"errors"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// TestMoveRuns: a move runs once per machine beyond the pass that starts it, is aborted
// through its channel, and its end is kept until a pass forgets it after writing the report.
func TestMoveRuns(t *testing.T) {
	var runs moveRuns
	const uid = types.UID("u-1")
	woken := make(chan struct{}, 2)
	release := make(chan struct{})
	move := func(ctx context.Context, abort <-chan struct{}) (moveResult, error) {
		if _, ok := ctx.Deadline(); !ok {
			return moveResult{}, errors.New("no deadline")
		}
		select {
		case <-abort:
			return moveResult{}, &moveError{Step: stepMigrate, Reason: reasonMoveAborted, Err: errors.New("aborted")}
		case <-release:
			return moveResult{Total: time.Second, Downtime: 100 * time.Millisecond}, nil
		}
	}
	wake := func() { woken <- struct{}{} }
	if !runs.start(uid, "mv", move, wake) {
		t.Fatal("the first start was refused")
	}
	if runs.start(uid, "mv", move, wake) || runs.start(uid, "mv2", move, wake) {
		t.Fatal("a second move of the same machine started")
	}
	if name, ok := runs.running(uid); !ok || name != "mv" {
		t.Fatalf("running: %q %v", name, ok)
	}
	if _, _, _, ok := runs.ended(uid); ok {
		t.Fatal("ended while running")
	}
	runs.forget(uid, "mv") // a running move is never forgotten
	runs.abort(uid)
	runs.abort(uid) // twice: harmless
	select {
	case <-woken:
	case <-time.After(time.Minute):
		t.Fatal("the aborted move did not end")
	}
	name, _, err, ok := runs.ended(uid)
	var me *moveError
	if !ok || name != "mv" || !errors.As(err, &me) || me.Reason != reasonMoveAborted {
		t.Fatalf("ended: %q %v %v", name, err, ok)
	}
	if _, ok := runs.running(uid); ok {
		t.Fatal("running after its end")
	}
	if runs.start(uid, "mv2", move, wake) {
		t.Fatal("a new move started before the last one's end was reported")
	}
	runs.forget(uid, "other")
	if _, _, _, ok := runs.ended(uid); !ok {
		t.Fatal("forgetting another name dropped the end")
	}
	runs.forget(uid, "mv")
	runs.abort(uid) // nothing runs: harmless

	// The next move completes and reports its timings.
	if !runs.start(uid, "mv2", move, wake) {
		t.Fatal("the next move was refused")
	}
	close(release)
	select {
	case <-woken:
	case <-time.After(time.Minute):
		t.Fatal("the move did not end")
	}
	name, res, err, ok := runs.ended(uid)
	if !ok || name != "mv2" || err != nil || res.Total != time.Second {
		t.Fatalf("ended: %q %+v %v %v", name, res, err, ok)
	}
	if r := moveReport(name, res, err); *r.TotalMilliseconds != 1000 || *r.DowntimeMilliseconds != 100 {
		t.Errorf("report: %+v", r)
	}
}
