package libvirt

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"

	"banlieue.io/banlieue/pkg/libvirt/internal/wire"
	"banlieue.io/banlieue/pkg/libvirt/internal/xdr"
)

// DomainEventID is virDomainEventID: which kind of domain event a callback is registered for.
type DomainEventID int32

const (
	// DomainEventIDLifecycle (VIR_DOMAIN_EVENT_ID_LIFECYCLE): defined, undefined, started,
	// stopped, suspended, resumed, shut down, crashed.
	DomainEventIDLifecycle DomainEventID = 0
	// DomainEventIDDeviceRemoved (VIR_DOMAIN_EVENT_ID_DEVICE_REMOVED): a device was detached
	// from a running domain.
	DomainEventIDDeviceRemoved DomainEventID = 15
)

func (id DomainEventID) String() string {
	switch id {
	case DomainEventIDLifecycle:
		return "lifecycle"
	case DomainEventIDDeviceRemoved:
		return "device-removed"
	}
	return "event " + strconv.Itoa(int(id))
}

// DomainEventType is virDomainEventType, the kind of a lifecycle event.
type DomainEventType int32

const (
	DomainEventDefined     DomainEventType = 0
	DomainEventUndefined   DomainEventType = 1
	DomainEventStarted     DomainEventType = 2
	DomainEventSuspended   DomainEventType = 3
	DomainEventResumed     DomainEventType = 4
	DomainEventStopped     DomainEventType = 5
	DomainEventShutdown    DomainEventType = 6
	DomainEventPMSuspended DomainEventType = 7
	DomainEventCrashed     DomainEventType = 8
)

var domainEventTypeNames = [...]string{"Defined", "Undefined", "Started", "Suspended", "Resumed", "Stopped", "Shutdown", "PMSuspended", "Crashed"}

func (t DomainEventType) String() string {
	if t >= 0 && int(t) < len(domainEventTypeNames) {
		return domainEventTypeNames[t]
	}
	return "Type" + strconv.Itoa(int(t))
}

// DomainEventDetail is why a lifecycle event happened: the virDomainEvent<Type>DetailType enum
// of the event's type, so a value means something only together with the type (as
// DomainStateReason does with DomainState).
type DomainEventDetail int32

// Details of the lifecycle types a provider acts on.
const (
	DomainEventDefinedAdded        DomainEventDetail = 0 // VIR_DOMAIN_EVENT_DEFINED_ADDED
	DomainEventDefinedUpdated      DomainEventDetail = 1 // VIR_DOMAIN_EVENT_DEFINED_UPDATED
	DomainEventDefinedRenamed      DomainEventDetail = 2 // VIR_DOMAIN_EVENT_DEFINED_RENAMED
	DomainEventUndefinedRemoved    DomainEventDetail = 0 // VIR_DOMAIN_EVENT_UNDEFINED_REMOVED
	DomainEventUndefinedRenamed    DomainEventDetail = 1 // VIR_DOMAIN_EVENT_UNDEFINED_RENAMED
	DomainEventStartedBooted       DomainEventDetail = 0 // VIR_DOMAIN_EVENT_STARTED_BOOTED
	DomainEventStoppedShutdown     DomainEventDetail = 0 // VIR_DOMAIN_EVENT_STOPPED_SHUTDOWN
	DomainEventStoppedDestroyed    DomainEventDetail = 1 // VIR_DOMAIN_EVENT_STOPPED_DESTROYED
	DomainEventStoppedCrashed      DomainEventDetail = 2 // VIR_DOMAIN_EVENT_STOPPED_CRASHED
	DomainEventStoppedFailed       DomainEventDetail = 5 // VIR_DOMAIN_EVENT_STOPPED_FAILED
	DomainEventStoppedFromSnapshot DomainEventDetail = 6 // VIR_DOMAIN_EVENT_STOPPED_FROM_SNAPSHOT
	DomainEventSuspendedPaused     DomainEventDetail = 0 // VIR_DOMAIN_EVENT_SUSPENDED_PAUSED
	DomainEventResumedUnpaused     DomainEventDetail = 0 // VIR_DOMAIN_EVENT_RESUMED_UNPAUSED
	DomainEventShutdownFinished    DomainEventDetail = 0 // VIR_DOMAIN_EVENT_SHUTDOWN_FINISHED
	DomainEventCrashedPanicked     DomainEventDetail = 0 // VIR_DOMAIN_EVENT_CRASHED_PANICKED
	DomainEventCrashedCrashLoaded  DomainEventDetail = 1 // VIR_DOMAIN_EVENT_CRASHED_CRASHLOADED
	DomainEventPMSuspendedMemory   DomainEventDetail = 0 // VIR_DOMAIN_EVENT_PMSUSPENDED_MEMORY
	DomainEventPMSuspendedDisk     DomainEventDetail = 1 // VIR_DOMAIN_EVENT_PMSUSPENDED_DISK
)

// DomainEvent is one event libvirtd reported for a domain.
type DomainEvent struct {
	ID     DomainEventID
	Domain Domain
	// Type and Detail are set for DomainEventIDLifecycle.
	Type   DomainEventType
	Detail DomainEventDetail
	// DeviceAlias is the removed device's alias, for DomainEventIDDeviceRemoved.
	DeviceAlias string
}

func (e DomainEvent) String() string {
	switch e.ID {
	case DomainEventIDLifecycle:
		return fmt.Sprintf("domain %s %s (detail %d)", e.Domain.Name, e.Type, e.Detail)
	case DomainEventIDDeviceRemoved:
		return fmt.Sprintf("domain %s device %s removed", e.Domain.Name, e.DeviceAlias)
	}
	return fmt.Sprintf("domain %s %s", e.Domain.Name, e.ID)
}

// DomainEventBacklog is how many events a subscription holds for a consumer that is not
// reading; beyond it the oldest are dropped (DomainEventSubscription.Dropped counts them).
const DomainEventBacklog = 256

// DomainEventSubscription receives the lifecycle and device-removed events of every domain of
// the connection's host. The connection's reader never waits for the consumer: when Events
// is full the oldest event is dropped, so a consumer that falls behind loses history, never
// the latest state change, and every other call on the Client goes on. Events is closed when
// the subscription is closed or the connection ends.
type DomainEventSubscription struct {
	c       *Client
	ch      chan DomainEvent
	dropped atomic.Uint64

	mu        sync.Mutex // orders deliveries against the close of ch
	closed    bool
	callbacks []int32 // libvirtd's callback IDs, one per DomainEventID
}

// Events delivers the subscription's events in the order libvirtd sent them.
func (s *DomainEventSubscription) Events() <-chan DomainEvent { return s.ch }

// Dropped is how many events were discarded because Events was full.
func (s *DomainEventSubscription) Dropped() uint64 { return s.dropped.Load() }

// subscribedEvents are the events SubscribeDomainEvents registers for.
var subscribedEvents = []DomainEventID{DomainEventIDLifecycle, DomainEventIDDeviceRemoved}

// SubscribeDomainEvents registers, for every domain of the host, for lifecycle and
// device-removed events (CONNECT_DOMAIN_EVENT_CALLBACK_REGISTER_ANY with no domain). A change
// made while this call runs may or may not be reported: read the state after it returns.
// A Client that reconnects is a new Client, which must subscribe again.
func (c *Client) SubscribeDomainEvents(ctx context.Context) (*DomainEventSubscription, error) {
	s := &DomainEventSubscription{c: c, ch: make(chan DomainEvent, DomainEventBacklog)}
	for _, id := range subscribedEvents {
		var cb int32
		err := c.call(ctx, wire.ProgramRemote, procConnectDomainEventCallbackRegisterAny, func(e *xdr.Encoder) {
			e.Int32(int32(id))
			e.Uint32(0) // remote_domain dom: a null pointer, every domain
		}, func(d *xdr.Decoder) { cb = d.Int32() })
		if err == nil {
			err = c.addSubscription(cb, s)
		}
		if err != nil {
			_ = s.Close(ctx)
			return nil, fmt.Errorf("registering for domain %s events: %w", id, err)
		}
	}
	return s, nil
}

// Close deregisters the callbacks (best effort: a connection that has ended holds none) and
// closes Events. It is safe to call more than once.
func (s *DomainEventSubscription) Close(ctx context.Context) error {
	callbacks := s.end()
	var errs []error
	for _, cb := range callbacks {
		s.c.removeSubscription(cb)
		if s.c.Err() != nil {
			continue
		}
		err := s.c.call(ctx, wire.ProgramRemote, procConnectDomainEventCallbackDeregisterAny,
			func(e *xdr.Encoder) { e.Int32(cb) }, nil)
		if err != nil {
			errs = append(errs, fmt.Errorf("deregistering domain event callback %d: %w", cb, err))
		}
	}
	return errors.Join(errs...)
}

// end closes Events once and returns the callbacks still registered.
func (s *DomainEventSubscription) end() []int32 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	close(s.ch)
	cbs := s.callbacks
	s.callbacks = nil
	return cbs
}

// deliver queues ev without ever blocking the reader: when the backlog is full the oldest
// event makes room.
func (s *DomainEventSubscription) deliver(ev DomainEvent) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	for {
		select {
		case s.ch <- ev:
			return
		default:
		}
		select {
		case <-s.ch:
			s.dropped.Add(1)
		default:
		}
	}
}

// addSubscription routes callback cb's events to s, unless the connection has already ended
// (its subscriptions were closed then, and s would never be).
func (c *Client) addSubscription(cb int32, s *DomainEventSubscription) error {
	c.subsMu.Lock()
	defer c.subsMu.Unlock()
	if c.subsEnded {
		return c.err
	}
	if c.subs == nil {
		c.subs = map[int32]*DomainEventSubscription{}
	}
	c.subs[cb] = s
	s.mu.Lock()
	s.callbacks = append(s.callbacks, cb)
	s.mu.Unlock()
	return nil
}

func (c *Client) removeSubscription(cb int32) {
	c.subsMu.Lock()
	delete(c.subs, cb)
	c.subsMu.Unlock()
}

// endSubscriptions closes every subscription's Events when the connection ends.
func (c *Client) endSubscriptions() {
	c.subsMu.Lock()
	subs := c.subs
	c.subs, c.subsEnded = nil, true
	c.subsMu.Unlock()
	for _, s := range subs {
		s.end()
	}
}

// routeEvent delivers a MESSAGE packet of the REMOTE program to its subscription. Events of
// procedures this client does not decode, and of callbacks no longer registered (a
// deregistration crosses events already sent), are dropped; an event that does not decode is a
// protocol violation like any undecodable reply.
func (c *Client) routeEvent(f frame) error {
	if f.h.Program != wire.ProgramRemote {
		return nil
	}
	d := xdr.NewDecoder(f.payload)
	var cb int32
	var ev DomainEvent
	switch procedure(f.h.Procedure) {
	case procDomainEventCallbackLifecycle:
		cb = d.Int32()
		ev = DomainEvent{ID: DomainEventIDLifecycle, Domain: decodeDomain(d), Type: DomainEventType(d.Int32()), Detail: DomainEventDetail(d.Int32())}
	case procDomainEventCallbackDeviceRemoved:
		cb = d.Int32()
		ev = DomainEvent{ID: DomainEventIDDeviceRemoved, Domain: decodeDomain(d), DeviceAlias: d.String(maxString)}
	default:
		return nil
	}
	if err := d.Finish(); err != nil {
		return &ProtocolError{Msg: fmt.Sprintf("decoding %s event: %v", procedure(f.h.Procedure), err)}
	}
	c.subsMu.Lock()
	s := c.subs[cb]
	c.subsMu.Unlock()
	if s != nil {
		s.deliver(ev)
	}
	return nil
}
