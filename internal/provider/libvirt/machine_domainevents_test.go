package libvirt

import (
	"testing"
	"time"

	"banlieue.io/banlieue/internal/app"
	"banlieue.io/banlieue/pkg/libvirt"
)

// Only the events a pass causes itself are held back around a pass; drift always counts. A
// teardown's own stop and undefine are held back only for a machine being deleted.
func TestSelfCausedEvents(t *testing.T) {
	lifecycle := func(typ libvirt.DomainEventType, detail libvirt.DomainEventDetail) libvirt.DomainEvent {
		return libvirt.DomainEvent{ID: libvirt.DomainEventIDLifecycle, Type: typ, Detail: detail}
	}
	for _, tt := range []struct {
		ev               libvirt.DomainEvent
		converge, delete bool // selfCaused for a machine converging, and for one being deleted
	}{
		{lifecycle(libvirt.DomainEventDefined, libvirt.DomainEventDefinedAdded), true, true},
		{lifecycle(libvirt.DomainEventDefined, libvirt.DomainEventDefinedUpdated), true, true},
		{lifecycle(libvirt.DomainEventStarted, libvirt.DomainEventStartedBooted), true, true},
		{lifecycle(libvirt.DomainEventResumed, libvirt.DomainEventResumedUnpaused), true, true},
		{lifecycle(libvirt.DomainEventSuspended, libvirt.DomainEventSuspendedPaused), true, true},
		{lifecycle(libvirt.DomainEventStopped, libvirt.DomainEventStoppedDestroyed), false, true},
		{lifecycle(libvirt.DomainEventUndefined, libvirt.DomainEventUndefinedRemoved), false, true},
		{lifecycle(libvirt.DomainEventShutdown, libvirt.DomainEventShutdownFinished), false, false},
		{lifecycle(libvirt.DomainEventCrashed, libvirt.DomainEventCrashedPanicked), false, false},
		{lifecycle(libvirt.DomainEventPMSuspended, libvirt.DomainEventPMSuspendedMemory), false, false},
		{libvirt.DomainEvent{ID: libvirt.DomainEventIDDeviceRemoved, DeviceAlias: "net0"}, false, false},
	} {
		if got := selfCaused(tt.ev, false); got != tt.converge {
			t.Errorf("selfCaused(%s) of a converging machine = %v, want %v", tt.ev, got, tt.converge)
		}
		if got := selfCaused(tt.ev, true); got != tt.delete {
			t.Errorf("selfCaused(%s) of a machine being deleted = %v, want %v", tt.ev, got, tt.delete)
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
