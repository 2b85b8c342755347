package libvirt

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"banlieue.io/banlieue/pkg/libvirt/internal/wire"
	"banlieue.io/banlieue/pkg/libvirt/internal/xdr"
)

// event sends a MESSAGE packet of proc, as libvirtd does for a registered callback.
func (s *fakeSession) event(proc procedure, msg func(*xdr.Encoder)) {
	b := newFrame(msg)
	wire.PutHeader(b, wire.Header{Program: wire.ProgramRemote, Version: protocolVersion, Procedure: int32(proc), Type: wire.Message, Status: wire.OK})
	s.write(b)
}

func lifecycleMsg(cb int32, dom Domain, typ DomainEventType, detail DomainEventDetail) func(*xdr.Encoder) {
	return func(e *xdr.Encoder) {
		e.Int32(cb)
		encodeDomain(e, dom)
		e.Int32(int32(typ))
		e.Int32(int32(detail))
	}
}

// acceptRegistrations answers the two REGISTER_ANY calls of SubscribeDomainEvents with callback
// IDs first and first+1, after checking that they ask for every domain.
func acceptRegistrations(s *fakeSession, first int32) error {
	for i, want := range subscribedEvents {
		h, p, err := s.read()
		if err != nil {
			return err
		}
		d := xdr.NewDecoder(p)
		id, domPresent := DomainEventID(d.Int32()), d.Bool()
		if procedure(h.Procedure) != procConnectDomainEventCallbackRegisterAny || id != want || domPresent || d.Finish() != nil {
			return fmt.Errorf("registration %d: %s for event %s (domain given: %v), want REGISTER_ANY for %s and every domain",
				i, procedure(h.Procedure), id, domPresent, want)
		}
		s.reply(h, wire.OK, func(e *xdr.Encoder) { e.Int32(first + int32(i)) })
	}
	return nil
}

func nextEvent(t *testing.T, sub *DomainEventSubscription) DomainEvent {
	t.Helper()
	select {
	case ev, ok := <-sub.Events():
		if !ok {
			t.Fatal("Events closed")
		}
		return ev
	case <-time.After(5 * time.Second):
		t.Fatal("no event within 5 s")
	}
	return DomainEvent{}
}

// Events reach the subscription typed, interleaved with a call's reply that is still routed by
// serial; events of unknown callbacks and procedures are dropped; Close deregisters both
// callbacks.
func TestDomainEventsRoutedBesideCalls(t *testing.T) {
	dom := Domain{Name: "vm1", UUID: UUID{1, 2, 3}, ID: 4}
	deregistered := make(chan []int32, 1)
	f := startFake(t, func(s *fakeSession) {
		if err := acceptRegistrations(s, 7); err != nil {
			s.t.Error(err)
			return
		}
		call, _, err := s.read() // LibVersion
		if err != nil {
			return
		}
		s.event(procDomainEventCallbackLifecycle, lifecycleMsg(99, dom, DomainEventStarted, DomainEventStartedBooted))
		s.event(procDomainEventCallbackLifecycle, lifecycleMsg(7, dom, DomainEventStopped, DomainEventStoppedDestroyed))
		s.event(procedure(319), func(e *xdr.Encoder) { e.Int32(7); encodeDomain(e, dom) }) // CALLBACK_REBOOT: not decoded
		s.reply(call, wire.OK, libVersionReply(9000000))
		s.event(procDomainEventCallbackDeviceRemoved, func(e *xdr.Encoder) {
			e.Int32(8)
			encodeDomain(e, dom)
			e.String("net0")
		})
		s.event(procDomainEventCallbackLifecycle, lifecycleMsg(7, dom, DomainEventUndefined, DomainEventUndefinedRemoved))
		var got []int32
		for range 2 {
			h, p, err := s.read()
			if err != nil {
				return
			}
			if procedure(h.Procedure) != procConnectDomainEventCallbackDeregisterAny {
				s.t.Errorf("after Close: %s, want DEREGISTER_ANY", procedure(h.Procedure))
			}
			got = append(got, xdr.NewDecoder(p).Int32())
			s.reply(h, wire.OK, nil)
		}
		deregistered <- got
		select {}
	})
	c := f.dial(t)
	sub, err := c.SubscribeDomainEvents(testContext(t))
	if err != nil {
		t.Fatal(err)
	}
	if v, err := c.LibVersion(testContext(t)); err != nil || v != 9000000 {
		t.Fatalf("LibVersion beside events = %d, %v", v, err)
	}
	want := []DomainEvent{
		{ID: DomainEventIDLifecycle, Domain: dom, Type: DomainEventStopped, Detail: DomainEventStoppedDestroyed},
		{ID: DomainEventIDDeviceRemoved, Domain: dom, DeviceAlias: "net0"},
		{ID: DomainEventIDLifecycle, Domain: dom, Type: DomainEventUndefined, Detail: DomainEventUndefinedRemoved},
	}
	for i, w := range want {
		if got := nextEvent(t, sub); got != w {
			t.Fatalf("event %d = %+v, want %+v", i, got, w)
		}
	}
	if err := sub.Close(testContext(t)); err != nil {
		t.Fatal(err)
	}
	select {
	case got := <-deregistered:
		if len(got) != 2 || got[0] != 7 || got[1] != 8 {
			t.Fatalf("deregistered callbacks %v, want [7 8]", got)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not deregister")
	}
	if _, ok := <-sub.Events(); ok {
		t.Fatal("Events still open after Close")
	}
	if c.Err() != nil {
		t.Fatalf("connection ended: %v", c.Err())
	}
}

// A consumer that never reads must not stall the connection: the reader drops the oldest
// events and a call answered after a flood of them still completes.
func TestDomainEventsNeverBlockTheReader(t *testing.T) {
	const flood = DomainEventBacklog + 100
	f := startFake(t, func(s *fakeSession) {
		if err := acceptRegistrations(s, 1); err != nil {
			s.t.Error(err)
			return
		}
		call, _, err := s.read()
		if err != nil {
			return
		}
		for i := range flood {
			s.event(procDomainEventCallbackLifecycle, lifecycleMsg(1, Domain{Name: fmt.Sprint("vm", i)}, DomainEventStarted, DomainEventStartedBooted))
		}
		s.reply(call, wire.OK, libVersionReply(1))
		select {}
	})
	c := f.dial(t)
	sub, err := c.SubscribeDomainEvents(testContext(t))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.LibVersion(testContext(t)); err != nil {
		t.Fatalf("call after an unread flood of events: %v", err)
	}
	if got := sub.Dropped(); got != flood-DomainEventBacklog {
		t.Fatalf("Dropped = %d, want %d", got, flood-DomainEventBacklog)
	}
	// What is left is the newest events, oldest first.
	if ev := nextEvent(t, sub); ev.Domain.Name != fmt.Sprint("vm", flood-DomainEventBacklog) {
		t.Fatalf("first kept event is for %s, want vm%d", ev.Domain.Name, flood-DomainEventBacklog)
	}
}

// The connection's end closes Events, so a consumer learns that it must resubscribe on a new
// Client; a subscription attempted afterwards fails.
func TestDomainEventsEndWithTheConnection(t *testing.T) {
	hangUp := make(chan struct{})
	f := startFake(t, func(s *fakeSession) {
		if err := acceptRegistrations(s, 1); err != nil {
			s.t.Error(err)
			return
		}
		<-hangUp
	})
	c := f.dial(t)
	sub, err := c.SubscribeDomainEvents(testContext(t))
	if err != nil {
		t.Fatal(err)
	}
	close(hangUp)
	select {
	case _, ok := <-sub.Events():
		if ok {
			t.Fatal("event from a session that sent none")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Events not closed after the connection ended")
	}
	if !errors.Is(c.Err(), ErrConnectionClosed) {
		t.Fatalf("Err = %v", c.Err())
	}
	if _, err := c.SubscribeDomainEvents(testContext(t)); !errors.Is(err, ErrConnectionClosed) {
		t.Fatalf("subscribing on an ended connection: %v", err)
	}
	if err := sub.Close(testContext(t)); err != nil {
		t.Fatalf("Close after the connection ended: %v", err)
	}
}

// An event that does not decode ends the connection like an undecodable reply.
func TestUndecodableEventIsAProtocolViolation(t *testing.T) {
	f := startFake(t, func(s *fakeSession) {
		if err := acceptRegistrations(s, 1); err != nil {
			s.t.Error(err)
			return
		}
		// Only once the subscription is in place: a violation while it registers fails the
		// registration instead.
		call, _, err := s.read()
		if err != nil {
			return
		}
		s.reply(call, wire.OK, libVersionReply(1))
		s.event(procDomainEventCallbackLifecycle, func(e *xdr.Encoder) { e.Int32(1) }) // no domain
		select {}
	})
	c := f.dial(t)
	if _, err := c.SubscribeDomainEvents(testContext(t)); err != nil {
		t.Fatal(err)
	}
	if _, err := c.LibVersion(testContext(t)); err != nil {
		t.Fatal(err)
	}
	select {
	case <-c.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("connection survived an undecodable event")
	}
	var pe *ProtocolError
	if !errors.As(c.Err(), &pe) {
		t.Fatalf("Err = %v, want a ProtocolError", c.Err())
	}
}
