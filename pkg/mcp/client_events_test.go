package mcp_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/mcpush/mcpush/pkg/mcp"
	"github.com/mcpush/mcpush/pkg/notify"
)

// TestClientEvents: the Go client lists event types and polls in both
// eras, across processes; PollLoop drains a backlog at once (hasMore) and
// otherwise waits at least its floor, however small nextPollMs is; a
// client with a handler of notifications/events/list_changed declares
// the extension and gets the notification (2025 era), without a warning.
func TestClientEvents(t *testing.T) {
	c := newCluster(t, 2, eventsOn, func(o *mcp.ServerOptions) { o.EventsPollInterval = time.Millisecond })
	putEventTypes(t, c.dbPath, notify.OpPut, "m1", `{"name":"order.created","topic":"orders"}`, `{"name":"alarm"}`)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, mode := range []mcp.ClientMode{mcp.ClientMode2025, mcp.ClientMode2026} {
		var (
			mu      sync.Mutex
			changed int
		)
		client := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, &mcp.ClientOptions{Mode: mode, Logger: slog.New(slog.DiscardHandler)})
		client.AddNotificationHandler("notifications/events/list_changed", func(context.Context, *mcp.ClientSession, string, json.RawMessage) {
			mu.Lock()
			changed++
			mu.Unlock()
		})
		cs, err := client.Connect(ctx, c.urls[0])
		if err != nil {
			t.Fatal(err)
		}
		types, err := cs.ListEvents(ctx)
		if err != nil || len(types) != 2 || types[0].Name != "alarm" || types[1].Name != "order.created" {
			t.Fatalf("mode %v: ListEvents = %v, %v", mode, types, err)
		}
		first, err := cs.PollEvents(ctx, &mcp.PollEventsParams{Name: "order.created"})
		if err != nil || first.Cursor == nil {
			t.Fatalf("mode %v: PollEvents = %+v, %v", mode, first, err)
		}
		var evs [][2]string
		for i := range 120 {
			evs = append(evs, [2]string{string(mode) + "-" + strconv.Itoa(i), `{"i":` + strconv.Itoa(i) + `}`})
		}
		appendTopic(t, c.dbPath, "orders", 0, evs...)

		var (
			got   []string
			polls []time.Time
		)
		floor := 1500 * time.Millisecond
		err = cs.PollLoop(ctx, mcp.PollEventsParams{Name: "order.created", Cursor: first.Cursor, MaxEvents: ptr(50)}, &mcp.PollLoopOptions{MinInterval: floor}, func(r *mcp.PollEventsResult) error {
			polls = append(polls, time.Now())
			for _, e := range r.Events {
				got = append(got, e.EventID)
			}
			if len(polls) == 5 {
				return mcp.ErrStopPolling
			}
			return nil
		})
		if err != nil {
			t.Fatalf("mode %v: PollLoop: %v", mode, err)
		}
		if len(got) != 120 || got[0] != mcp.EventID("order.created", evs[0][0]) || got[119] != mcp.EventID("order.created", evs[119][0]) {
			t.Errorf("mode %v: PollLoop got %d events", mode, len(got))
		}
		// Polls 1-3 drain 120 events (50, 50, 20: hasMore twice, at
		// once); 4 and 5 wait the floor, not nextPollMs (1 ms).
		if d := polls[2].Sub(polls[0]); d >= floor {
			t.Errorf("mode %v: draining the backlog took %v, want no wait", mode, d)
		}
		for i := 3; i < 5; i++ {
			if d := polls[i].Sub(polls[i-1]); d < floor {
				t.Errorf("mode %v: poll %d came %v after the previous one, less than the floor %v", mode, i+1, d, floor)
			}
		}
		if mode == mcp.ClientMode2025 {
			putEventTypes(t, c.dbPath, notify.OpPut, "m-"+string(mode), `{"name":"alarm","description":"changed"}`)
			deadline := time.Now().Add(5 * time.Second)
			for {
				mu.Lock()
				n := changed
				mu.Unlock()
				if n == 1 || time.Now().After(deadline) {
					if n != 1 {
						t.Errorf("2025 client: %d events list_changed, want 1", n)
					}
					break
				}
				time.Sleep(20 * time.Millisecond)
			}
		}
		cs.Close(ctx)
	}
}

func ptr[T any](v T) *T { return &v }
