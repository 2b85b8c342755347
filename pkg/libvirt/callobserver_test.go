package libvirt

import (
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"banlieue.io/banlieue/pkg/libvirt/internal/wire"
)

type observed struct {
	procedure string
	elapsed   time.Duration
	err       error
}

// callLog is a CallObserver that keeps what it is told.
type callLog struct {
	mu    sync.Mutex
	calls []observed
}

func (l *callLog) observe(procedure string, elapsed time.Duration, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.calls = append(l.calls, observed{procedure, elapsed, err})
}

func (l *callLog) snapshot() []observed {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.calls)
}

// The observer is told of every call once, in order, by the name errors use, with the error
// the caller got: the session's own calls, a success, libvirtd's refusal and a timeout.
func TestCallObserverSeesEveryCallOnce(t *testing.T) {
	f := startFake(t, func(s *fakeSession) {
		for {
			h, _, err := s.read()
			if err != nil {
				return
			}
			switch procedure(h.Procedure) {
			case procConnectGetLibVersion:
				time.Sleep(20 * time.Millisecond)
				s.reply(h, wire.OK, libVersionReply(9000000))
			case procStoragePoolLookupByName:
				s.replyError(h, ErrNoStoragePool, "Storage pool not found")
			case procDomainGetState:
				// never answered: the call times out
			}
		}
	})
	var log callLog
	d := f.dialer()
	d.Timeout = 300 * time.Millisecond
	d.Observer = log.observe
	c, err := d.Dial(testContext(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.fail("close", ErrConnectionClosed) })
	ctx := testContext(t)
	if _, err := c.LibVersion(ctx); err != nil {
		t.Fatal(err)
	}
	_, lookupErr := c.StoragePoolLookupByName(ctx, "x")
	_, _, stateErr := c.DomainState(ctx, Domain{Name: "vm"})

	got := log.snapshot()
	want := []string{"AUTH_LIST", "CONNECT_OPEN", "CONNECT_GET_LIB_VERSION", "STORAGE_POOL_LOOKUP_BY_NAME", "DOMAIN_GET_STATE"}
	if len(got) != len(want) {
		t.Fatalf("observed %d calls %v, want %v", len(got), got, want)
	}
	for i, o := range got {
		if o.procedure != want[i] {
			t.Errorf("call %d observed as %q, want %q", i, o.procedure, want[i])
		}
		if !slices.Contains(Procedures(), o.procedure) {
			t.Errorf("%q is not among Procedures()", o.procedure)
		}
	}
	if got[2].err != nil || got[2].elapsed < 20*time.Millisecond {
		t.Errorf("LibVersion observed as %v after %v, want nil after ≥ 20ms", got[2].err, got[2].elapsed)
	}
	var le *Error
	if !errors.As(got[3].err, &le) || got[3].err != lookupErr {
		t.Errorf("lookup observed with %v, want the caller's *Error %v", got[3].err, lookupErr)
	}
	var te *TimeoutError
	if !errors.As(got[4].err, &te) || got[4].err != stateErr || got[4].elapsed < 300*time.Millisecond {
		t.Errorf("DOMAIN_GET_STATE observed with %v after %v, want the caller's timeout after ≥ 300ms", got[4].err, got[4].elapsed)
	}
}

func TestProceduresSortedAndNamed(t *testing.T) {
	p := Procedures()
	if !slices.IsSorted(p) || len(p) != len(procedureNames)+1 || !slices.Contains(p, "QEMU_DOMAIN_AGENT_COMMAND") {
		t.Fatalf("Procedures() = %v", p)
	}
	for _, n := range p {
		if n == "" || n[0] == 'p' { // "procedure N" is the name of a number outside the table
			t.Errorf("unnamed procedure %q", n)
		}
	}
}
