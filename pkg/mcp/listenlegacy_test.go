package mcp

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/mcpush/mcpush/internal/moto"
	"github.com/mcpush/mcpush/pkg/notify"
	"github.com/mcpush/mcpush/pkg/notify/dynamostore"
	"github.com/mcpush/mcpush/pkg/notify/sqlitestore"
)

// legacyStores open a store holding sessions as the version before
// notify.Session.Listen wrote them: their listen state as JSON in their
// ClientInfo (the sessions given, created with that ClientInfo and no
// Listen). On SQLite the file is then taken back to schema version 3
// (without the listen columns) and opened again, which upgrades it; on
// DynamoDB the items are what that version wrote (a zero Listen writes
// no listen attribute).
var legacyStores = []struct {
	name string
	open func(t *testing.T, legacy []*notify.Session) Store
}{
	{"sqlite", func(t *testing.T, legacy []*notify.Session) Store {
		path := filepath.Join(t.TempDir(), "legacy.db")
		st, err := sqlitestore.New(path, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, sess := range legacy {
			if err := st.CreateSession(t.Context(), sess); err != nil {
				t.Fatal(err)
			}
		}
		st.Close()
		db, err := sql.Open("sqlite", path)
		if err != nil {
			t.Fatal(err)
		}
		for _, q := range []string{
			`ALTER TABLE sessions DROP COLUMN listen_process`, `ALTER TABLE sessions DROP COLUMN listen_request`,
			`ALTER TABLE sessions DROP COLUMN listen_parked`, `ALTER TABLE sessions DROP COLUMN listen_after`,
			`ALTER TABLE sessions DROP COLUMN listen_session`, `PRAGMA user_version = 3`,
		} {
			if _, err := db.Exec(q); err != nil {
				t.Fatalf("%s: %v", q, err)
			}
		}
		db.Close()
		if st, err = sqlitestore.New(path, nil); err != nil {
			t.Fatalf("opening the version 3 file: %v", err)
		}
		t.Cleanup(func() { st.Close() })
		return st
	}},
	{"dynamodb", func(t *testing.T, legacy []*notify.Session) Store {
		client := moto.NewClient(context.Background(), moto.Start(t))
		table := fmt.Sprintf("legacy-%d", time.Now().UnixNano())
		if err := dynamostore.CreateTable(context.Background(), client, table); err != nil {
			t.Fatal(err)
		}
		st := dynamostore.New(client, table, nil)
		for _, sess := range legacy {
			if err := st.CreateSession(t.Context(), sess); err != nil {
				t.Fatal(err)
			}
		}
		return st
	}},
}

// TestListenLegacyRecords: after an upgrade, the listen streams that the
// previous version recorded in their backing sessions' ClientInfo are
// still found: a parked one is adopted by its principal's listen with
// its filter (from its read position, the session now recording the
// adopter in Listen), a served one is ended by a notifications/cancelled
// of its request (the cancellation record appended to its log), and one
// whose process is gone is reclaimed.
func TestListenLegacyRecords(t *testing.T) {
	for _, tc := range legacyStores {
		t.Run(tc.name, func(t *testing.T) {
			ctx := t.Context()
			now := time.Now()
			probe := NewServer(&Implementation{Name: "legacy", Version: "1"}, nil, &ServerOptions{DynamicRegistries: true})
			filter := &SubscriptionFilter{ToolsListChanged: true}
			key := listenParkKey("alice", probe.acknowledged(filter))
			lp := listenPrincipal("alice")
			legacy := func(id, info string) *notify.Session {
				return &notify.Session{ID: id, Principal: lp, ProtocolVersion: ProtocolVersion2026, ClientInfo: json.RawMessage(info),
					Initialized: true, CreatedAt: now, ExpiresAt: now.Add(listenParkFor)}
			}
			st := tc.open(t, []*notify.Session{
				legacy("listen-legacy-parked", `{"mcpush/parked":"`+key+`","mcpush/after":3}`),
				legacy("listen-legacy-served", `{"mcpush/process":"process-old","mcpush/request":"s:L0"}`),
			})
			srv := NewServer(&Implementation{Name: "legacy", Version: "1"}, st, &ServerOptions{DynamicRegistries: true})
			ss := &ServerSession{srv: srv, state: &notify.Session{Principal: "alice", ProtocolVersion: ProtocolVersion2026}}

			l, err := srv.openListen(ctx, ss, "alice", json.RawMessage(`"L2"`), filter, time.Minute)
			if err != nil {
				t.Fatalf("openListen: %v", err)
			}
			defer srv.releaseLiveness(ctx)
			if l.sess.ID() != "listen-legacy-parked" || l.after != 3 {
				t.Fatalf("the listen opened %s after %d; want the legacy parked stream adopted, after 3", l.sess.ID(), l.after)
			}
			got, err := st.GetSession(ctx, "listen-legacy-parked")
			if want := (notify.ListenState{Process: srv.live.id, Request: "s:L2"}); err != nil || got.Listen != want || got.ClientInfo != nil {
				t.Errorf("the adopted session records %+v, ClientInfo %s, %v; want %+v and no client info", got.Listen, got.ClientInfo, err, want)
			}

			srv.cancelListen(ctx, "alice", &Message{Method: "notifications/cancelled", Params: json.RawMessage(`{"requestId":"L0"}`)})
			events, err := st.ReadEvents(ctx, "listen-legacy-served", getStream, 0, 10)
			if err != nil || len(events) != 1 || string(events[0].Data) != string(listenCancelOf("s:L0")) {
				t.Errorf("the served legacy stream's log after its cancellation: %v, %v; want its cancellation record", events, err)
			}

			if n := srv.reclaimListens(ctx, lp, 10); n != 1 {
				t.Errorf("reclaimListens = %d, want 1: the served legacy stream, whose process is gone", n)
			}
			if _, err := st.GetSession(ctx, "listen-legacy-served"); err == nil {
				t.Error("the reclaimed legacy stream's session is still there")
			}
		})
	}
}
