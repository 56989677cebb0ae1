package sqlitestore

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/mcpush/mcpush/pkg/notify"
)

// benchSession creates a store with one session shaped like a real one:
// client info and capabilities, three notified hashes, a few subscriptions.
func benchSession(b *testing.B) *Store {
	b.Helper()
	s, err := New(filepath.Join(b.TempDir(), "bench.db"), nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	sess := &notify.Session{
		ID:                 "bench-session-0123456789abcdef",
		ProtocolVersion:    "2025-06-18",
		ClientInfo:         json.RawMessage(`{"name":"bench-client","version":"1.2.3"}`),
		ClientCapabilities: json.RawMessage(`{"roots":{"listChanged":true},"sampling":{},"elicitation":{}}`),
		LogLevel:           "info",
		Initialized:        true,
		CreatedAt:          time.Now(),
		ExpiresAt:          time.Now().Add(time.Hour),
		NotifiedHashes: map[string]string{
			notify.RegistryTools:     notify.HashItems(map[string]json.RawMessage{"a": json.RawMessage(`1`)}),
			notify.RegistryResources: notify.HashItems(map[string]json.RawMessage{"b": json.RawMessage(`2`)}),
			notify.RegistryPrompts:   notify.HashItems(map[string]json.RawMessage{"c": json.RawMessage(`3`)}),
		},
	}
	for i := range 3 {
		sess.Subscriptions = append(sess.Subscriptions, fmt.Sprintf("events://topic-%d", i))
	}
	if err := s.CreateSession(b.Context(), sess); err != nil {
		b.Fatal(err)
	}
	return s
}

func BenchmarkGetSession(b *testing.B) {
	const id = "bench-session-0123456789abcdef"
	b.Run("serial", func(b *testing.B) {
		s := benchSession(b)
		ctx := b.Context()
		for b.Loop() {
			if _, err := s.GetSession(ctx, id); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("parallel", func(b *testing.B) {
		s := benchSession(b)
		ctx := b.Context()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if _, err := s.GetSession(ctx, id); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
}

func BenchmarkAppend(b *testing.B) {
	const id = "bench-session-0123456789abcdef"
	data := [][]byte{[]byte(`{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}`)}
	b.Run("serial", func(b *testing.B) {
		s := benchSession(b)
		ctx := b.Context()
		for b.Loop() {
			if _, _, err := s.Append(ctx, id, "get", data, nil); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("cas", func(b *testing.B) {
		s := benchSession(b)
		ctx := b.Context()
		sess, err := s.GetSession(ctx, id)
		if err != nil {
			b.Fatal(err)
		}
		old := sess.NotifiedHashes[notify.RegistryTools]
		i := 0
		for b.Loop() {
			i++
			next := fmt.Sprint(i)
			_, ok, err := s.Append(ctx, id, "get", data, &notify.AppendOptions{
				NotifiedHash: &notify.HashCAS{Registry: notify.RegistryTools, Old: old, New: next}})
			if err != nil || !ok {
				b.Fatal(ok, err)
			}
			old = next
		}
	})
	b.Run("parallel", func(b *testing.B) {
		s := benchSession(b)
		ctx := b.Context()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if _, _, err := s.Append(ctx, id, "get", data, nil); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
}
