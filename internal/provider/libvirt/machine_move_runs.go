package libvirt

import (
	"context"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// moveRuns are the live moves this process runs, by machine UID. A move lasts longer than a
// pass (the copy takes seconds to minutes), so a pass starts it here and later passes find it
// running (decideMoveAction's running), abort it, or collect its end to report it; an end is
// kept until a pass has written it, so a failed write loses nothing.
type moveRuns struct {
	mu   sync.Mutex
	runs map[types.UID]*moveRun
}

type moveRun struct {
	name    string
	abort   chan struct{}
	aborted bool
	ended   bool
	res     moveResult
	err     error
}

// moveRunLimit bounds a move this process runs, whatever its migration's timeout (at most a
// day): the controller's timeout aborts it first.
const moveRunLimit = 25 * time.Hour

// start runs move for the machine uid under migration name unless one runs or waits to be
// reported already (false). move gets its own deadline, not a pass's, and a channel closed
// on abort; ended is called once it returns, to bring a pass that reports it.
func (m *moveRuns) start(uid types.UID, name string, move func(context.Context, <-chan struct{}) (moveResult, error), ended func()) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.runs[uid]; ok {
		return false
	}
	if m.runs == nil {
		m.runs = map[types.UID]*moveRun{}
	}
	r := &moveRun{name: name, abort: make(chan struct{})}
	m.runs[uid] = r
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), moveRunLimit)
		res, err := move(ctx, r.abort)
		cancel()
		m.mu.Lock()
		r.res, r.err, r.ended = res, err, true
		m.mu.Unlock()
		if ended != nil {
			ended()
		}
	}()
	return true
}

// running is the migration name of the move that runs for uid, if one does.
func (m *moveRuns) running(uid types.UID) (string, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r, ok := m.runs[uid]
	if !ok || r.ended {
		return "", false
	}
	return r.name, true
}

// abort asks the move that runs for uid to abort; asking twice, or after its end, is harmless.
func (m *moveRuns) abort(uid types.UID) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if r, ok := m.runs[uid]; ok && !r.aborted && !r.ended {
		r.aborted = true
		close(r.abort)
	}
}

// ended is the end of uid's move, not yet reported: its migration name, result and error.
func (m *moveRuns) ended(uid types.UID) (name string, res moveResult, err error, ok bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r, found := m.runs[uid]
	if !found || !r.ended {
		return "", moveResult{}, nil, false
	}
	return r.name, r.res, r.err, true
}

// forget drops uid's ended move of migration name once its report is written; a move that
// runs, or of another name, stays.
func (m *moveRuns) forget(uid types.UID, name string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if r, ok := m.runs[uid]; ok && r.ended && r.name == name {
		delete(m.runs, uid)
	}
}

// has reports whether uid has a move running or ended and not yet reported.
func (m *moveRuns) has(uid types.UID) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	_, ok := m.runs[uid]
	return ok
}
