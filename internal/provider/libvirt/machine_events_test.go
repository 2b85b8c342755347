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
			for _, e := range machineTransitions(m, tc.before, tc.after, tc.action) {
				got = append(got, e.reason)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("machineTransitions = %v, want %v", got, tc.want)
			}
		})
	}
}
