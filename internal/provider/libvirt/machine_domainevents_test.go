package libvirt

import (
	"slices"
	"testing"
	"time"

	"banlieue.io/banlieue/internal/app"
	"banlieue.io/banlieue/pkg/libvirt"
)

// Only the events a pass causes itself are held back around a pass; drift always counts. A
// teardown's own stop and undefine are held back only for a machine being deleted. While a pass
// waits for a start that was not its own, that start's Started and Resumed count.
func TestSelfCausedEvents(t *testing.T) {
	lifecycle := func(typ libvirt.DomainEventType, detail libvirt.DomainEventDetail) libvirt.DomainEvent {
		return libvirt.DomainEvent{ID: libvirt.DomainEventIDLifecycle, Type: typ, Detail: detail}
	}
	type machine struct{ deleting, startAwaited bool }
	converging, deleting := machine{}, machine{deleting: true}
	awaiting, awaitingDeleting := machine{startAwaited: true}, machine{deleting: true, startAwaited: true}
	for _, tt := range []struct {
		ev   libvirt.DomainEvent
		self []machine // the machines for which ev is selfCaused; for the others it counts
	}{
		{lifecycle(libvirt.DomainEventDefined, libvirt.DomainEventDefinedAdded), []machine{converging, deleting, awaiting, awaitingDeleting}},
		{lifecycle(libvirt.DomainEventDefined, libvirt.DomainEventDefinedUpdated), []machine{converging, deleting, awaiting, awaitingDeleting}},
		{lifecycle(libvirt.DomainEventStarted, libvirt.DomainEventStartedBooted), []machine{converging, deleting}},
		{lifecycle(libvirt.DomainEventResumed, libvirt.DomainEventResumedUnpaused), []machine{converging, deleting}},
		{lifecycle(libvirt.DomainEventSuspended, libvirt.DomainEventSuspendedPaused), []machine{converging, deleting, awaiting, awaitingDeleting}},
		{lifecycle(libvirt.DomainEventStopped, libvirt.DomainEventStoppedDestroyed), []machine{deleting, awaitingDeleting}},
		{lifecycle(libvirt.DomainEventUndefined, libvirt.DomainEventUndefinedRemoved), []machine{deleting, awaitingDeleting}},
		{lifecycle(libvirt.DomainEventShutdown, libvirt.DomainEventShutdownFinished), nil},
		{lifecycle(libvirt.DomainEventCrashed, libvirt.DomainEventCrashedPanicked), nil},
		{lifecycle(libvirt.DomainEventPMSuspended, libvirt.DomainEventPMSuspendedMemory), nil},
		{libvirt.DomainEvent{ID: libvirt.DomainEventIDDeviceRemoved, DeviceAlias: "net0"}, nil},
	} {
		for _, m := range []machine{converging, deleting, awaiting, awaitingDeleting} {
			if got, want := selfCaused(tt.ev, m.deleting, m.startAwaited), slices.Contains(tt.self, m); got != want {
				t.Errorf("selfCaused(%s) of a machine %+v = %v, want %v", tt.ev, m, got, want)
			}
		}
	}
}

func TestWithinPass(t *testing.T) {
	now := time.Now()
	for _, tt := range []struct {
		name string
		mark passMark
		want bool
	}{
		{"a pass running", passMark{running: 1, ended: now.Add(-time.Hour)}, true},
		{"just ended", passMark{ended: now.Add(-time.Second)}, true},
		{"at the grace", passMark{ended: now.Add(-selfEventGrace)}, true},
		{"past the grace", passMark{ended: now.Add(-selfEventGrace - time.Millisecond)}, false},
	} {
		if got := withinPass(tt.mark, now); got != tt.want {
			t.Errorf("%s: withinPass = %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestMachineRequeue(t *testing.T) {
	addr := []libvirt.IPAddress{{Addr: "192.0.2.10"}}
	for _, tt := range []struct {
		name    string
		obs     observation
		watched bool
		want    time.Duration
	}{
		{"running without addresses, watched", observation{state: libvirt.DomainRunning}, true, app.RequeueDefault},
		{"running, not announced, watched", observation{state: libvirt.DomainRunning, addresses: addr, phase: notAnnounced}, true, app.RequeueDefault},
		{"running, address from the lease, agent not up yet, watched", observation{state: libvirt.DomainRunning, addresses: addr, phase: agentUnreachable}, true, app.RequeueDefault},
		{"running with addresses, watched", observation{state: libvirt.DomainRunning, addresses: addr, phase: installed}, true, watchedResync},
		{"powered off, watched", observation{state: libvirt.DomainShutOff}, true, watchedResync},
		{"running with addresses, unwatched", observation{state: libvirt.DomainRunning, addresses: addr, phase: installed}, false, app.RequeueLong},
		{"powered off, unwatched", observation{state: libvirt.DomainShutOff}, false, app.RequeueDefault},
		{"running without addresses, unwatched", observation{state: libvirt.DomainRunning}, false, app.RequeueDefault},
	} {
		if got := machineRequeue(tt.obs, tt.watched); got != tt.want {
			t.Errorf("%s: %v, want %v", tt.name, got, tt.want)
		}
	}
}
