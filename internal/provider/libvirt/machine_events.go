package libvirt

import (
	"cmp"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"

	infrav1 "banlieue.io/banlieue/api/infrastructure/v1alpha1"
	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
)

// RecorderName is the reporting controller of every event of this role, images included.
const RecorderName = "banlieue-provider-libvirt"

// machineEvent is one transition of a machine's domain worth an event.
type machineEvent struct {
	reason, note string
	// key groups the events announced once per press or request ("shutdown", "restart").
	key     string
	warning bool
}

// machineTransitions are the transitions of the domain between the status a pass found and the
// one it writes: the first recorded domain UUID (defined), the observed power state moving to or
// from PoweredOn (started, stopped, suspended, resumed), and the power actions only the pass
// knows of: a shutdown asked of the guest (ShuttingDown, naming the path: guest agent or ACPI
// power button), a power-off forced after the timeout (ShutdownTimedOut), a restart. A pass that
// redefines the same domain, or finds it as it was, moves nothing and announces nothing
// (docs/adr/0106).
func machineTransitions(m *infrav1.LibvirtMachine, before, after *infrav1.LibvirtMachineStatus, power powerOutcome) []machineEvent {
	var out []machineEvent
	if before.DomainUUID == "" && after.DomainUUID != "" {
		out = append(out, machineEvent{reason: banlieuev1.ReasonDomainDefined,
			note: fmt.Sprintf("domain %s defined (uuid %s)", m.Spec.DomainName, after.DomainUUID)})
	}
	name := m.Spec.DomainName
	was, is := before.ObservedPowerState, after.ObservedPowerState
	switch {
	case was == banlieuev1.Suspended && is == banlieuev1.PoweredOn:
		out = append(out, machineEvent{reason: banlieuev1.ReasonDomainResumed, note: fmt.Sprintf("domain %s resumed", name)})
	case was != banlieuev1.PoweredOn && is == banlieuev1.PoweredOn:
		out = append(out, machineEvent{reason: banlieuev1.ReasonDomainStarted, note: fmt.Sprintf("domain %s started", name)})
	case was == banlieuev1.PoweredOn && is == banlieuev1.Suspended:
		out = append(out, machineEvent{reason: infrav1.ReasonDomainSuspended, note: fmt.Sprintf("domain %s suspended", name)})
	case (was == banlieuev1.PoweredOn || was == banlieuev1.Suspended) && is == banlieuev1.PoweredOff:
		out = append(out, machineEvent{reason: banlieuev1.ReasonDomainStopped, note: fmt.Sprintf("domain %s stopped", name)})
	}
	action := power.plan.action
	switch action {
	case powerShutdown:
		out = append(out, machineEvent{reason: infrav1.ReasonShuttingDown, key: "shutdown",
			note: fmt.Sprintf("%s domain %s (powerOffMode %s)%s", power.asked.shutdownNote(), name,
				cmp.Or(m.Spec.PowerOffMode, banlieuev1.PowerOffTrySoft), power.asked.why())})
	case powerForce:
		out = append(out, machineEvent{reason: infrav1.ReasonShutdownTimedOut, key: "shutdown", warning: true,
			note: fmt.Sprintf("domain %s did not shut down within spec.powerOffTimeout; destroyed", name)})
	case powerReboot, powerCycle:
		how, why := "rebooted through the "+string(power.asked.via), power.asked.why()
		if action == powerCycle {
			how, why = "destroyed and started again (powerOffMode Hard)", ""
		}
		out = append(out, machineEvent{reason: banlieuev1.ReasonDomainRestarted, key: "restart",
			note: fmt.Sprintf("domain %s %s for spec.nextRestartTime%s", name, how, why)})
	}
	return out
}

// emitMachineTransitions records machineTransitions as events on m, each once: a define once
// per domain UUID, a power event once until the next one, a power-off's events once per press
// and a restart once per request.
func emitMachineTransitions(rec events.EventRecorder, seen *announced, m *infrav1.LibvirtMachine, before, after *infrav1.LibvirtMachineStatus,
	power powerOutcome) {
	for _, e := range machineTransitions(m, before, after, power) {
		key, value := string(m.UID)+"/power", e.reason
		switch {
		case e.reason == banlieuev1.ReasonDomainDefined:
			key, value = string(m.UID)+"/defined", after.DomainUUID
		case e.key == "shutdown":
			key, value = string(m.UID)+"/shutdown", e.reason+" "+timeKey(after.PowerOffRequestedAt, before.PowerOffRequestedAt)
		case e.key == "restart":
			key, value = string(m.UID)+"/restart", timeKey(after.LastRestartTime, nil)
		}
		if seen.first(key, value) {
			typ := corev1.EventTypeNormal
			if e.warning {
				typ = corev1.EventTypeWarning
			}
			rec.Eventf(m, nil, typ, e.reason, "Converge", "%s", e.note)
		}
	}
}

// announcedKeys are the keys emitMachineTransitions uses for m, forgotten when m goes.
func announcedKeys(m *infrav1.LibvirtMachine) []string {
	id := string(m.UID)
	return []string{id + "/power", id + "/defined", id + "/shutdown", id + "/restart"}
}

// timeKey is the first set time, as a key: the press a power-off event belongs to (the one
// recorded after the pass, or the one a forced pass cleared), the request a restart served.
func timeKey(times ...*metav1.Time) string {
	for _, t := range times {
		if t != nil {
			return t.UTC().Format(time.RFC3339Nano)
		}
	}
	return ""
}
