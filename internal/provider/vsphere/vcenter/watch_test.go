package vcenter

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/session"
	"github.com/vmware/govmomi/vim25/types"
)

// watcher runs Watch on the banlieue folder and hands its updates over a channel.
func watcher(t *testing.T, sess *Session) <-chan MachineUpdate {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ch := make(chan MachineUpdate, 100)
	done := make(chan error, 1)
	go func() { done <- sess.Watch(ctx, "DC0", "banlieue", func(u MachineUpdate) { ch <- u }) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Watch: %v", err)
		}
	})
	return ch
}

// await waits up to within for an update matching ok.
func await(t *testing.T, ch <-chan MachineUpdate, within time.Duration, what string, ok func(MachineUpdate) bool) MachineUpdate {
	t.Helper()
	start := time.Now()
	deadline := time.After(within)
	for {
		select {
		case u := <-ch:
			if ok(u) {
				t.Logf("%s seen after %s", what, time.Since(start).Round(time.Millisecond))
				return u
			}
		case <-deadline:
			t.Fatalf("%s not seen within %s", what, within)
		}
	}
}

// TestWatchSeesOutOfBandChanges: power-off, a guest address, Tools and destroy, each done by
// someone else, are reported within 3 s.
func TestWatchSeesOutOfBandChanges(t *testing.T) {
	s, spec, sess, ctx, m := ensured(t)
	ch := watcher(t, sess)
	await(t, ch, 10*time.Second, "initial state", func(u MachineUpdate) bool {
		return u.Ref == m.Ref && u.PowerState == "poweredOff" && u.OwnerUID == spec.OwnerUID && u.BIOSUUID == m.BIOSUUID
	})
	if err := sess.PowerOn(ctx, m.Ref, spec.OwnerUID); err != nil {
		t.Fatal(err)
	}
	await(t, ch, 3*time.Second, "power on", func(u MachineUpdate) bool { return u.Ref == m.Ref && u.PowerState == "poweredOn" })

	vm := object.NewVirtualMachine(s.admin.vc, *object.ReferenceFromString(m.Ref))
	// What Tools reports from a booted guest; vcsim takes it as SET.guest.* keys.
	task, err := vm.Reconfigure(ctx, types.VirtualMachineConfigSpec{ExtraConfig: []types.BaseOptionValue{
		&types.OptionValue{Key: "SET.guest.ipAddress", Value: "192.0.2.10"},
		&types.OptionValue{Key: "SET.guest.toolsRunningStatus", Value: string(types.VirtualMachineToolsRunningStatusGuestToolsRunning)},
	}})
	if err != nil || task.Wait(ctx) != nil {
		t.Fatalf("report the guest address: %v", err)
	}
	await(t, ch, 3*time.Second, "guest address and Tools", func(u MachineUpdate) bool {
		return u.Ref == m.Ref && slices.Contains(u.IPs, "192.0.2.10") && u.ToolsRunning
	})
	got, err := sess.Get(ctx, "DC0", "banlieue", spec.Name, spec.OwnerUID)
	if err != nil || !slices.Contains(got.IPs, "192.0.2.10") || !got.ToolsRunning {
		t.Errorf("Get: %+v, %v; want the address 192.0.2.10 and Tools running", got, err)
	}

	if task, err := vm.PowerOff(ctx); err != nil || task.Wait(ctx) != nil {
		t.Fatalf("out-of-band power off: %v", err)
	}
	await(t, ch, 3*time.Second, "out-of-band power off", func(u MachineUpdate) bool { return u.Ref == m.Ref && u.PowerState == "poweredOff" })
	if task, err := vm.Destroy(ctx); err != nil || task.Wait(ctx) != nil {
		t.Fatalf("out-of-band destroy: %v", err)
	}
	u := await(t, ch, 3*time.Second, "out-of-band destroy", func(u MachineUpdate) bool { return u.Ref == m.Ref && u.Deleted })
	if u.OwnerUID != spec.OwnerUID {
		t.Errorf("deletion reported without its owner: %+v", u)
	}
}

// TestSessionReestablished: a session terminated out of band is logged in again by the next
// request, and a running Watch is set up again and still sees changes.
func TestSessionReestablished(t *testing.T) {
	s, spec, sess, ctx, m := ensured(t)
	ch := watcher(t, sess)
	await(t, ch, 10*time.Second, "initial state", func(u MachineUpdate) bool { return u.Ref == m.Ref })

	us, err := session.NewManager(sess.raw).UserSession(ctx)
	if err != nil || us == nil {
		t.Fatalf("read own session: %v", err)
	}
	if err := session.NewManager(s.admin.raw).TerminateSession(ctx, []string{us.Key}); err != nil {
		t.Fatal(err)
	}
	if _, err := sess.Get(ctx, "DC0", "banlieue", spec.Name, spec.OwnerUID); err != nil {
		t.Fatalf("Get after the session was terminated: %v", err)
	}
	if n := sess.logins.Load(); n < 2 {
		t.Fatalf("%d logins; the session was not re-established", n)
	}
	us2, err := session.NewManager(sess.raw).UserSession(ctx)
	if err != nil || us2 == nil || us2.Key == us.Key {
		t.Fatalf("session after re-login: %+v, %v; want a new one", us2, err)
	}
	vm := object.NewVirtualMachine(s.admin.vc, *object.ReferenceFromString(m.Ref))
	if task, err := vm.PowerOn(ctx); err != nil || task.Wait(ctx) != nil {
		t.Fatalf("out-of-band power on: %v", err)
	}
	await(t, ch, 15*time.Second, "power on after the watch was set up again", func(u MachineUpdate) bool {
		return u.Ref == m.Ref && u.PowerState == "poweredOn"
	})
}
