package mcp

import (
	"context"
	"encoding/json"
	"path/filepath"
	"testing"
	"time"

	"github.com/mcpush/mcpush/pkg/notify"
	"github.com/mcpush/mcpush/pkg/notify/sqlitestore"
)

// lostParkStore lands the first UpdateSession that parks a listen stream,
// lets another stream adopt the session at once, and then reports a
// conflict: what a park whose answer was lost, retried after an
// adoption, sees.
type lostParkStore struct {
	*sqlitestore.Store
	adopter notify.ListenState // the adopting stream's Listen
	done    bool
}

func (s *lostParkStore) UpdateSession(ctx context.Context, st *notify.Session) error {
	if s.done || st.Listen.Parked == "" {
		return s.Store.UpdateSession(ctx, st)
	}
	s.done = true
	landed := *st
	if err := s.Store.UpdateSession(ctx, &landed); err != nil {
		return err
	}
	landed.Listen = s.adopter
	if err := s.Store.UpdateSession(ctx, &landed); err != nil {
		return err
	}
	return notify.ErrConflict
}

// TestParkAfterAdoption: a park whose first write landed, and whose
// session another stream adopted before the park tried again, leaves the
// adopter's session as the adopter wrote it: neither parked again on top
// of the adoption nor deleted.
func TestParkAfterAdoption(t *testing.T) {
	inner, err := sqlitestore.New(filepath.Join(t.TempDir(), "park.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer inner.Close()
	adopter := notify.ListenState{Process: "process-other", Request: "s:L2"}
	st := &lostParkStore{Store: inner, adopter: adopter}
	srv := NewServer(&Implementation{Name: "park", Version: "1"}, st, nil)
	ctx := context.Background()
	now := time.Now()
	info := notify.ListenState{Process: "process-self", Request: "s:L1"}
	sess := &notify.Session{ID: "listen-park-test-0123456789", Principal: listenPrincipal("alice"), ProtocolVersion: "2026-07-28",
		Listen: info, Initialized: true, CreatedAt: now, ExpiresAt: now.Add(time.Hour)}
	if err := inner.CreateSession(ctx, sess); err != nil {
		t.Fatal(err)
	}
	l := &listenStream{srv: srv, sess: &ServerSession{srv: srv, state: sess}, principal: "alice",
		id: json.RawMessage(`"L1"`), filter: &SubscriptionFilter{ToolsListChanged: true}, ttl: time.Hour, info: info}
	l.park(ctx)
	got, err := inner.GetSession(ctx, sess.ID)
	if err != nil {
		t.Fatalf("after the park the adopted session is gone: %v", err)
	}
	if got.Listen != adopter {
		t.Errorf("adopted session records %+v after the park's retry, want the adopter's %+v", got.Listen, adopter)
	}
	if !st.done {
		t.Fatal("the park wrote nothing")
	}
}
