package mcp

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
)

// Fault injection into live events/stream streams, for test builds: the
// Events conformance suite grades what a push stream does when its
// upstream fails, loses retention or ends, which a healthy server never
// does during a run, so a test build exposes diagnostic controls
// (internal/eventsconformance) that inject those conditions through an
// EventFaults set as ServerOptions.EventFaults. A production server
// leaves it nil: its streams then never look at it.
//
// An EventFaults reaches the streams of the processes whose servers were
// built with it (this process), not those of other processes sharing the
// store.

// EventFault is a condition EventFaults.Inject makes live push streams of
// an event type see.
type EventFault int

// The faults of EventFaults.Inject.
const (
	// FaultUpstreamError is a recoverable upstream failure: each live
	// stream of the type sends one notifications/events/error (code
	// -32603, data.reason "upstream") and goes on.
	FaultUpstreamError EventFault = iota + 1
	// FaultGap is a retention gap: each live stream of the type sends a
	// fresh notifications/events/active with truncated true, and goes on
	// from its position.
	FaultGap
	// FaultTerminate ends each live stream of the type with
	// notifications/events/terminated and the empty result, and every
	// stream of the type opened later by the same servers: it is terminal
	// for the type, for the life of the EventFaults.
	FaultTerminate
)

// MaxFaultTypes bounds the event types one EventFaults keeps faults for.
const MaxFaultTypes = 256

// EventFaults injects faults into the live events/stream streams of the
// servers built with it (ServerOptions.EventFaults). The zero value is
// ready to use; it is safe for concurrent use.
type EventFaults struct {
	mu      sync.Mutex
	types   map[string]faultMark
	servers []*Server
}

// faultMark counts the faults injected for one event type; a stream keeps
// the counts it has reported.
type faultMark struct {
	errors, gaps int
	terminated   bool
}

// Inject makes the live push streams of event type name, on the servers
// built with f, see fault at their next read, which it starts at once.
func (f *EventFaults) Inject(name string, fault EventFault) error {
	if name == "" {
		return errors.New("mcp: EventFaults.Inject: no event type")
	}
	f.mu.Lock()
	m, ok := f.types[name]
	if !ok && len(f.types) >= MaxFaultTypes {
		f.mu.Unlock()
		return fmt.Errorf("mcp: EventFaults.Inject: faults for more than %d event types", MaxFaultTypes)
	}
	switch fault {
	case FaultUpstreamError:
		m.errors++
	case FaultGap:
		m.gaps++
	case FaultTerminate:
		m.terminated = true
	default:
		f.mu.Unlock()
		return fmt.Errorf("mcp: EventFaults.Inject: unknown fault %d", fault)
	}
	if f.types == nil {
		f.types = map[string]faultMark{}
	}
	f.types[name] = m
	servers := slices.Clone(f.servers)
	f.mu.Unlock()
	for _, s := range servers {
		s.watcher.wakeAll()
	}
	return nil
}

// bind makes s's streams subject to f (NewServer).
func (f *EventFaults) bind(s *Server) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.servers = append(f.servers, s)
}

// mark returns the faults injected for event type name; nil f has none.
func (f *EventFaults) mark(name string) faultMark {
	if f == nil {
		return faultMark{}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.types[name]
}

// wakeAll wakes every held stream of this process (each reads, and finds
// whatever it was woken for, or nothing).
func (w *watcher) wakeAll() {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, cs := range w.waiters {
		for c := range cs {
			notifyChan(c)
		}
	}
}

// startFaults is where a new stream starts counting: the faults injected
// before it opened are not its own, except a termination.
func (es *eventStream) startFaults() {
	es.faults = es.srv.opts.EventFaults.mark(es.topic.e.Name)
	es.faults.terminated = false
}

// injected returns the messages of the faults injected for the stream's
// event type since it last looked (at most one error and one active, and
// the termination), and whether the stream ends.
func (es *eventStream) injected() ([]heldMsg, bool) {
	f := es.srv.opts.EventFaults
	if f == nil {
		return nil, false
	}
	now := f.mark(es.topic.e.Name)
	var out []heldMsg
	if es.faults.errors < now.errors {
		es.faults.errors = now.errors
		e := &Error{Code: CodeInternalError, Message: "UpstreamError: the event source failed; the subscription stays active", Data: json.RawMessage(`{"reason":"upstream"}`)}
		out = append(out, es.out.notification(methodEventsError, map[string]any{"error": e}))
	}
	if es.faults.gaps < now.gaps {
		es.faults.gaps = now.gaps
		out = append(out, es.active(true))
	}
	if now.terminated && !es.out.terminated {
		e := &Error{Code: CodeInternalError, Message: "Terminated: the event source ended the subscription", Data: json.RawMessage(`{"reason":"source_ended"}`)}
		out = append(out, es.out.terminate(e))
		return out, true
	}
	return out, false
}
