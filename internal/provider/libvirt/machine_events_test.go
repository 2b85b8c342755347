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
		want          []string
	}{
		{"first pass defines and starts", st("", ""), st(id, banlieuev1.PoweredOn), []string{"DomainDefined", "DomainStarted"}},
		{"defined powered off: never started, not stopped", st("", ""), st(id, banlieuev1.PoweredOff), []string{"DomainDefined"}},
		{"repeat pass, running", st(id, banlieuev1.PoweredOn), st(id, banlieuev1.PoweredOn), nil},
		{"repeat pass, off", st(id, banlieuev1.PoweredOff), st(id, banlieuev1.PoweredOff), nil},
		{"stopped", st(id, banlieuev1.PoweredOn), st(id, banlieuev1.PoweredOff), []string{"DomainStopped"}},
		{"started again", st(id, banlieuev1.PoweredOff), st(id, banlieuev1.PoweredOn), []string{"DomainStarted"}},
		{"resumed from suspended", st(id, banlieuev1.Suspended), st(id, banlieuev1.PoweredOn), []string{"DomainStarted"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, e := range machineTransitions(m, tc.before, tc.after) {
				got = append(got, e.reason)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("machineTransitions = %v, want %v", got, tc.want)
			}
		})
	}
}
