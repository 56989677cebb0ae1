package mcp

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"
)

// Client side of the Events extension (events.go): list the event types,
// poll a subscription and hold a push stream of one (StreamEvents). A client that registers a handler for
// notifications/events/list_changed declares the extension in its
// capabilities, which is what makes a 2025-era server send it.

// ListEvents lists all event types (events/list), following pagination.
func (cs *ClientSession) ListEvents(ctx context.Context) ([]*EventType, error) {
	return listAll(ctx, cs, "events/list", func(r *ListEventsResult) ([]*EventType, string) { return r.Events, r.NextCursor })
}

// PollEvents makes one events/poll. A nil p.Cursor starts from now.
func (cs *ClientSession) PollEvents(ctx context.Context, p *PollEventsParams) (*PollEventsResult, error) {
	var res PollEventsResult
	if err := cs.Call(ctx, "events/poll", p, &res); err != nil {
		return nil, err
	}
	return &res, nil
}

// PollLoopOptions configure ClientSession.PollLoop. Nil means defaults.
type PollLoopOptions struct {
	// MinInterval is the floor of the wait between two polls, whatever
	// nextPollMs the server says (SEP-3415: a misbehaving server must not
	// make the client poll in a tight loop). Default: 1 s.
	MinInterval time.Duration
}

// DefaultPollFloor is the default PollLoopOptions.MinInterval.
const DefaultPollFloor = time.Second

// PollLoop polls the subscription p (its Cursor is where it starts: nil
// is now) until ctx ends or handle returns an error. handle gets every
// result in order, events or not: its Cursor is the one to persist. When
// a result says hasMore, the next poll follows at once; otherwise it
// waits the result's nextPollMs, and never less than MinInterval (nor
// when a result says hasMore but did not move the cursor). It returns
// ctx's error, handle's (nil for ErrStopPolling), or the first failed
// poll's.
func (cs *ClientSession) PollLoop(ctx context.Context, p PollEventsParams, opts *PollLoopOptions, handle func(*PollEventsResult) error) error {
	floor := DefaultPollFloor
	if opts != nil && opts.MinInterval > 0 {
		floor = opts.MinInterval
	}
	for {
		res, err := cs.PollEvents(ctx, &p)
		if err != nil {
			return err
		}
		if err := handle(res); err != nil {
			if errors.Is(err, ErrStopPolling) {
				return nil
			}
			return err
		}
		moved := res.Cursor != nil && (p.Cursor == nil || *res.Cursor != *p.Cursor)
		if res.Cursor != nil {
			p.Cursor = res.Cursor
		}
		wait := max(time.Duration(res.NextPollMs)*time.Millisecond, floor)
		if res.HasMore && moved {
			wait = 0
		}
		if wait == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
			continue
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
}

// EventStreamOptions configure ClientSession.StreamEvents. Nil means
// defaults.
type EventStreamOptions struct {
	// Silence is how long a stream may carry neither an event nor a
	// heartbeat before the client takes it for dead and reconnects from
	// its cursor: SEP-3415 says twice the heartbeat interval, which is at
	// most 30 s. Default: DefaultEventStreamSilence.
	Silence time.Duration
	// Remember is how many eventIds the client remembers to drop an
	// event delivered twice across reconnections. Default: 1000.
	Remember int
	// OnEnd, if set, runs after each stream ends, before the client
	// waits to reconnect (err: why it ended; nil for the server's end of
	// the stream, at its deadline).
	OnEnd func(err error)
}

// DefaultEventStreamSilence is the default EventStreamOptions.Silence.
const DefaultEventStreamSilence = 2 * MaxEventsHeartbeat

// EventStreamMessage is one message of an events/stream, as StreamEvents
// hands it on: Kind is "active" (the confirmation, again after a gap),
// "event" or "heartbeat". Cursor is the position to persist after it (nil
// for an event type without replay); Truncated, on an active, that
// events may have been skipped before it.
type EventStreamMessage struct {
	Kind      string
	Event     *EventOccurrence
	Cursor    *string
	Truncated bool
}

// EventsTerminatedError is returned by StreamEvents when the server ends
// the subscription (notifications/events/terminated: the event type was
// removed, or no longer accepts the subscription).
type EventsTerminatedError struct{ Err *Error }

func (e *EventsTerminatedError) Error() string {
	return "mcp: events/stream: the server ended the subscription: " + e.Err.Error()
}

func (e *EventsTerminatedError) Unwrap() error { return e.Err }

// StreamEvents holds the push subscription p (events/stream; its Cursor
// is where it starts: nil is now) until ctx ends, handle returns an
// error, or the server ends the subscription (*EventsTerminatedError).
// When a stream ends (at the server's deadline, on a network failure, or
// after Silence without a message) it opens a new one from the last
// cursor it received, after the client's reconnection back-off (the
// server's retry, RetryDelay, doubled for each stream in a row that
// brought nothing, at most MaxRetryDelay); an event whose eventId it has
// handed on already (among the last Remember) is dropped. A refusal of
// the first stream (an unknown event type, bad arguments or cursor) is
// returned at once, and so is ErrSessionNotFound (a 2025-era session that
// ended). handle sees every active, event and heartbeat in
// order, and runs on the calling goroutine's behalf (one at a time).
func (cs *ClientSession) StreamEvents(ctx context.Context, p StreamEventsParams, opts *EventStreamOptions, handle func(*EventStreamMessage) error) error {
	o := EventStreamOptions{Silence: DefaultEventStreamSilence, Remember: 1000}
	if opts != nil {
		if opts.Silence > 0 {
			o.Silence = opts.Silence
		}
		if opts.Remember > 0 {
			o.Remember = opts.Remember
		}
		o.OnEnd = opts.OnEnd
	}
	seen := map[string]bool{}
	var order []string
	failures, opened := 0, false
	for {
		progress := false
		var handleErr error
		st := &streamState{private: true}
		err := cs.streamEventsOnce(ctx, &p, o.Silence, st, func(m *EventStreamMessage) bool {
			if m.Kind == "active" {
				opened = true
			}
			if m.Cursor != nil {
				p.Cursor = m.Cursor
			}
			if m.Kind == "event" {
				progress = true
				if seen[m.Event.EventID] {
					return true
				}
				seen[m.Event.EventID] = true
				order = append(order, m.Event.EventID)
				if len(order) > o.Remember {
					delete(seen, order[0])
					order = order[1:]
				}
			}
			if err := handle(m); err != nil {
				handleErr = err
				return false
			}
			return true
		})
		switch {
		case handleErr != nil:
			if errors.Is(handleErr, ErrStopStreaming) {
				return nil
			}
			return handleErr
		case ctx.Err() != nil:
			return ctx.Err()
		}
		var term *EventsTerminatedError
		var rpcErr *Error
		if errors.As(err, &term) || (!opened && errors.As(err, &rpcErr)) || errors.Is(err, ErrSessionNotFound) {
			return err
		}
		if o.OnEnd != nil {
			o.OnEnd(err)
		}
		if progress || (err == nil && opened) {
			failures = 0
		} else {
			failures++
		}
		if err != nil {
			cs.c.log.Debug("mcp client: events/stream ended; reconnecting from the cursor", "err", err, "failures", failures)
		}
		if err := sleepCtx(ctx, cs.backoff(st.retry, failures)); err != nil {
			return err
		}
	}
}

// streamEventsOnce runs one events/stream request until its stream ends:
// nil when the server ended it (its result), the refusal, the
// termination (*EventsTerminatedError), or why it failed. on gets each
// message of the subscription; false stops the stream.
func (cs *ClientSession) streamEventsOnce(ctx context.Context, p *StreamEventsParams, silence time.Duration, st *streamState, on func(*EventStreamMessage) bool) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	params, err := json.Marshal(p)
	if err != nil {
		return err
	}
	var extra http.Header
	sid := cs.ID()
	if cs.is2026() {
		if params, extra, err = cs.request2026("events/stream", params); err != nil {
			return err
		}
		sid = ""
	}
	id := json.RawMessage(strconv.FormatInt(cs.nextID.Add(1), 10))
	body, err := json.Marshal(&Message{JSONRPC: "2.0", ID: id, Method: "events/stream", Params: params})
	if err != nil {
		return err
	}
	silent := time.AfterFunc(silence, cancel)
	defer silent.Stop()
	resp, err := cs.postStream(ctx, "events/stream", sid, body, extra)
	if err != nil {
		return err // the server refused the subscription, or was not reached
	}
	defer resp.Body.Close()
	var failed error
	st.onMessage = func(m *Message) {
		if failed != nil {
			return
		}
		silent.Reset(silence)
		msg, err := eventStreamMessage(m)
		switch {
		case err != nil:
			failed = err
		case msg != nil && !on(msg):
			failed = ErrStopStreaming
		default:
			return
		}
		cancel()
	}
	m, err := cs.readStream(resp.Body, canonicalID(id), st)
	switch {
	case failed != nil:
		return failed
	case m != nil && m.Error != nil:
		return m.Error
	case m != nil:
		return nil // the server ended the stream
	case err == nil:
		return errors.New("events/stream ended without its result")
	case ctx.Err() != nil:
		return fmt.Errorf("events/stream: no event or heartbeat for %v", silence)
	}
	return err
}

// eventStreamMessage decodes a message of an events stream (nil for one
// of another kind).
func eventStreamMessage(m *Message) (*EventStreamMessage, error) {
	var p struct {
		Cursor    *string `json:"cursor"`
		Truncated bool    `json:"truncated"`
		Error     *Error  `json:"error"`
	}
	switch m.Method {
	case methodEventsActive, methodEventsHeartbeat:
		if err := json.Unmarshal(m.Params, &p); err != nil {
			return nil, fmt.Errorf("events/stream: %s: %w", m.Method, err)
		}
		kind := "active"
		if m.Method == methodEventsHeartbeat {
			kind = "heartbeat"
		}
		return &EventStreamMessage{Kind: kind, Cursor: p.Cursor, Truncated: p.Truncated}, nil
	case methodEventsEvent:
		var ev EventOccurrence
		if err := json.Unmarshal(m.Params, &ev); err != nil || ev.EventID == "" {
			return nil, fmt.Errorf("events/stream: an event without an eventId: %v", err)
		}
		return &EventStreamMessage{Kind: "event", Event: &ev, Cursor: ev.Cursor}, nil
	case methodEventsTerminated:
		if err := json.Unmarshal(m.Params, &p); err != nil || p.Error == nil {
			return nil, fmt.Errorf("events/stream: %s without an error: %v", m.Method, err)
		}
		return nil, &EventsTerminatedError{Err: p.Error}
	}
	return nil, nil
}

// SubscribeEvents makes one events/subscribe: a new webhook subscription,
// or the refresh of the one with the same key (name, arguments,
// delivery.url; the principal is the client's). Set p.TTLMs to
// json.RawMessage("null") to ask for no expiry. Refresh before the
// result's RefreshBefore (when not nil) to keep it.
func (cs *ClientSession) SubscribeEvents(ctx context.Context, p *SubscribeEventsParams) (*SubscribeEventsResult, error) {
	var res SubscribeEventsResult
	if err := cs.Call(ctx, "events/subscribe", p, &res); err != nil {
		return nil, err
	}
	return &res, nil
}

// UnsubscribeEvents makes one events/unsubscribe: the webhook
// subscription of the same key ends.
func (cs *ClientSession) UnsubscribeEvents(ctx context.Context, p *UnsubscribeEventsParams) error {
	var res UnsubscribeEventsResult
	return cs.Call(ctx, "events/unsubscribe", p, &res)
}

// NewWebhookSecret returns a fresh webhook signing secret: "whsec_" and
// the base64 of 32 random bytes (SEP-3415: clients generate it from a
// CSPRNG, never by hand).
func NewWebhookSecret() string {
	b := make([]byte, 32)
	rand.Read(b)
	return "whsec_" + base64.StdEncoding.EncodeToString(b)
}
