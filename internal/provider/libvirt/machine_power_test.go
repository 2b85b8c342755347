package libvirt

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	infrav1 "banlieue.io/banlieue/api/infrastructure/v1alpha1"
	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
	"banlieue.io/banlieue/pkg/libvirt"
)

func TestDecidePower(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	pressed := now.Add(-30 * time.Second)
	const (
		on        = banlieuev1.PoweredOn
		off       = banlieuev1.PoweredOff
		suspended = banlieuev1.Suspended
		hard      = banlieuev1.PowerOffHard
		soft      = banlieuev1.PowerOffSoft
		trySoft   = banlieuev1.PowerOffTrySoft
		running   = libvirt.DomainRunning
		paused    = libvirt.DomainPaused
		shutOff   = libvirt.DomainShutOff
		stopping  = libvirt.DomainShuttingDown
	)
	for _, tc := range []struct {
		name        string
		desired     banlieuev1.PowerState
		mode        banlieuev1.PowerOffMode
		state       libvirt.DomainState
		requestedAt time.Time
		timeout     time.Duration
		restart     bool
		want        powerPlan
	}{
		{name: "off, wanted on: start", desired: on, state: shutOff, want: powerPlan{action: powerStart}},
		{name: "default desired is on", state: libvirt.DomainCrashed, want: powerPlan{action: powerStart}},
		{name: "running, wanted on: nothing", desired: on, state: running, want: powerPlan{}},
		{name: "paused, wanted on: resume", desired: on, state: paused, want: powerPlan{action: powerResume}},
		{name: "Hard off: destroy", desired: off, mode: hard, state: running, want: powerPlan{action: powerDestroy}},
		{name: "Hard off of a paused domain: destroy", desired: off, mode: hard, state: paused, want: powerPlan{action: powerDestroy}},
		{name: "Soft off: press the button, record the press", desired: off, mode: soft, state: running,
			want: powerPlan{action: powerShutdown, requestedAt: now}},
		{name: "Soft off, pressed: wait, keep the press, never destroy", desired: off, mode: soft, state: running,
			requestedAt: now.Add(-time.Hour), timeout: time.Second, want: powerPlan{requestedAt: now.Add(-time.Hour)}},
		{name: "TrySoft off: press the button", desired: off, mode: trySoft, state: running, timeout: time.Minute,
			want: powerPlan{action: powerShutdown, requestedAt: now}},
		{name: "mode unset is TrySoft", desired: off, state: running, timeout: time.Minute,
			want: powerPlan{action: powerShutdown, requestedAt: now}},
		{name: "TrySoft, pressed, within the timeout: wait", desired: off, mode: trySoft, state: running,
			requestedAt: pressed, timeout: time.Minute, want: powerPlan{requestedAt: pressed}},
		{name: "TrySoft, guest shutting down, within the timeout: wait", desired: off, mode: trySoft, state: stopping,
			requestedAt: pressed, timeout: time.Minute, want: powerPlan{requestedAt: pressed}},
		{name: "TrySoft, timeout reached: force", desired: off, mode: trySoft, state: running,
			requestedAt: pressed, timeout: 30 * time.Second, want: powerPlan{action: powerForce}},
		{name: "TrySoft, past the timeout: force", desired: off, mode: trySoft, state: running,
			requestedAt: pressed, timeout: 10 * time.Second, want: powerPlan{action: powerForce}},
		{name: "soft off of a paused guest: resume first, keep the press", desired: off, mode: soft, state: paused,
			requestedAt: pressed, want: powerPlan{action: powerResume, requestedAt: pressed}},
		{name: "off already: nothing, the press forgotten", desired: off, mode: trySoft, state: shutOff,
			requestedAt: pressed, timeout: time.Minute, want: powerPlan{}},
		{name: "wanted on again while shutting down: the press forgotten", desired: on, mode: trySoft, state: running,
			requestedAt: pressed, timeout: time.Minute, want: powerPlan{}},
		{name: "suspend a running domain", desired: suspended, state: running, want: powerPlan{action: powerSuspend}},
		{name: "suspended already: nothing", desired: suspended, state: paused, want: powerPlan{}},
		{name: "an off domain is not started to be suspended", desired: suspended, state: shutOff, want: powerPlan{}},
		{name: "restart, TrySoft: ACPI reboot", desired: on, mode: trySoft, state: running, restart: true,
			want: powerPlan{action: powerReboot, servesRestart: true}},
		{name: "restart, Soft: ACPI reboot", desired: on, mode: soft, state: running, restart: true,
			want: powerPlan{action: powerReboot, servesRestart: true}},
		{name: "restart, Hard: destroy and start", desired: on, mode: hard, state: running, restart: true,
			want: powerPlan{action: powerCycle, servesRestart: true}},
		{name: "restart of an off domain: the start serves it", desired: on, state: shutOff, restart: true,
			want: powerPlan{action: powerStart, servesRestart: true}},
		{name: "restart while shutting down: wait", desired: on, state: stopping, restart: true, want: powerPlan{}},
		{name: "restart of a paused domain: resume, restart later", desired: on, state: paused, restart: true,
			want: powerPlan{action: powerResume}},
		{name: "restart while wanted off: not served", desired: off, mode: hard, state: shutOff, restart: true, want: powerPlan{}},
		{name: "restart while suspended: not served", desired: suspended, state: paused, restart: true, want: powerPlan{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := decidePower(powerInputs{desired: tc.desired, mode: tc.mode, state: tc.state, requestedAt: tc.requestedAt,
				now: now, timeout: tc.timeout, restart: tc.restart})
			if got != tc.want {
				t.Errorf("decidePower = %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestRestartDue(t *testing.T) {
	t1 := &metav1.Time{Time: time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)}
	t2 := &metav1.Time{Time: t1.Add(time.Second)}
	for _, tc := range []struct {
		name       string
		next, last *metav1.Time
		want       bool
	}{
		{"never asked", nil, nil, false},
		{"asked, never served", t1, nil, true},
		{"served", t1, t1, false},
		{"asked again", t2, t1, true},
		{"an older request is no request", t1, t2, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := &infrav1.LibvirtMachine{Spec: infrav1.LibvirtMachineSpec{NextRestartTime: tc.next},
				Status: infrav1.LibvirtMachineStatus{LastRestartTime: tc.last}}
			if got := restartDue(m); got != tc.want {
				t.Errorf("restartDue = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestReadyOfPower: the Ready reason names the power-off under way, the forced one (and keeps
// it while the domain stays off), and a suspended domain.
func TestReadyOfPower(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	machine := func(desired banlieuev1.PowerState, mode banlieuev1.PowerOffMode, prevReason string) *infrav1.LibvirtMachine {
		m := &infrav1.LibvirtMachine{Spec: infrav1.LibvirtMachineSpec{DesiredPowerState: desired, PowerOffMode: mode}}
		if prevReason != "" {
			m.Status.Conditions = []metav1.Condition{{Type: banlieuev1.ConditionReady, Reason: prevReason, Message: "earlier"}}
		}
		return m
	}
	obs := func(state libvirt.DomainState, action powerAction, requestedAt time.Time) observation {
		return observation{state: state, power: powerOutcome{state: state, plan: powerPlan{action: action, requestedAt: requestedAt},
			inputs: powerInputs{requestedAt: now.Add(-time.Minute), timeout: time.Minute}}}
	}
	for _, tc := range []struct {
		name string
		m    *infrav1.LibvirtMachine
		obs  observation
		want string
	}{
		{"button pressed", machine(banlieuev1.PoweredOff, banlieuev1.PowerOffSoft, ""), obs(libvirt.DomainRunning, powerShutdown, now), infrav1.ReasonShuttingDown},
		{"waiting", machine(banlieuev1.PoweredOff, banlieuev1.PowerOffTrySoft, infrav1.ReasonShuttingDown), obs(libvirt.DomainRunning, powerNone, now), infrav1.ReasonShuttingDown},
		{"the guest shut down", machine(banlieuev1.PoweredOff, banlieuev1.PowerOffTrySoft, infrav1.ReasonShuttingDown), obs(libvirt.DomainShutOff, powerNone, time.Time{}), infrav1.ReasonDomainNotRunning},
		{"forced", machine(banlieuev1.PoweredOff, banlieuev1.PowerOffTrySoft, infrav1.ReasonShuttingDown), obs(libvirt.DomainShutOff, powerForce, time.Time{}), infrav1.ReasonShutdownTimedOut},
		{"forced, still off", machine(banlieuev1.PoweredOff, banlieuev1.PowerOffTrySoft, infrav1.ReasonShutdownTimedOut), obs(libvirt.DomainShutOff, powerNone, time.Time{}), infrav1.ReasonShutdownTimedOut},
		{"forced, then started", machine(banlieuev1.PoweredOn, banlieuev1.PowerOffTrySoft, infrav1.ReasonShutdownTimedOut), obs(libvirt.DomainRunning, powerStart, time.Time{}), infrav1.ReasonDomainRunning},
		{"suspended", machine(banlieuev1.Suspended, "", infrav1.ReasonDomainRunning), obs(libvirt.DomainPaused, powerSuspend, time.Time{}), infrav1.ReasonDomainSuspended},
		{"Hard off", machine(banlieuev1.PoweredOff, banlieuev1.PowerOffHard, infrav1.ReasonDomainRunning), obs(libvirt.DomainShutOff, powerDestroy, time.Time{}), infrav1.ReasonDomainNotRunning},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got, msg := readyOf(tc.m, tc.obs); got != tc.want {
				t.Errorf("readyOf = %s (%q), want %s", got, msg, tc.want)
			}
		})
	}
}

// The Ready message of a power-off under way names the path the pass that asked took, and the
// passes waiting after it keep that message; a forced one names no path.
func TestReadyOfNamesThePath(t *testing.T) {
	at := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	m := &infrav1.LibvirtMachine{Spec: infrav1.LibvirtMachineSpec{DesiredPowerState: banlieuev1.PoweredOff}}
	asked := func(action powerAction, via softPath) observation {
		return observation{state: libvirt.DomainRunning, power: powerOutcome{state: libvirt.DomainRunning,
			plan: powerPlan{action: action, requestedAt: at}, inputs: powerInputs{timeout: 2 * time.Minute}, asked: softAsk{via: via}}}
	}
	for _, tc := range []struct {
		name string
		obs  observation
		want string
	}{
		{"agent", asked(powerShutdown, viaGuestAgent),
			"shutdown asked of the guest agent at 2026-12-01T12:00:00Z (spec.powerOffMode TrySoft); the domain is destroyed at 2026-12-01T12:02:00Z if the guest has not shut down"},
		{"button", asked(powerShutdown, viaACPIButton),
			"ACPI power button pressed at 2026-12-01T12:00:00Z (spec.powerOffMode TrySoft); the domain is destroyed at 2026-12-01T12:02:00Z if the guest has not shut down"},
		{"waiting, no earlier message", asked(powerNone, ""),
			"shutdown requested at 2026-12-01T12:00:00Z (spec.powerOffMode TrySoft); the domain is destroyed at 2026-12-01T12:02:00Z if the guest has not shut down"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reason, msg := readyOf(m, tc.obs)
			if reason != infrav1.ReasonShuttingDown || msg != tc.want {
				t.Errorf("readyOf = %s %q, want %s %q", reason, msg, infrav1.ReasonShuttingDown, tc.want)
			}
			// The next pass waits and keeps it.
			waiting := m.DeepCopy()
			waiting.Status.Conditions = []metav1.Condition{{Type: banlieuev1.ConditionReady, Reason: reason, Message: msg}}
			if r, got := readyOf(waiting, asked(powerNone, "")); r != reason || got != msg {
				t.Errorf("the pass after: %s %q, want %s %q", r, got, reason, msg)
			}
			// Switched to Soft while waiting: the same path, the new mode.
			waiting.Spec.PowerOffMode = banlieuev1.PowerOffSoft
			_, got := readyOf(waiting, asked(powerNone, ""))
			if want := strings.SplitN(msg, " (", 2)[0] + " (spec.powerOffMode Soft); waiting for the guest to shut down"; got != want {
				t.Errorf("after a switch to Soft: %q, want %q", got, want)
			}
		})
	}
}

// askGuest asks the agent first, with the agent's flag alone, and presses the button only when
// libvirtd refused or the agent did not answer in time; a broken connection presses nothing.
func TestAskGuest(t *testing.T) {
	refused := &libvirt.Error{Code: 86, Message: "Guest agent is not responding: QEMU guest agent is not connected", Procedure: "DOMAIN_SHUTDOWN_FLAGS"}
	late := &libvirt.TimeoutError{Op: "DOMAIN_SHUTDOWN_FLAGS", After: agentPowerTimeout}
	gone := fmt.Errorf("libvirt DOMAIN_SHUTDOWN_FLAGS: %w", libvirt.ErrConnectionClosed)
	buttonRefused := &libvirt.Error{Code: 55, Message: "domain is not running"}
	for _, tc := range []struct {
		name             string
		agentErr, btnErr error
		wantCalls        []libvirt.DomainPowerFlags
		wantVia          softPath
		wantRefusal      string
		wantErr          error
	}{
		{"the agent takes it", nil, nil, []libvirt.DomainPowerFlags{libvirt.PowerGuestAgent}, viaGuestAgent, "", nil},
		{"no agent: the button", refused, nil, []libvirt.DomainPowerFlags{libvirt.PowerGuestAgent, libvirt.PowerACPIButton}, viaACPIButton, refused.Error(), nil},
		{"a silent agent: the button", late, nil, []libvirt.DomainPowerFlags{libvirt.PowerGuestAgent, libvirt.PowerACPIButton}, viaACPIButton, late.Error(), nil},
		{"the button refused too", refused, buttonRefused, []libvirt.DomainPowerFlags{libvirt.PowerGuestAgent, libvirt.PowerACPIButton}, viaACPIButton, refused.Error(), buttonRefused},
		{"the connection broke", gone, nil, []libvirt.DomainPowerFlags{libvirt.PowerGuestAgent}, viaGuestAgent, "", gone},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var calls []libvirt.DomainPowerFlags
			ask, err := askGuest(context.Background(), func(_ context.Context, f libvirt.DomainPowerFlags) error {
				calls = append(calls, f)
				if f == libvirt.PowerGuestAgent {
					return tc.agentErr
				}
				return tc.btnErr
			})
			if !slices.Equal(calls, tc.wantCalls) {
				t.Errorf("calls %v, want %v", calls, tc.wantCalls)
			}
			if ask.via != tc.wantVia || ask.agentRefusal != tc.wantRefusal || !errors.Is(err, tc.wantErr) || (err == nil) != (tc.wantErr == nil) {
				t.Errorf("askGuest = %+v, %v; want via %s, refusal %q, error %v", ask, err, tc.wantVia, tc.wantRefusal, tc.wantErr)
			}
		})
	}
}

// A machine is provisioned once its domain is in a power state its spec accepts: a machine
// created powered off is, and says so on Ready (docs/adr/0147-phases-of-a-vm-as-its-spec-asks.md).
func TestProvisionedAndReadyOfAnOffMachine(t *testing.T) {
	for _, tc := range []struct {
		desired     banlieuev1.PowerState
		state       libvirt.DomainState
		provisioned bool
		msg         string
	}{
		{banlieuev1.PoweredOn, libvirt.DomainRunning, true, "domain is defined and running"},
		{banlieuev1.PoweredOn, libvirt.DomainShutOff, false, "domain is defined but ShutOff"},
		{banlieuev1.PoweredOn, libvirt.DomainCrashed, false, "domain is defined but Crashed"},
		{"", libvirt.DomainShutOff, false, "domain is defined but ShutOff"},
		{banlieuev1.PoweredOff, libvirt.DomainShutOff, true, "domain is defined and off (ShutOff), as spec.desiredPowerState PoweredOff asks"},
		{banlieuev1.Suspended, libvirt.DomainShutOff, true, "domain is defined and off (ShutOff), as spec.desiredPowerState Suspended asks"},
		{banlieuev1.Suspended, libvirt.DomainPaused, true, "domain is suspended, as spec.desiredPowerState asks"},
	} {
		t.Run(string(tc.desired)+"/"+tc.state.String(), func(t *testing.T) {
			m := &infrav1.LibvirtMachine{Spec: infrav1.LibvirtMachineSpec{DesiredPowerState: tc.desired}}
			obs := observation{state: tc.state, power: powerOutcome{state: tc.state}}
			st := succeededStatus(m, obs)
			if got := st.Initialization.Provisioned; got == nil || *got != tc.provisioned {
				t.Errorf("provisioned = %v, want %v", got, tc.provisioned)
			}
			ready := meta.FindStatusCondition(st.Conditions, banlieuev1.ConditionReady)
			if ready == nil || ready.Message != tc.msg {
				t.Fatalf("Ready = %+v, want message %q", ready, tc.msg)
			}
			if want := tc.state == libvirt.DomainRunning; (ready.Status == metav1.ConditionTrue) != want {
				t.Errorf("Ready %s, want True only when running", ready.Status)
			}
		})
	}
}
