package hostconn

import (
	"context"
	"errors"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"banlieue.io/banlieue/pkg/libvirt"
)

// recorder is an Observer that keeps the last values it was told.
type recorder struct {
	mu       sync.Mutex
	ops      map[Operation][2]int // in flight, queued
	breakers []BreakerState
}

func (r *recorder) HostOperations(_ types.NamespacedName, op Operation, inFlight, queued int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ops == nil {
		r.ops = map[Operation][2]int{}
	}
	r.ops[op] = [2]int{inFlight, queued}
}

func (r *recorder) HostBreaker(_ types.NamespacedName, s BreakerState) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.breakers = append(r.breakers, s)
}

func (r *recorder) HostForgotten(types.NamespacedName) {}

func (r *recorder) op(op Operation) [2]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.ops[op]
}

// TestAcquire: a host gives out its slots up to the limit; a pass that waits is counted as
// queued, gets the slot given back, and gives up at its context's deadline; another host's
// slots are its own.
func TestAcquire(t *testing.T) {
	obs := &recorder{}
	conns := NewConnections()
	conns.Limits = Limits{DomainOperations: 2, VolumeUploads: 1}
	conns.Observer = obs
	a, b := types.NamespacedName{Namespace: "ns", Name: "a"}, types.NamespacedName{Namespace: "ns", Name: "b"}
	ctx := context.Background()

	r1, err := conns.Acquire(ctx, a, OperationDomain)
	if err != nil {
		t.Fatal(err)
	}
	r2, err := conns.Acquire(ctx, a, OperationDomain)
	if err != nil {
		t.Fatal(err)
	}
	if got := obs.op(OperationDomain); got != [2]int{2, 0} {
		t.Errorf("in flight, queued = %v, want [2 0]", got)
	}
	// Another host, and another operation of the same host, are not held up.
	for _, tc := range []struct {
		provider types.NamespacedName
		op       Operation
	}{{b, OperationDomain}, {a, OperationUpload}} {
		short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
		r, err := conns.Acquire(short, tc.provider, tc.op)
		cancel()
		if err != nil {
			t.Fatalf("%s %s: %v", tc.provider, tc.op, err)
		}
		r()
	}

	// A third pass waits, queued, and is let in when a slot is given back.
	got := make(chan error, 1)
	go func() {
		r3, err := conns.Acquire(ctx, a, OperationDomain)
		if err == nil {
			r3()
		}
		got <- err
	}()
	waitFor(t, func() bool { return obs.op(OperationDomain) == [2]int{2, 1} }, "the third pass queued")
	r1()
	if err := <-got; err != nil {
		t.Fatalf("the queued pass: %v", err)
	}
	waitFor(t, func() bool { return obs.op(OperationDomain) == [2]int{1, 0} }, "one slot in flight, none queued")

	// A pass that cannot get a slot before its deadline gives up, naming the wait.
	r4, err := conns.Acquire(ctx, a, OperationDomain)
	if err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err = conns.Acquire(short, a, OperationDomain)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Acquire past its deadline = %v, want DeadlineExceeded", err)
	}
	if took := time.Since(start); took > time.Second {
		t.Errorf("Acquire gave up after %s, its deadline was 200ms", took)
	}
	r2()
	r4()
	if got := obs.op(OperationDomain); got != [2]int{0, 0} {
		t.Errorf("after every release: in flight, queued = %v, want [0 0]", got)
	}
}

// closedPort is an address where nothing listens: a dial fails at once (connection refused).
func closedPort(t *testing.T) libvirt.Endpoint {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	host, port, _ := net.SplitHostPort(l.Addr().String())
	_ = l.Close()
	p, _ := strconv.Atoi(port)
	return libvirt.Endpoint{Host: host, Port: p}
}

// TestGetOpensTheBreaker: after Failures dials in a row fail, Get fails fast with a
// *HostUnavailableError and does not dial, until the cool-down is over; then it probes.
func TestGetOpensTheBreaker(t *testing.T) {
	obs := &recorder{}
	conns := NewConnections()
	conns.Breaker = Breaker{Failures: 2, CoolDown: 500 * time.Millisecond}
	conns.Observer = obs
	t.Cleanup(conns.Close)
	creds := testCredentials(t)
	dead := types.NamespacedName{Namespace: "ns", Name: "dead"}
	ep := closedPort(t)
	ctx := context.Background()

	var unavailable *HostUnavailableError
	for i := range 2 {
		if _, err := conns.Get(ctx, dead, ep, creds); err == nil || errors.As(err, &unavailable) {
			t.Fatalf("dial %d: %v, want the dial's own error", i, err)
		}
	}
	_, err := conns.Get(ctx, dead, ep, creds)
	if !errors.As(err, &unavailable) {
		t.Fatalf("third Get = %v, want a HostUnavailableError", err)
	}
	if unavailable.Failures != 2 || unavailable.RetryAfter <= 0 || unavailable.RetryAfter > 500*time.Millisecond || unavailable.Last == nil {
		t.Errorf("HostUnavailableError %+v: want 2 failures, the last one, and a wait within the cool-down", unavailable)
	}
	time.Sleep(600 * time.Millisecond)
	if _, err := conns.Get(ctx, dead, ep, creds); err == nil || errors.As(err, &unavailable) {
		t.Fatalf("Get after the cool-down = %v, want the probe's own dial error", err)
	}
	if _, err := conns.Get(ctx, dead, ep, creds); !errors.As(err, &unavailable) {
		t.Fatalf("Get after a failed probe = %v, want a HostUnavailableError", err)
	}
	obs.mu.Lock()
	defer obs.mu.Unlock()
	want := []BreakerState{BreakerClosed, BreakerOpen, BreakerHalfOpen, BreakerOpen}
	if len(obs.breakers) != len(want) {
		t.Fatalf("breaker states reported %v, want %v", obs.breakers, want)
	}
	for i := range want {
		if obs.breakers[i] != want[i] {
			t.Fatalf("breaker states reported %v, want %v", obs.breakers, want)
		}
	}
}

func waitFor(t *testing.T, cond func() bool, what string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
