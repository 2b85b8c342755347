package libvirt

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

func TestConcurrentCalls(t *testing.T) {
	l := needLab(t)
	c := l.dial(t, "test:///default")
	want, err := c.LibVersion(testContext(t))
	if err != nil {
		t.Fatal(err)
	}
	const goroutines, calls = 32, 40
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			ctx := testContext(t)
			for i := range calls {
				switch (g + i) % 3 {
				case 0:
					if v, err := c.LibVersion(ctx); err != nil || v != want {
						t.Errorf("LibVersion = %d, %v", v, err)
						return
					}
				case 1:
					if d, err := c.DomainLookupByName(ctx, "test"); err != nil || d.Name != "test" {
						t.Errorf("DomainLookupByName = %+v, %v", d, err)
						return
					}
				case 2:
					if _, err := c.DomainLookupByName(ctx, "absent-"+strconv.Itoa(g)); !IsNotFound(err) {
						t.Errorf("absent lookup: %v", err)
						return
					}
				}
			}
		})
	}
	wg.Wait()
}

// libvirtdPID returns the lab daemon's PID; the test stops or kills it directly.
func libvirtdPID(t *testing.T, l lab) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(l.dir, "libvirtd.pid"))
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	return pid
}

// freeze stops libvirtd (SIGSTOP) until the returned function or cleanup resumes it. Only
// the kill test uses it, to hold calls in flight for an instant: stopping the shared daemon
// for longer would disturb other packages' tests running against the same lab.
func freeze(t *testing.T, l lab) (thaw func()) {
	pid := libvirtdPID(t, l)
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	thaw = func() { once.Do(func() { _ = syscall.Kill(pid, syscall.SIGCONT) }) }
	t.Cleanup(thaw)
	return thaw
}

// dialThroughRelay connects to the lab through a relay the test can freeze, which looks to
// the client exactly like a hung or unreachable libvirtd.
func dialThroughRelay(t *testing.T, l lab, tweak func(*Dialer)) (*Client, *relayLink) {
	t.Helper()
	r := relay(t, "127.0.0.1", l.endpoint.Address())
	d := l.dialer(t, "qemu:///system")
	d.Endpoint = r.Endpoint // same address the certificate names, another port
	if tweak != nil {
		tweak(&d)
	}
	c, err := d.Dial(testContext(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c, r
}

// A call cancelled while libvirtd is unreachable leaves its reply in flight; once it arrives
// it must be dropped and the next call must get its own reply.
func TestCancelMidCallKeepsSessionInSync(t *testing.T) {
	l := needLab(t)
	c, link := dialThroughRelay(t, l, nil)
	link.freeze()
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	_, err := c.DomainLookupByName(ctx, "absent-during-freeze")
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want DeadlineExceeded", err)
	}
	link.thaw()
	want, err := c.LibVersion(testContext(t))
	if err != nil || want == 0 {
		t.Fatalf("LibVersion after a cancelled call = %d, %v", want, err)
	}
	for range 5 {
		if _, err := c.DomainLookupByName(testContext(t), "absent"); !IsNotFound(err) {
			t.Fatalf("lookup after a cancelled call: %v", err)
		}
		if v, err := c.LibVersion(testContext(t)); err != nil || v != want {
			t.Fatalf("LibVersion = %d, %v", v, err)
		}
	}
}

// A hung libvirtd is noticed by keepalive: every pending call fails within the window.
func TestKeepAliveDetectsHungLibvirtd(t *testing.T) {
	l := needLab(t)
	c, link := dialThroughRelay(t, l, func(d *Dialer) {
		d.KeepAliveInterval, d.KeepAliveCount = 200*time.Millisecond, 3
	})
	time.Sleep(time.Second) // idle but healthy: libvirtd answers the pings
	if err := c.Err(); err != nil {
		t.Fatalf("idle connection declared dead: %v", err)
	}
	link.freeze()
	start := time.Now()
	for err := range pendingCalls(c, 8) {
		var ce *ConnError
		if !errors.As(err, &ce) || ce.Op != "keepalive" {
			t.Errorf("pending call: %v, want keepalive ConnError", err)
		}
	}
	if el := time.Since(start); el > 2*time.Second {
		t.Fatalf("pending calls failed after %s; keepalive window is 600ms", el)
	}
}

// pendingCalls starts n calls without deadline and returns their errors as they finish.
func pendingCalls(c *Client, n int) <-chan error {
	errs := make(chan error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			_, err := c.DomainLookupByName(context.Background(), "pending-"+strconv.Itoa(i))
			errs <- err
		})
	}
	go func() { wg.Wait(); close(errs) }()
	return errs
}

// libvirtd dies with calls in flight: all of them fail at once with ErrConnectionClosed, and
// a redial works once the daemon is back.
func TestLibvirtdKilledMidCall(t *testing.T) {
	l := needLab(t)
	dialer := l.dialer(t, "qemu:///system")
	c, err := dialer.Dial(testContext(t))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	pid := libvirtdPID(t, l)
	freeze(t, l) // hold the calls in flight
	errs := pendingCalls(c, 8)
	time.Sleep(200 * time.Millisecond)
	restarted := false
	t.Cleanup(func() {
		if !restarted {
			l.restartLibvirtd(t)
		}
	})
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	for err := range errs {
		if !errors.Is(err, ErrConnectionClosed) {
			t.Errorf("pending call: %v, want ErrConnectionClosed", err)
		}
	}
	if el := time.Since(start); el > 2*time.Second {
		t.Fatalf("pending calls failed after %s", el)
	}
	select {
	case <-c.Done():
	case <-time.After(time.Second):
		t.Fatal("Done not closed")
	}
	t.Logf("Err() = %v", c.Err())

	l.restartLibvirtd(t)
	restarted = true
	c2, err := dialer.Dial(testContext(t))
	if err != nil {
		t.Fatalf("redial: %v", err)
	}
	defer c2.Close()
	if _, err := c2.LibVersion(testContext(t)); err != nil {
		t.Fatal(err)
	}
}
