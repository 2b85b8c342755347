package libvirt

import (
	"fmt"
	"testing"
	"time"
)

// A domain destroyed and undefined through another connection, as virsh would, is reported on
// the subscribed one: Stopped/Destroyed, then Undefined/Removed, each within a second.
func TestLabDomainEventsOutOfBand(t *testing.T) {
	l := needLab(t)
	watcher := l.dial(t, "qemu:///system")
	other := l.dial(t, "qemu:///system")
	ctx := testContext(t)
	pool := testPool(t, l, other)
	disk := createVol(t, other, pool, "root.raw", 1<<20)

	sub, err := watcher.SubscribeDomainEvents(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Close(testContext(t)) })

	name := uniqueName("events")
	dom, err := other.DomainDefineXML(ctx, fmt.Sprintf(domainXML, name, disk.Key), 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = other.DomainDestroy(testContext(t), dom)
		_ = other.DomainUndefine(testContext(t), dom, UndefineManagedSave|UndefineNVRAM|UndefineTPM)
	})
	awaitEvent(t, sub, name, DomainEventDefined, DomainEventDefinedAdded)
	running, err := other.DomainCreate(ctx, dom, 0)
	if err != nil {
		t.Fatal(err)
	}
	awaitEvent(t, sub, name, DomainEventStarted, DomainEventStartedBooted)

	start := time.Now()
	if err := other.DomainDestroy(ctx, running); err != nil {
		t.Fatal(err)
	}
	destroyed := time.Since(start)
	ev := awaitEvent(t, sub, name, DomainEventStopped, DomainEventStoppedDestroyed)
	// libvirtd answers DOMAIN_DESTROY only once QEMU is gone (1.6–2 s for a TCG guest here).
	t.Logf("DOMAIN_DESTROY took %v; Stopped/Destroyed seen %v after it was sent", destroyed, time.Since(start))
	if ev.Domain.UUID != dom.UUID {
		t.Fatalf("event names UUID %s, want %s", ev.Domain.UUID, dom.UUID)
	}
	start = time.Now()
	if err := other.DomainUndefine(ctx, dom, UndefineManagedSave|UndefineNVRAM|UndefineTPM); err != nil {
		t.Fatal(err)
	}
	awaitEvent(t, sub, name, DomainEventUndefined, DomainEventUndefinedRemoved)
	t.Logf("Undefined/Removed seen %v after DOMAIN_UNDEFINE_FLAGS was sent", time.Since(start))
	if sub.Dropped() != 0 {
		t.Fatalf("%d events dropped", sub.Dropped())
	}
}

// awaitEvent fails unless a typ/detail lifecycle event of name arrives within a second of the
// call that caused it returning; other events (of other domains: the lab host is shared) are
// skipped.
func awaitEvent(t *testing.T, sub *DomainEventSubscription, name string, typ DomainEventType, detail DomainEventDetail) DomainEvent {
	t.Helper()
	deadline := time.After(time.Second)
	for {
		select {
		case ev, ok := <-sub.Events():
			if !ok {
				t.Fatal("Events closed")
			}
			if ev.Domain.Name == name && ev.ID == DomainEventIDLifecycle && ev.Type == typ && ev.Detail == detail {
				return ev
			}
			t.Logf("skipped: %s", ev)
		case <-deadline:
			t.Fatalf("no %s/%d event for %s within 1 s", typ, detail, name)
		}
	}
}
