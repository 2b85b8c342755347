package libvirt

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/events"

	infrav1 "banlieue.io/banlieue/api/infrastructure/v1alpha1"
	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
)

// RecorderName is the reporting controller of every event of this role, images included.
const RecorderName = "banlieue-provider-libvirt"

// machineEvent is one transition of a machine's domain worth an event.
type machineEvent struct {
	reason, note string
}

// machineTransitions are the transitions of the domain between the status a pass found and the
// one it writes: the first recorded domain UUID (defined), and the observed power state moving
// to or from PoweredOn (started, stopped). A pass that redefines the same domain, or finds it as
// it was, moves nothing and announces nothing (docs/adr/0106).
func machineTransitions(m *infrav1.LibvirtMachine, before, after *infrav1.LibvirtMachineStatus) []machineEvent {
	var out []machineEvent
	if before.DomainUUID == "" && after.DomainUUID != "" {
		out = append(out, machineEvent{banlieuev1.ReasonDomainDefined,
			fmt.Sprintf("domain %s defined (uuid %s)", m.Spec.DomainName, after.DomainUUID)})
	}
	switch {
	case before.ObservedPowerState != banlieuev1.PoweredOn && after.ObservedPowerState == banlieuev1.PoweredOn:
		out = append(out, machineEvent{banlieuev1.ReasonDomainStarted, fmt.Sprintf("domain %s started", m.Spec.DomainName)})
	case before.ObservedPowerState == banlieuev1.PoweredOn && after.ObservedPowerState == banlieuev1.PoweredOff:
		out = append(out, machineEvent{banlieuev1.ReasonDomainStopped, fmt.Sprintf("domain %s stopped", m.Spec.DomainName)})
	}
	return out
}

// emitMachineTransitions records machineTransitions as Normal events on m, each once: a define
// once per domain UUID, a power event once until the other one.
func emitMachineTransitions(rec events.EventRecorder, seen *announced, m *infrav1.LibvirtMachine, before, after *infrav1.LibvirtMachineStatus) {
	for _, e := range machineTransitions(m, before, after) {
		key, value := string(m.UID)+"/power", e.reason
		if e.reason == banlieuev1.ReasonDomainDefined {
			key, value = string(m.UID)+"/defined", after.DomainUUID
		}
		if seen.first(key, value) {
			rec.Eventf(m, nil, corev1.EventTypeNormal, e.reason, "Converge", "%s", e.note)
		}
	}
}
