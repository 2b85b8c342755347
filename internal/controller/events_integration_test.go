package controller

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	infrav1 "banlieue.io/banlieue/api/infrastructure/v1alpha1"
	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
	"banlieue.io/banlieue/internal/testenv"
)

// testEvents follows a VM from not schedulable to scheduled and asserts one event per transition,
// then a pass that changes nothing adds none (docs/guides/libvirt-provider.md, "Troubleshooting
// with events").
func (s *suite) testEvents(ctx context.Context, t *testing.T) {
	ns := "ns-events"
	s.namespace(ctx, t, ns)
	s.provider(ctx, t, ns, "host", "libvirt")
	s.image(ctx, t, "img-events", banlieuev1.InstallImmediate,
		banlieuev1.ProviderImageStatus{ProviderName: "host", ProviderNamespace: ns, Ready: false, Reason: "Importing", Message: "import Job running"})
	s.create(ctx, t, guideVM(ns, "web-01", "small", "img-events", nil))
	s.waitVM(ctx, t, ns, "web-01", "Scheduled=False ImageNotReady", func(vm *banlieuev1.VirtualMachine) bool {
		return hasCondition(vm.Status.Conditions, banlieuev1.ConditionScheduled, metav1.ConditionFalse, banlieuev1.ReasonImageNotReady)
	})
	s.waitEvents(ctx, t, ns, "web-01", []string{"Warning/ImageNotReady"})

	s.imageRows(ctx, t, "img-events", readyRowIn(ns, "host"))
	s.waitVM(ctx, t, ns, "web-01", "Scheduled=True", func(vm *banlieuev1.VirtualMachine) bool {
		return hasCondition(vm.Status.Conditions, banlieuev1.ConditionScheduled, metav1.ConditionTrue, banlieuev1.ReasonScheduled)
	})
	want := []string{"Normal/MachineCreated", "Normal/Scheduled", "Warning/ImageNotReady"}
	evs := s.waitEvents(ctx, t, ns, "web-01", want)
	for _, e := range evs {
		if e.Reason == banlieuev1.ReasonMachineCreated && (e.Related == nil || e.Related.Kind != "LibvirtMachine" || e.Related.Name != "web-01") {
			t.Errorf("MachineCreated related = %+v, want the LibvirtMachine", e.Related)
		}
	}

	// Passes that change nothing the events speak of: one that writes no status (a label, which
	// reaches the machine), and one whose status write moves other conditions (the machine
	// becomes Ready) while Scheduled holds.
	s.patchVM(ctx, t, ns, "web-01", func(vm *banlieuev1.VirtualMachine) { vm.Labels["tier"] = "front" })
	m := s.waitMachineWhere(ctx, t, ns, "web-01", "label tier propagated", func(m *infrav1.LibvirtMachine) bool { return m.Labels["tier"] == "front" })
	s.machineStatus(ctx, t, m, infrav1.LibvirtMachineStatus{
		Initialization:     &banlieuev1.InitializationStatus{Provisioned: ptr.To(true)},
		ObservedPowerState: banlieuev1.PoweredOn,
		Conditions: []metav1.Condition{{Type: banlieuev1.ConditionReady, Status: metav1.ConditionTrue, Reason: "DomainRunning",
			Message: "domain is running", LastTransitionTime: metav1.Now()}},
	})
	s.waitVM(ctx, t, ns, "web-01", "Ready=True", func(vm *banlieuev1.VirtualMachine) bool {
		return hasCondition(vm.Status.Conditions, banlieuev1.ConditionReady, metav1.ConditionTrue, banlieuev1.ReasonReconciled)
	})
	// The recorder writes asynchronously; give a wrongly emitted event time to land. A repeat
	// of an event shows as series.count 2 on its object.
	time.Sleep(3 * time.Second)
	if got := testenv.EventKeys(testenv.EventsAbout(ctx, t, s.c, ns, "web-01")); !slices.Equal(got, want) {
		t.Errorf("events after a pass that changed nothing = %v, want %v", got, want)
	}
}

// waitEvents waits until the events about the VM named regarding are exactly want
// (type/reason, sorted, a series counted twice) and returns them.
func (s *suite) waitEvents(ctx context.Context, t *testing.T, ns, regarding string, want []string) []eventsv1.Event {
	t.Helper()
	var evs []eventsv1.Event
	testenv.Eventually(t, waitTimeout, fmt.Sprintf("events about %s/%s = %v", ns, regarding, want), func() error {
		evs = testenv.EventsAbout(ctx, t, s.c, ns, regarding)
		got := testenv.EventKeys(evs)
		return testenv.Unmet(slices.Equal(got, want), fmt.Sprintf("events %v", got))
	})
	return evs
}
