package libvirt

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	infrav1 "banlieue.io/banlieue/api/infrastructure/v1alpha1"
	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
	"banlieue.io/banlieue/internal/app"
	"banlieue.io/banlieue/pkg/libvirt"
)

// powerAction is what one pass does to the domain's power (docs/adr/0118).
type powerAction string

const (
	powerNone powerAction = ""
	// powerStart starts a domain that is off.
	powerStart powerAction = "start"
	// powerShutdown presses the ACPI power button (Soft, TrySoft), once per power-off.
	powerShutdown powerAction = "shutdown"
	// powerDestroy cuts the power at once (Hard).
	powerDestroy powerAction = "destroy"
	// powerForce cuts the power of a guest that did not shut down within TrySoft's timeout.
	powerForce powerAction = "force"
	// powerSuspend pauses the domain's virtual CPUs.
	powerSuspend powerAction = "suspend"
	// powerResume runs a paused domain again.
	powerResume powerAction = "resume"
	// powerReboot reboots the guest through the ACPI power button (Soft, TrySoft restart).
	powerReboot powerAction = "reboot"
	// powerCycle destroys and starts the domain (Hard restart).
	powerCycle powerAction = "cycle"
)

// powerInputs is everything the power decision depends on.
type powerInputs struct {
	desired banlieuev1.PowerState
	mode    banlieuev1.PowerOffMode
	state   libvirt.DomainState
	// requestedAt is when this power-off pressed the power button; zero when it has not.
	requestedAt time.Time
	now         time.Time
	timeout     time.Duration
	// restart is true while spec.nextRestartTime is later than status.lastRestartTime.
	restart bool
}

// powerPlan is the decision: the action, and what status records after it.
type powerPlan struct {
	action powerAction
	// requestedAt is status.powerOffRequestedAt after the pass; zero clears it.
	requestedAt time.Time
	// servesRestart is true when the action is a fresh boot that answers the pending restart.
	servesRestart bool
}

// decidePower is the power decision of one pass, pure so that a table holds it
// (machine_power_test.go). The button is pressed once per power-off and the press is recorded,
// so a pass that finds the guest still shutting down waits rather than presses again, and
// TrySoft's timeout counts from the first press across provider restarts. A paused guest
// cannot see the button: a soft power-off resumes it first. Suspended pauses a running domain
// only; a domain that is off stays off. A restart is due only while the domain should run: a
// start answers it, as a boot is what it asks for.
func decidePower(in powerInputs) powerPlan {
	mode := in.mode
	if mode == "" {
		mode = banlieuev1.PowerOffTrySoft
	}
	running := isRunning(in.state)
	paused := in.state == libvirt.DomainPaused || in.state == libvirt.DomainPMSuspended
	switch in.desired {
	case banlieuev1.PoweredOff:
		switch {
		case !running:
			return powerPlan{}
		case mode == banlieuev1.PowerOffHard:
			return powerPlan{action: powerDestroy}
		case paused:
			return powerPlan{action: powerResume, requestedAt: in.requestedAt}
		case in.requestedAt.IsZero():
			return powerPlan{action: powerShutdown, requestedAt: in.now}
		case mode == banlieuev1.PowerOffTrySoft && !in.now.Before(in.requestedAt.Add(in.timeout)):
			return powerPlan{action: powerForce}
		}
		return powerPlan{requestedAt: in.requestedAt}
	case banlieuev1.Suspended:
		if running && !paused && in.state != libvirt.DomainShuttingDown {
			return powerPlan{action: powerSuspend}
		}
		return powerPlan{}
	}
	// PoweredOn, the default.
	switch {
	case !running:
		return powerPlan{action: powerStart, servesRestart: in.restart}
	case in.state == libvirt.DomainPaused:
		return powerPlan{action: powerResume}
	case !in.restart || in.state == libvirt.DomainShuttingDown || in.state == libvirt.DomainPMSuspended:
		return powerPlan{}
	case mode == banlieuev1.PowerOffHard:
		return powerPlan{action: powerCycle, servesRestart: true}
	}
	return powerPlan{action: powerReboot, servesRestart: true}
}

// restartDue reports whether spec.nextRestartTime asks for a restart not yet served.
func restartDue(m *infrav1.LibvirtMachine) bool {
	next, last := m.Spec.NextRestartTime, m.Status.LastRestartTime
	return next != nil && (last == nil || next.After(last.Time))
}

// powerInputsOf reads the decision's inputs from the machine and the observed state.
func powerInputsOf(m *infrav1.LibvirtMachine, state libvirt.DomainState, now time.Time) powerInputs {
	in := powerInputs{desired: m.Spec.DesiredPowerState, mode: m.Spec.PowerOffMode, state: state, now: now,
		timeout: defaultPowerOffTimeout, restart: restartDue(m)}
	if t := m.Spec.PowerOffTimeout; t != nil {
		in.timeout = t.Duration
	}
	if r := m.Status.PowerOffRequestedAt; r != nil {
		in.requestedAt = r.Time
	}
	return in
}

// defaultPowerOffTimeout is spec.powerOffTimeout's default (the CRD says 2m), for a machine
// stored before the field existed.
const defaultPowerOffTimeout = 2 * time.Minute

// powerOutcome is what applyPower did and found: it goes into the machine's status.
type powerOutcome struct {
	state  libvirt.DomainState
	reason libvirt.DomainStateReason
	plan   powerPlan
	inputs powerInputs
}

// requestedAt is status.powerOffRequestedAt after the pass.
func (o powerOutcome) requestedAt() *metav1.Time {
	if o.plan.requestedAt.IsZero() {
		return nil
	}
	return &metav1.Time{Time: o.plan.requestedAt}
}

// requeue is how soon a pass should look again for the power-off under way: a pressed button
// is watched on the interval of a pass waiting on something about to change (app.ErrorRetry),
// and TrySoft's deadline is not overslept.
func (o powerOutcome) requeue() time.Duration {
	if o.plan.requestedAt.IsZero() {
		return 0
	}
	watch := app.ErrorRetry
	if o.inputs.mode == banlieuev1.PowerOffTrySoft || o.inputs.mode == "" {
		if left := time.Until(o.plan.requestedAt.Add(o.inputs.timeout)); left < watch {
			return max(left, time.Second)
		}
	}
	return watch
}
