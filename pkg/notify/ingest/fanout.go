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
	Topic      string          `json:"topic"`
	Sequence   int64           `json:"sequence"`
	MessageID  string          `json:"messageId"`
	ReceivedAt time.Time       `json:"receivedAt"` // UTC, RFC 3339 with nanoseconds
	Payload    json.RawMessage `json:"payload,omitempty"`
	// PayloadOmitted is set, and Payload left out, when the notification
	// with the payload would be larger than one stored item: the client
	// reads the event from the events://<topic> resource instead.
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
	updated, err := marshal(&notification{JSONRPC: "2.0", Method: "notifications/resources/updated",
		Params: &updatedParams{URI: EventURI(ev.Topic)}})
	if err != nil {
		return nil, err
	}
	if !withMessage {
		return [][]byte{updated}, nil
	}
	data := &EventData{Topic: ev.Topic, Sequence: ev.Seq, MessageID: ev.MessageID,
		ReceivedAt: ev.ReceivedAt.UTC(), Payload: ev.Data}
	if data.Payload == nil {
		data.Payload = json.RawMessage("null")
	}
	msg := &notification{JSONRPC: "2.0", Method: "notifications/message",
		Params: &messageParams{Level: "info", Logger: EventLogger(ev.Topic), Data: data}}
	message, err := marshal(msg)
	if err != nil {
		return nil, err
	}
	if len(message) > notify.MaxItemBytes {
		data.Payload, data.PayloadOmitted = nil, true
		if message, err = marshal(msg); err != nil {
			return nil, err
		}
	}
	return [][]byte{updated, message}, nil
}

// admitsInfo reports whether a session at log level admits an info
// message: when the client never set a level, or set debug or info.
func admitsInfo(level string) bool {
	switch level {
	case "", "debug", "info":
		return true
	}
	return false
}

// fanOut appends the notifications of ev to the GET stream of every
// session subscribed to its topic, once per session: the appends are
// idempotent on event/<topic>/<seq>, so that a retry completes a fan-out
// that failed part way and adds nothing where it had succeeded. The
// subscribers go to the store in batches of notify.MaxAppendEach
// (Store.AppendEach), in.concurrency batches at a time. It returns how
// many sessions were notified now. A failed batch does not stop the
// others; the error reports them all.
func (in *Ingester) fanOut(ctx context.Context, ev *notify.TopicEvent) (notified int, err error) {
	uri := EventURI(ev.Topic)
	ids, err := in.store.Subscribers(ctx, uri)
	if err != nil {
		return 0, fmt.Errorf("fan-out: listing the subscribers of %s: %w", uri, err)
	}
	if len(ids) == 0 {
		return 0, nil
	}
	// Both encodings up front: the batches share them read-only.
	batches := make(map[bool][][]byte, 2)
	for _, withMessage := range []bool{false, true} {
		if batches[withMessage], err = EventNotifications(ev, withMessage); err != nil {
			return 0, err
		}
	}
	pick := func(s *notify.Session) [][]byte { return batches[admitsInfo(s.LogLevel)] }
	var (
		key    = fmt.Sprintf("event/%s/%d", ev.Topic, ev.Seq)
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
				appended, err := in.store.AppendEach(ctx, batch, key, pick)
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
