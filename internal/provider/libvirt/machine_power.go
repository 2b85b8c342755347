package libvirt

import (
	"context"
	"errors"
	"strings"
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
	// asked is how this pass's soft shutdown or reboot reached the guest.
	asked softAsk
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

// softPath is how a soft shutdown or reboot reached the guest.
type softPath string

const (
	viaGuestAgent softPath = "guest agent"
	viaACPIButton softPath = "ACPI power button"
)

// asking names the step of a call on path, for its error.
func (p softPath) asking() string {
	if p == viaGuestAgent {
		return "asking the guest agent"
	}
	return "pressing the ACPI power button"
}

// softAsk is how one soft shutdown or reboot reached the guest: the path, and when the button
// was pressed, why the agent did not take the request.
type softAsk struct {
	via          softPath
	agentRefusal string
}

// agentPowerTimeout bounds the guest agent's shutdown or reboot. libvirtd refuses at once when
// no agent is connected and answers once the guest has begun (the agent's channel closes); an
// agent that hangs must not hold the pass, and the button is pressed instead.
const agentPowerTimeout = 20 * time.Second

// askGuest asks the guest to shut down or reboot through call (DomainShutdown or DomainReboot):
// through its guest agent first, which needs nothing in the guest but the agent (a minimal
// image has no daemon acting on the ACPI button: docs/guides/libvirt-provider.md, "Power"), then
// through the ACPI power button when libvirtd or the agent refuses or does not answer in time.
// A connection that broke, or the pass's own deadline, is an error: nothing could be pressed.
func askGuest(ctx context.Context, call func(context.Context, libvirt.DomainPowerFlags) error) (softAsk, error) {
	err := call(libvirt.WithCallTimeout(ctx, agentPowerTimeout), libvirt.PowerGuestAgent)
	if err == nil {
		return softAsk{via: viaGuestAgent}, nil
	}
	var refused *libvirt.Error
	var late *libvirt.TimeoutError
	if !errors.As(err, &refused) && !errors.As(err, &late) {
		return softAsk{via: viaGuestAgent}, err
	}
	ask := softAsk{via: viaACPIButton, agentRefusal: err.Error()}
	return ask, call(ctx, libvirt.PowerACPIButton)
}

// shutdownNote begins the ShuttingDown event: what was done to which domain.
func (a softAsk) shutdownNote() string {
	if a.via == viaGuestAgent {
		return "guest agent asked to shut down"
	}
	return "ACPI power button pressed on"
}

// why is, after the button was pressed, why the agent was not used; empty otherwise.
func (a softAsk) why() string {
	if a.via != viaACPIButton || a.agentRefusal == "" {
		return ""
	}
	return "; the guest agent did not take it: " + a.agentRefusal
}

// requested is how the Ready message of a power-off under way begins.
func (a softAsk) requested() string {
	switch a.via {
	case viaGuestAgent:
		return "shutdown asked of the guest agent"
	case viaACPIButton:
		return "ACPI power button pressed"
	}
	return "shutdown requested"
}

// askedIn reads the path back from a ShuttingDown message that requested wrote.
func askedIn(msg string) softAsk {
	for _, via := range []softPath{viaGuestAgent, viaACPIButton} {
		if strings.HasPrefix(msg, softAsk{via: via}.requested()+" ") {
			return softAsk{via: via}
		}
	}
	return softAsk{}
}
