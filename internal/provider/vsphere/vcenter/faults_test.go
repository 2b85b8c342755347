package vcenter

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/vmware/govmomi/fault"
	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/vim25/types"

	"banlieue.io/banlieue/internal/provider/vsphere/vcsimtest"
)

func wantStep(t *testing.T, what string, err error, step string) {
	t.Helper()
	var se *StepError
	if !errors.As(err, &se) || !strings.HasPrefix(se.Step, step) || !strings.HasPrefix(err.Error(), step) {
		t.Errorf("%s: error %v; want one saying step %q failed", what, err, step)
	}
}

// TestFaultsNameTheStep: faults and task delays injected into vcsim give errors that say which
// step failed, and a later pass finishes the work without a second VM.
func TestFaultsNameTheStep(t *testing.T) {
	timed(t)
	s, spec := machineSim(t)
	sess := s.dial(t)
	ctx := ctxT(t)
	rule := func(method string, ft simulator.FaultType, f types.BaseMethodFault, max int) {
		s.model.Service.AddFaultRule(&simulator.FaultInjectionRule{
			MethodName: method, ObjectType: "*", ObjectName: "*", Probability: 1,
			FaultType: ft, Fault: f, MaxCount: max, Message: "injected", Enabled: true,
		})
	}

	rule("CloneVM_Task", simulator.FaultTypeInsufficientResourcesFault, nil, 0)
	_, err := sess.Ensure(ctx, spec)
	wantStep(t, "clone refused", err, "clone "+tplName)
	if !fault.Is(err, &types.InsufficientResourcesFault{}) {
		t.Errorf("clone refused: %v does not carry vCenter's fault", err)
	}
	s.model.Service.ClearFaultRules()
	if names := vmsInFolder(t, s); len(names) != 0 {
		t.Fatalf("a refused clone left %v", names)
	}

	// The clone succeeds, the reconfigure after it fails once: the next pass finishes it.
	spec.DiskGiB = append(spec.DiskGiB, 3)
	rule("ReconfigVM_Task", simulator.FaultTypeCustom, &types.InvalidState{}, 1)
	_, err = sess.Ensure(ctx, spec)
	wantStep(t, "reconfigure refused", err, "reconfigure")
	m, err := sess.Ensure(ctx, spec)
	if err != nil {
		t.Fatalf("Ensure after a failed reconfigure: %v", err)
	}
	if names := vmsInFolder(t, s); len(names) != 1 {
		t.Fatalf("folder holds %v, want one VM", names)
	}

	rule("PowerOnVM_Task", simulator.FaultTypeGeneric, nil, 0)
	wantStep(t, "power on refused", sess.PowerOn(ctx, m.Ref, spec.OwnerUID), "power on")
	s.model.Service.ClearFaultRules()

	rule("Destroy_Task", simulator.FaultTypeCustom, &types.InvalidState{}, 0)
	wantStep(t, "destroy refused", sess.Delete(ctx, m.Ref, spec.OwnerUID), "destroy")
	s.model.Service.ClearFaultRules()

	// A clone slower than the task timeout: the error says so, and a later pass adopts the VM
	// the clone made (it carries the proof from its first moment).
	impatient := s.dial(t, WithTaskTimeout(500*time.Millisecond))
	slow := spec
	slow.Name = "web-slow"
	setTaskDelay(t, s, map[string]int{"CloneVm": 2500, "LockHandoff": 0}, "VirtualMachine.cloneVm")
	_, err = impatient.Ensure(ctx, slow)
	wantStep(t, "slow clone", err, "clone "+tplName)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("slow clone: %v, want a deadline exceeded", err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err = sess.Get(ctx, "DC0", "banlieue", slow.Name, slow.OwnerUID); err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("the slow clone never finished: %v", err)
	}
	if _, err := sess.Ensure(ctx, slow); err != nil {
		t.Fatalf("Ensure after the slow clone: %v", err)
	}

	// A request answered NotAuthenticated once is retried after a new login.
	before := sess.logins.Load()
	rule("RetrievePropertiesEx", simulator.FaultTypeNotAuthenticated, nil, 1)
	if _, err := sess.Get(ctx, "DC0", "banlieue", spec.Name, spec.OwnerUID); err != nil {
		t.Errorf("Get answered NotAuthenticated once: %v", err)
	}
	s.model.Service.ClearFaultRules()
	if sess.logins.Load() != before+1 {
		t.Errorf("logins %d -> %d, want one more", before, sess.logins.Load())
	}
}

func TestDialRefuses(t *testing.T) {
	timed(t)
	m := simulator.VPX()
	m.Machine = 0
	s := startSim(t, m)
	ctx := ctxT(t)
	otherCA, _ := vcsimtest.ServingCA(t)
	for _, tt := range []struct {
		name string
		ep   func(Endpoint) Endpoint
		want string
	}{
		{"another CA", func(e Endpoint) Endpoint { e.CAPEM = otherCA; return e }, "certificate signed by unknown authority"},
		{"no CA", func(e Endpoint) Endpoint { e.CAPEM = nil; return e }, "load CA"},
		{"plain http", func(e Endpoint) Endpoint { e.URL = strings.Replace(e.URL, "https:", "http:", 1); return e }, "not an https URL"},
		{"credentials in the URL", func(e Endpoint) Endpoint { e.URL = strings.Replace(e.URL, "https://", "https://u:p@", 1); return e }, "not in the URL"},
		{"wrong password", func(e Endpoint) Endpoint { e.Password = "wrong-Secret-1"; return e }, "log in to"},
	} {
		ep := tt.ep(s.ep)
		sess, err := Dial(ctx, ep)
		if err == nil {
			_ = sess.Close(ctx)
			t.Errorf("%s: Dial succeeded", tt.name)
			continue
		}
		if !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: %v, want it to say %q", tt.name, err, tt.want)
		}
		if strings.Contains(err.Error(), ep.Password) || strings.Contains(err.Error(), simPassword) {
			t.Errorf("%s: the error shows the password: %v", tt.name, err)
		}
	}
	if got := s.ep.String(); strings.Contains(got, simPassword) {
		t.Errorf("Endpoint.String() = %q shows the password", got)
	}
}

// TestCloneLimit: with one clone slot, three machines ensured at once are cloned one after the
// other (each clone delayed by vcsim), so together they take at least three delays.
func TestCloneLimit(t *testing.T) {
	timed(t)
	s, spec := machineSim(t)
	sess := s.dial(t, WithLimits(1, 1))
	ctx := ctxT(t)
	const delay = 600 * time.Millisecond
	setTaskDelay(t, s, map[string]int{"CloneVm": int(delay / time.Millisecond), "LockHandoff": 0}, "VirtualMachine.cloneVm")
	start := time.Now()
	errs := make(chan error, 3)
	for _, name := range []string{"a", "b", "c"} {
		m := spec
		m.Name = name
		go func() { _, err := sess.Ensure(ctx, m); errs <- err }()
	}
	for range 3 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if took := time.Since(start); took < 3*delay {
		t.Errorf("three clones through one slot took %s, less than three clone delays (%s)", took, 3*delay)
	}
	if names := vmsInFolder(t, s); len(names) != 3 {
		t.Errorf("folder holds %v, want a, b, c", names)
	}
}
