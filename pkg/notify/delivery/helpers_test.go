package delivery

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/mcpush/mcpush/internal/moto"
	"github.com/mcpush/mcpush/internal/testutil"
	"github.com/mcpush/mcpush/pkg/notify"
	"github.com/mcpush/mcpush/pkg/notify/sqlitestore"
)

func TestMain(m *testing.M) {
	code := m.Run()
	moto.Stop()
	os.Exit(code)
}

func newStore(t *testing.T) notify.Store {
	t.Helper()
	st, err := sqlitestore.New(filepath.Join(t.TempDir(), "mcpush.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// memQueue is a Queue that a test drains by hand: tasks without a delay
// run at drain; delayed ones are only held (Held; a test sweeps instead).
type memQueue struct{ testutil.Queue[Task] }

func (q *memQueue) Enqueue(ctx context.Context, tasks ...Task) error {
	for _, t := range tasks {
		if t.Delay > 0 {
			q.Hold(t)
		} else {
			q.Queue.Enqueue(ctx, t)
		}
	}
	return nil
}

// drain runs every immediate task, and those they make, until none is
// left.
func (q *memQueue) drain(ctx context.Context, t *testing.T, e *Engine) {
	q.Drain(t, func(task Task) error { _, err := e.Handle(ctx, task); return err })
}

// publish appends events (message id, data JSON pairs) to topic orders
// and enqueues their fan-outs, as an ingest does.
func publish(t *testing.T, st notify.Store, q Queue, pairs ...string) []notify.TopicEvent {
	t.Helper()
	var out []notify.TopicEvent
	for i := 0; i+1 < len(pairs); i += 2 {
		ev, _, err := st.AppendTopicEvent(context.Background(), "orders", pairs[i], time.Now(), json.RawMessage(pairs[i+1]))
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, ev)
		if err := q.Enqueue(context.Background(), FanOut(&ev)); err != nil {
			t.Fatal(err)
		}
	}
	return out
}
