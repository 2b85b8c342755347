package libvirt

import (
	"slices"
	"testing"

	infrav1 "banlieue.io/banlieue/api/infrastructure/v1alpha1"
	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
)

func TestMachineTransitions(t *testing.T) {
	m := &infrav1.LibvirtMachine{Spec: infrav1.LibvirtMachineSpec{DomainName: "ns-web"}}
	st := func(uuid string, power banlieuev1.PowerState) *infrav1.LibvirtMachineStatus {
		return &infrav1.LibvirtMachineStatus{DomainUUID: uuid, ObservedPowerState: power}
	}
	const id = "6f1c0f43-7d3c-4c36-9f3f-1b7f0e4a8c11"
	for _, tc := range []struct {
		name          string
		before, after *infrav1.LibvirtMachineStatus
		action        powerAction
		want          []string
	}{
		{"first pass defines and starts", st("", ""), st(id, banlieuev1.PoweredOn), powerStart, []string{"DomainDefined", "DomainStarted"}},
		{"defined powered off: never started, not stopped", st("", ""), st(id, banlieuev1.PoweredOff), powerNone, []string{"DomainDefined"}},
		{"repeat pass, running", st(id, banlieuev1.PoweredOn), st(id, banlieuev1.PoweredOn), powerNone, nil},
		{"repeat pass, off", st(id, banlieuev1.PoweredOff), st(id, banlieuev1.PoweredOff), powerNone, nil},
		{"stopped", st(id, banlieuev1.PoweredOn), st(id, banlieuev1.PoweredOff), powerDestroy, []string{"DomainStopped"}},
		{"started again", st(id, banlieuev1.PoweredOff), st(id, banlieuev1.PoweredOn), powerStart, []string{"DomainStarted"}},
		{"resumed from suspended", st(id, banlieuev1.Suspended), st(id, banlieuev1.PoweredOn), powerResume, []string{"DomainResumed"}},
		{"suspended", st(id, banlieuev1.PoweredOn), st(id, banlieuev1.Suspended), powerSuspend, []string{"DomainSuspended"}},
		{"a suspended domain powered off", st(id, banlieuev1.Suspended), st(id, banlieuev1.PoweredOff), powerDestroy, []string{"DomainStopped"}},
		{"power button pressed, guest still up", st(id, banlieuev1.PoweredOn), st(id, banlieuev1.PoweredOn), powerShutdown, []string{"ShuttingDown"}},
		{"waiting for the guest", st(id, banlieuev1.PoweredOn), st(id, banlieuev1.PoweredOn), powerNone, nil},
		{"the guest shut down", st(id, banlieuev1.PoweredOn), st(id, banlieuev1.PoweredOff), powerNone, []string{"DomainStopped"}},
		{"forced after the timeout", st(id, banlieuev1.PoweredOn), st(id, banlieuev1.PoweredOff), powerForce, []string{"DomainStopped", "ShutdownTimedOut"}},
		{"rebooted", st(id, banlieuev1.PoweredOn), st(id, banlieuev1.PoweredOn), powerReboot, []string{"DomainRestarted"}},
		{"power-cycled", st(id, banlieuev1.PoweredOn), st(id, banlieuev1.PoweredOn), powerCycle, []string{"DomainRestarted"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, e := range machineTransitions(m, tc.before, tc.after, powerOutcome{plan: powerPlan{action: tc.action}}) {
				got = append(got, e.reason)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("machineTransitions = %v, want %v", got, tc.want)
			}
		})
	}
}

// The ShuttingDown and DomainRestarted events name the path that reached the guest, and after
// the button, why the agent was not used.
func TestMachineTransitionsNameThePath(t *testing.T) {
	m := &infrav1.LibvirtMachine{Spec: infrav1.LibvirtMachineSpec{DomainName: "ns-web"}}
	on := &infrav1.LibvirtMachineStatus{DomainUUID: "u", ObservedPowerState: banlieuev1.PoweredOn}
	refusal := "libvirt DOMAIN_SHUTDOWN_FLAGS: error (code 86): Guest agent is not responding: QEMU guest agent is not connected"
	for _, tc := range []struct {
		action powerAction
		asked  softAsk
		want   string
	}{
		{powerShutdown, softAsk{via: viaGuestAgent}, "guest agent asked to shut down domain ns-web (powerOffMode TrySoft)"},
		{powerShutdown, softAsk{via: viaACPIButton, agentRefusal: refusal},
			"ACPI power button pressed on domain ns-web (powerOffMode TrySoft); the guest agent did not take it: " + refusal},
		{powerReboot, softAsk{via: viaGuestAgent}, "domain ns-web rebooted through the guest agent for spec.nextRestartTime"},
		{powerReboot, softAsk{via: viaACPIButton, agentRefusal: "x"},
			"domain ns-web rebooted through the ACPI power button for spec.nextRestartTime; the guest agent did not take it: x"},
	} {
		got := machineTransitions(m, on, on, powerOutcome{plan: powerPlan{action: tc.action}, asked: tc.asked})
		if len(got) != 1 || got[0].note != tc.want {
			t.Errorf("%s via %s: events %+v, want one with note %q", tc.action, tc.asked.via, got, tc.want)
		}
	}
}
