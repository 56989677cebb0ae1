package mcp_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/mcpush/mcpush/internal/eventserver"
	"github.com/mcpush/mcpush/pkg/mcp"
)

// TestClientResumesAfterRetry: the server ends every stream after 300ms
// with "retry:" (as it does before a Lambda deadline); the client reopens
// the GET stream after the delay with Last-Event-ID, and every event
// arrives once, in order.
func TestClientResumesAfterRetry(t *testing.T) {
	es := eventserver.Start(t, &mcp.StreamableOptions{RetryInterval: 50 * time.Millisecond, MaxStreamDuration: 300 * time.Millisecond})

	var mu sync.Mutex
	var resumes []string
	var got []int
	rt := roundTrip(func(r *http.Request) (*http.Response, error) {
		if id := r.Header.Get("Last-Event-ID"); id != "" && r.Method == http.MethodGet {
			mu.Lock()
			resumes = append(resumes, id)
			mu.Unlock()
		}
		return http.DefaultTransport.RoundTrip(r)
	})
	// MinRetryDelay: the server asks for 50ms, below the default floor.
	client := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, &mcp.ClientOptions{HTTPClient: &http.Client{Transport: rt}, Logger: slog.New(slog.DiscardHandler), MinRetryDelay: 50 * time.Millisecond})
	client.AddNotificationHandler("notifications/message", func(ctx context.Context, cs *mcp.ClientSession, method string, params json.RawMessage) {
		var p struct {
			Data struct {
				Payload struct {
					N int `json:"n"`
				} `json:"payload"`
			} `json:"data"`
		}
		json.Unmarshal(params, &p)
		mu.Lock()
		got = append(got, p.Data.Payload.N)
		mu.Unlock()
	})
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	cs, err := client.Connect(ctx, es.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close(ctx)
	if err := cs.SetLoggingLevel(ctx, "info"); err != nil {
		t.Fatal(err)
	}
	if err := cs.Subscribe(ctx, "events://resume"); err != nil {
		t.Fatal(err)
	}
	const n = 10
	for i := range n {
		es.Publish("resume", i)
		time.Sleep(100 * time.Millisecond)
	}
	waitFor(t, "every event", func() bool { mu.Lock(); defer mu.Unlock(); return len(got) >= n })
	time.Sleep(400 * time.Millisecond) // a repeat would arrive by now
	mu.Lock()
	defer mu.Unlock()
	want := make([]int, n)
	for i := range want {
		want[i] = i
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	if len(resumes) < 2 {
		t.Errorf("GET stream resumed %d times with Last-Event-ID, want several: %q", len(resumes), resumes)
	}
}

type roundTrip func(*http.Request) (*http.Response, error)

func (f roundTrip) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
