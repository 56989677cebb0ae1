package ingest

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/mcpush/mcpush/pkg/notify"
)

// EventURI returns the resource URI of a topic's event log,
// events://<topic>: the URI sessions subscribe to.
func EventURI(topic string) string { return "events://" + topic }

// EventLogger returns the logger name of the notifications/message that
// carry a topic's events: events/<topic>.
func EventLogger(topic string) string { return "events/" + topic }

// EventData is the data of the notifications/message that carries an
// event to a subscribed session.
type EventData struct {
	Topic      string    `json:"topic"`
	Sequence   int64     `json:"sequence"`
	MessageID  string    `json:"messageId"`
	ReceivedAt time.Time `json:"receivedAt"` // UTC, RFC 3339 with nanoseconds
	// Data is the event's body, named as the event tools, the
	// events://<topic> resource and `mcpush watch --json` name it.
	Data json.RawMessage `json:"data,omitempty"`
	// Payload is Data again, under the name that notifications carried
	// before data; kept for the clients that read it (docs/events.md).
	Payload json.RawMessage `json:"payload,omitempty"`
	// PayloadOmitted is set, and Payload left out, when the notification
	// with the body twice would be larger than one stored item;
	// DataOmitted is set, and Data left out too, when it would be even
	// with the body once. The client then reads the event from the
	// events://<topic> resource.
	DataOmitted    bool `json:"dataOmitted,omitempty"`
	PayloadOmitted bool `json:"payloadOmitted,omitempty"`
}

type notification struct {
	JSONRPC string `json:"jsonrpc"`
	Method  string `json:"method"`
	Params  any    `json:"params"`
}

type updatedParams struct {
	URI string `json:"uri"`
}

type messageParams struct {
	Level  string     `json:"level"`
	Logger string     `json:"logger"`
	Data   *EventData `json:"data"`
}

// EventNotifications returns the notifications that tell a session
// subscribed to ev's topic of ev: notifications/resources/updated and,
// when withMessage is set, notifications/message (level info, logger
// events/<topic>) carrying the event.
func EventNotifications(ev *notify.TopicEvent, withMessage bool) ([][]byte, error) {
	return eventNotifications(ev, withMessage, false)
}

// eventNotifications is EventNotifications, with the payload left out of
// the message (PayloadOmitted) when omit is set.
func eventNotifications(ev *notify.TopicEvent, withMessage, omit bool) ([][]byte, error) {
	updated, err := marshal(&notification{JSONRPC: "2.0", Method: "notifications/resources/updated",
		Params: &updatedParams{URI: EventURI(ev.Topic)}})
	if err != nil {
		return nil, err
	}
	if !withMessage {
		return [][]byte{updated}, nil
	}
	data := &EventData{Topic: ev.Topic, Sequence: ev.Seq, MessageID: ev.MessageID,
		ReceivedAt: ev.ReceivedAt.UTC(), Data: ev.Data}
	if data.Data == nil {
		data.Data = json.RawMessage("null")
	}
	data.Payload = data.Data
	msg := &notification{JSONRPC: "2.0", Method: "notifications/message",
		Params: &messageParams{Level: "info", Logger: EventLogger(ev.Topic), Data: data}}
	message, err := marshal(msg)
	if err != nil {
		return nil, err
	}
	if omit || len(message) > notify.MaxItemBytes {
		// The old name goes first: its readers read the event from
		// events://<topic> when payloadOmitted says so.
		data.Payload, data.PayloadOmitted = nil, true
		if message, err = marshal(msg); err != nil {
			return nil, err
		}
	}
	if omit || len(message) > notify.MaxItemBytes {
		data.Data, data.DataOmitted = nil, true
		if message, err = marshal(msg); err != nil {
			return nil, err
		}
	}
	return [][]byte{updated, message}, nil
}

// admitsInfo reports whether a session at log level admits an info
// message: when the client never set a level, or set debug or info.
//
// It enforces the doorbell rule: a held stream's backing session (a
// subscriptions/listen or events/stream one, created at the highest
// level, emergency, by the server's createBacking in pkg/mcp/listen.go)
// is given only the notifications/resources/updated of an event, the
// doorbell that wakes its stream, never the notifications/message that
// carries the event's payload: an events stream reads the event from the
// topic's log, and a listen stream would drop the message. No other check
// keeps payloads out of backing sessions.
func admitsInfo(level string) bool {
	switch level {
	case "", "debug", "info":
		return true
	}
	return false
}

// CatchUp is how many of a topic's latest events a subscriber can get at
// once: when the fan-out of an event finds a subscription whose position
// is behind the event before it (the fan-out of that one has not reached
// the session yet: it runs at the same time, or failed and waits for its
// retry), it appends the events in between too, from the topic's log, so
// that the session gets them in order; the fan-out of those events then
// finds the session past them and adds nothing. A subscriber further
// behind gets the last CatchUp and misses the rest (still readable from
// events://<topic>).
const CatchUp = 12

// fanOut appends the notifications of ev to the GET stream of every
// session subscribed to its topic, in topic order and once per session:
// the subscription's position (Store.AppendEach) moves to ev.Seq with the
// append, and a subscription behind ev.Seq-1 gets the events in between
// first (CatchUp). A retry completes a fan-out that failed part way and
// adds nothing where it had succeeded. The subscribers go to the store in
// batches of notify.MaxAppendEach, in.concurrency batches at a time. It
// returns how many sessions were notified now. A failed batch does not
// stop the others; the error reports them all.
func (in *Ingester) fanOut(ctx context.Context, ev *notify.TopicEvent) (notified int, err error) {
	uri := EventURI(ev.Topic)
	ids, err := in.store.Subscribers(ctx, uri)
	if err != nil {
		return 0, fmt.Errorf("fan-out: listing the subscribers of %s: %w", uri, err)
	}
	if len(ids) == 0 {
		return 0, nil
	}
	pick, err := in.eventPicker(ctx, ev)
	if err != nil {
		return 0, err
	}
	var (
		mu     sync.Mutex
		failed int
		first  error
		next   = make(chan []string)
		wg     sync.WaitGroup
	)
	for range min(in.concurrency, (len(ids)+notify.MaxAppendEach-1)/notify.MaxAppendEach) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for batch := range next {
				appended, err := in.store.AppendEach(ctx, batch, uri, ev.Seq, pick)
				mu.Lock()
				notified += len(appended)
				if err != nil {
					in.logger.LogAttrs(ctx, slog.LevelError, "event fan-out to a batch of sessions failed",
						slog.String("messageId", ev.MessageID), slog.String("topic", ev.Topic), slog.Int64("seq", ev.Seq),
						slog.String("firstSession", batch[0]), slog.Int("sessions", len(batch)), slog.String("err", err.Error()))
					failed++
					if first == nil {
						first = err
					}
				}
				mu.Unlock()
			}
		}()
	}
	for batch := range slices.Chunk(ids, notify.MaxAppendEach) {
		next <- batch
	}
	close(next)
	wg.Wait()
	if failed > 0 {
		return notified, fmt.Errorf("fan-out of %s seq %d failed for %d of %d batches of sessions, first: %w",
			ev.Topic, ev.Seq, failed, (len(ids)+notify.MaxAppendEach-1)/notify.MaxAppendEach, first)
	}
	return notified, nil
}

// eventPicker returns the AppendEach pick of ev's fan-out: for a
// subscription at position at, the notifications of the topic's events
// after at up to ev (at most CatchUp); for one that no event has reached
// yet (position 0), those of the events published (ReceivedAt) since it
// started, and ev's. Each comes with the notifications/message only when
// the session's log level admits it; an earlier event's message leaves
// its payload out (PayloadOmitted) when it would not fit one Append.
func (in *Ingester) eventPicker(ctx context.Context, ev *notify.TopicEvent) (func(*notify.Session, notify.Position) [][]byte, error) {
	window := []notify.TopicEvent{*ev}
	if ev.Seq > 1 {
		evs, err := in.store.ReadTopicEvents(ctx, ev.Topic, max(0, ev.Seq-CatchUp), CatchUp)
		if err != nil {
			return nil, fmt.Errorf("fan-out: reading the events of %s before %d: %w", ev.Topic, ev.Seq, err)
		}
		window = window[:0]
		for _, e := range evs {
			if e.Seq < ev.Seq {
				window = append(window, e)
			}
		}
		window = append(window, *ev)
	}
	// The encodings of each event up front, the batches share them
	// read-only: by whether the message goes along, and a small one with
	// the message's payload left out for catching up on events that do
	// not fit whole.
	type encodings struct{ full, small map[bool][][]byte }
	enc := make([]encodings, len(window))
	for i := range window {
		enc[i] = encodings{make(map[bool][][]byte, 2), make(map[bool][][]byte, 2)}
		for _, withMessage := range []bool{false, true} {
			for _, omit := range []bool{false, true} {
				b, err := eventNotifications(&window[i], withMessage, omit)
				if err != nil {
					return nil, err
				}
				if omit {
					enc[i].small[withMessage] = b
				} else {
					enc[i].full[withMessage] = b
				}
			}
		}
	}
	sizeOf := func(b [][]byte) int {
		n := 0
		for _, d := range b {
			n += len(d)
		}
		return n
	}
	return func(s *notify.Session, p notify.Position) [][]byte {
		admit := admitsInfo(s.LogLevel) // false for a backing session: the doorbell rule
		last := len(window) - 1
		// The events after the position, ev's in full and the earlier
		// ones in full while they fit one Append, then with their
		// payloads left out; for a subscription no event has reached
		// yet, those published since it started (none when that is
		// unknown), and ev in any case.
		parts := [][][]byte{enc[last].full[admit]}
		values, size := len(parts[0]), sizeOf(parts[0])
		for i := last - 1; i >= 0 && window[i].Seq > p.At; i-- {
			if p.At == 0 && (p.Since.IsZero() || window[i].ReceivedAt.Before(p.Since)) {
				break
			}
			b := enc[i].full[admit]
			if size+sizeOf(b) > notify.MaxAppendBytes {
				b = enc[i].small[admit]
			}
			if values+len(b) > notify.MaxAppendBatch || size+sizeOf(b) > notify.MaxAppendBytes {
				break // cannot happen with CatchUp events of at most two values
			}
			parts = append(parts, b)
			values, size = values+len(b), size+sizeOf(b)
		}
		var out [][]byte
		for i := len(parts) - 1; i >= 0; i-- {
			out = append(out, parts[i]...)
		}
		return out
	}, nil
}
