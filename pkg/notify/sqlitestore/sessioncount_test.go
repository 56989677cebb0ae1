package sqlitestore

import (
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestCountSessionsUsesIndex checks that a store's first count creates
// the index (principal, expires_at) and that the count reads through it,
// not by a scan of every session.
func TestCountSessionsUsesIndex(t *testing.T) {
	s := newStore(t, filepath.Join(t.TempDir(), "store.db"), nil)
	ctx := t.Context()
	if n, err := s.CountSessions(ctx, "alice", 10); err != nil || n != 0 {
		t.Fatalf("CountSessions = %d, %v; want 0", n, err)
	}
	rows, err := s.r.QueryContext(ctx, "EXPLAIN QUERY PLAN "+countSessions, "alice", time.Now().UnixNano(), 10)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var plan []string
	for rows.Next() {
		var id, parent, notused int
		var detail string
		if err := rows.Scan(&id, &parent, &notused, &detail); err != nil {
			t.Fatal(err)
		}
		plan = append(plan, detail)
	}
	if got := strings.Join(plan, "; "); !strings.Contains(got, "USING COVERING INDEX sessions_principal") {
		t.Errorf("query plan %q does not use the covering index sessions_principal", got)
	}
}
