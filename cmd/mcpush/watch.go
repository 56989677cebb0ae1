package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/mcpush/mcpush/pkg/mcp"
)

// watchEvent is one event as watch prints it with --json.
type watchEvent struct {
	Type       string          `json:"type"` // "event"
	Topic      string          `json:"topic"`
	Sequence   int64           `json:"sequence"`
	MessageID  string          `json:"messageId"`
	ReceivedAt time.Time       `json:"receivedAt"`
	Data       json.RawMessage `json:"data"`
}

// watchListChanged is a list_changed as watch prints it with --json.
type watchListChanged struct {
	Type string `json:"type"` // "list_changed"
	List string `json:"list"` // tools, prompts or resources
}

// eventData is the data of the notifications/message that carries an
// event (logger "events/<topic>").
type eventData struct {
	Topic          string          `json:"topic"`
	Sequence       int64           `json:"sequence"`
	MessageID      string          `json:"messageId"`
	ReceivedAt     time.Time       `json:"receivedAt"`
	Data           json.RawMessage `json:"data"`
	DataOmitted    bool            `json:"dataOmitted"`
	Payload        json.RawMessage `json:"payload"` // data, from servers before data
	PayloadOmitted bool            `json:"payloadOmitted"`
}

// body is the event's body and whether it was left out, under either name.
func (d *eventData) body() (json.RawMessage, bool) {
	if d.Data != nil || d.DataOmitted {
		return d.Data, d.DataOmitted
	}
	return d.Payload, d.PayloadOmitted
}

// recentEvents is the structured result of the events_recent tool.
type recentEvents struct {
	Events []struct {
		Topic      string          `json:"topic"`
		Sequence   int64           `json:"sequence"`
		MessageID  string          `json:"messageId"`
		ReceivedAt time.Time       `json:"receivedAt"`
		Data       json.RawMessage `json:"data"`
	} `json:"events"`
}

// watcher prints each event of its topics once, in sequence order: a
// sequence already printed is a duplicate and skipped; a gap (events the
// session missed, e.g. while a new session replaced a lost one) is filled
// from the events_recent tool first.
type watcher struct {
	e      *env
	asJSON bool
	topics map[string]bool

	mu    sync.Mutex
	last  map[string]int64 // per topic, the last sequence printed
	ready bool             // the baseline is set
	// reported is when dropped notifications were last reported.
	reported time.Time
}

// cmdWatch subscribes to events://T for each topic and prints events and
// list_changed notifications until ctx ends.
func cmdWatch(ctx context.Context, e *env, c *common, topics []string, asJSON bool) error {
	w := &watcher{e: e, asJSON: asJSON, topics: map[string]bool{}, last: map[string]int64{}}
	for _, t := range topics {
		w.topics[t] = true
	}
	listChanged := func(list string) mcp.NotificationHandler {
		return func(ctx context.Context, cs *mcp.ClientSession, method string, params json.RawMessage) {
			w.print(&watchListChanged{Type: "list_changed", List: list}, list+"/list_changed")
		}
	}
	client, err := newClient(ctx, e, c, &mcp.ClientOptions{
		Reconnect:          true,
		ReconnectedHandler: w.catchUp,
		DroppedHandler:     w.dropped,
	})
	if err != nil {
		return err
	}
	client.AddNotificationHandler("notifications/message", w.onMessage)
	client.AddNotificationHandler("notifications/resources/updated", w.onUpdated)
	// 2026 era: a listen stream (re)opened after a gap replays nothing;
	// read what each topic got meanwhile.
	client.AddNotificationHandler("notifications/subscriptions/acknowledged", func(ctx context.Context, cs *mcp.ClientSession, _ string, _ json.RawMessage) {
		w.mu.Lock()
		ready := w.ready
		w.mu.Unlock()
		if ready {
			w.catchUp(ctx, cs)
		}
	})
	client.AddNotificationHandler("notifications/tools/list_changed", listChanged("tools"))
	client.AddNotificationHandler("notifications/prompts/list_changed", listChanged("prompts"))
	client.AddNotificationHandler("notifications/resources/list_changed", listChanged("resources"))
	return runSession(ctx, c, client, func(cs *mcp.ClientSession) error {
		if len(topics) > 0 {
			if err := w.baseline(ctx, cs); err != nil {
				return err
			}
			if err := cs.SetLoggingLevel(ctx, "info"); err != nil {
				return err
			}
			for _, t := range topics {
				if err := cs.Subscribe(ctx, "events://"+t); err != nil {
					return err
				}
			}
			// Events published between the baseline and the subscriptions
			// came with no notification: print them now.
			w.catchUp(ctx, cs)
		}
		fmt.Fprintf(e.stderr, "mcpush: watching %s (topics: %s); interrupt to stop\n", c.url, strings.Join(topics, ", "))
		<-ctx.Done()
		return nil
	})
}

// droppedReportEvery spaces watch's reports of dropped notifications.
const droppedReportEvery = 5 * time.Second

// dropped runs after the client dropped notifications because watch could
// not keep up (its output is slow, or the server floods it): it says so on
// stderr (at most every droppedReportEvery) and reads what the topics got
// from events_recent.
func (w *watcher) dropped(ctx context.Context, cs *mcp.ClientSession, n int64) {
	w.mu.Lock()
	report := time.Since(w.reported) >= droppedReportEvery
	if report {
		w.reported = time.Now()
	}
	ready := w.ready
	w.mu.Unlock()
	if report {
		fmt.Fprintf(w.e.stderr, "mcpush: %d notifications dropped so far: watch could not keep up with the server (the client queues at most 10000 notifications or 32 MiB); reading missed events from events_recent\n", n)
	}
	if ready {
		w.catchUp(ctx, cs)
	}
}

// baseline records each topic's last sequence, so that only later events
// are printed and any gap after it can be filled.
func (w *watcher) baseline(ctx context.Context, cs *mcp.ClientSession) error {
	res, err := cs.CallTool(ctx, "topics_list", nil, nil)
	if err != nil {
		return err
	}
	var out struct {
		Topics []struct {
			Name         string `json:"name"`
			LastSequence int64  `json:"lastSequence"`
		} `json:"topics"`
	}
	raw, _ := res.StructuredContent.(json.RawMessage)
	if res.IsError || json.Unmarshal(raw, &out) != nil {
		return fmt.Errorf("topics_list gave no topics: %v", res.Content)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, t := range out.Topics {
		if w.topics[t.Name] {
			w.last[t.Name] = t.LastSequence
		}
	}
	w.ready = true
	return nil
}

func (w *watcher) onMessage(ctx context.Context, cs *mcp.ClientSession, _ string, params json.RawMessage) {
	var m struct {
		Logger string          `json:"logger"`
		Data   json.RawMessage `json:"data"`
	}
	if json.Unmarshal(params, &m) != nil || !strings.HasPrefix(m.Logger, "events/") {
		return
	}
	var ev eventData
	if err := json.Unmarshal(m.Data, &ev); err != nil || !w.topics[ev.Topic] {
		return
	}
	w.mu.Lock()
	last := w.last[ev.Topic]
	w.mu.Unlock()
	if ev.Sequence <= last {
		return // printed already
	}
	body, omitted := ev.body()
	if ev.Sequence > last+1 || omitted {
		// Missed events, or a payload too large for the notification:
		// read them from the topic's log.
		w.fill(ctx, cs, ev.Topic, ev.Sequence)
		return
	}
	w.emit(&watchEvent{Type: "event", Topic: ev.Topic, Sequence: ev.Sequence, MessageID: ev.MessageID, ReceivedAt: ev.ReceivedAt, Data: body})
}

// onUpdated reads a topic's new events when its resource changed. In the
// 2025 era the events themselves follow as notifications/message; the
// 2026 era's listen stream carries only resources/updated.
func (w *watcher) onUpdated(ctx context.Context, cs *mcp.ClientSession, _ string, params json.RawMessage) {
	if init := cs.InitializeResult(); init == nil || init.ProtocolVersion < "2026" {
		return
	}
	var p struct {
		URI string `json:"uri"`
	}
	if json.Unmarshal(params, &p) != nil {
		return
	}
	if topic, ok := strings.CutPrefix(p.URI, "events://"); ok && w.topics[topic] {
		w.fill(ctx, cs, topic, 0)
	}
}

// catchUp prints what a replaced session missed, for every topic.
func (w *watcher) catchUp(ctx context.Context, cs *mcp.ClientSession) {
	for t := range w.topics {
		w.fill(ctx, cs, t, 0)
	}
}

// fill prints the events of topic after the last printed one, up to
// through (0: all there are), from the events_recent tool.
func (w *watcher) fill(ctx context.Context, cs *mcp.ClientSession, topic string, through int64) {
	for {
		w.mu.Lock()
		last := w.last[topic]
		w.mu.Unlock()
		if through > 0 && last >= through {
			return
		}
		res, err := w.recent(ctx, cs, topic, last)
		if err != nil {
			fmt.Fprintf(w.e.stderr, "mcpush: reading missed events of %s after %d: %v\n", topic, last, err)
			return
		}
		var out recentEvents
		raw, _ := res.StructuredContent.(json.RawMessage)
		if err := json.Unmarshal(raw, &out); err != nil || len(out.Events) == 0 {
			return
		}
		for _, ev := range out.Events {
			if through > 0 && ev.Sequence > through {
				return
			}
			w.emit(&watchEvent{Type: "event", Topic: topic, Sequence: ev.Sequence, MessageID: ev.MessageID, ReceivedAt: ev.ReceivedAt, Data: ev.Data})
		}
		w.mu.Lock()
		moved := w.last[topic] > last
		w.mu.Unlock()
		if !moved {
			return
		}
	}
}

// recentPage is how many events one events_recent call asks for: few
// enough that a page of large events stays far below what the client
// accepts in one response; fill pages on until it has caught up.
const recentPage = 20

// recentAttempts bounds the attempts of one events_recent call; a server
// process may be restarting (the first attempts then fail).
const recentAttempts = 10

// recent calls events_recent, retrying failures with a growing delay.
func (w *watcher) recent(ctx context.Context, cs *mcp.ClientSession, topic string, after int64) (*mcp.CallToolResult, error) {
	delay := 200 * time.Millisecond
	for attempt := 1; ; attempt++ {
		res, err := cs.CallTool(ctx, "events_recent", map[string]any{"topic": topic, "after": after, "limit": recentPage}, nil)
		if err == nil && res.IsError {
			err = fmt.Errorf("events_recent: %v", res.Content)
		}
		if err == nil || attempt == recentAttempts || ctx.Err() != nil {
			return res, err
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(delay):
		}
		delay = min(2*delay, 2*time.Second)
	}
}

// emit prints an event if it is the next of its topic.
func (w *watcher) emit(ev *watchEvent) {
	w.mu.Lock()
	if ev.Sequence <= w.last[ev.Topic] {
		w.mu.Unlock()
		return
	}
	w.last[ev.Topic] = ev.Sequence
	w.mu.Unlock()
	w.print(ev, fmt.Sprintf("%s #%d %s %s", ev.Topic, ev.Sequence, ev.ReceivedAt.Format(time.RFC3339), ev.Data))
}

func (w *watcher) print(v any, human string) {
	if w.asJSON {
		writeJSON(w.e.stdout, v, false)
		return
	}
	fmt.Fprintln(w.e.stdout, human)
}
