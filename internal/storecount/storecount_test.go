package storecount_test

import (
	"context"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/mcpush/mcpush/internal/storecount"
	"github.com/mcpush/mcpush/pkg/notify"
	"github.com/mcpush/mcpush/pkg/notify/sqlitestore"
	"github.com/mcpush/mcpush/pkg/notify/storeconfig"
)

// isRead classifies every method a wrapped store counts. A method added
// to the stores (storeconfig.Store) needs an override in storecount and a
// line here.
var isRead = map[string]bool{
	"CreateSession": false, "GetSession": true, "UpdateSession": false, "DeleteSession": false,
	"Append": false, "AppendEach": false, "ReadEvents": true, "MarkDelivered": false,
	"PutMessage": false, "GetMessage": true,
	"Subscribe": false, "Unsubscribe": false, "Subscribers": true,
	"AppendTopicEvent": false, "ReadTopicEvents": true, "Topics": true,
	"ApplyRegistry": false, "GetRegistry": true, "RegistryHashes": true, "Changes": true,
	"CountInWindow": false, "CountSessions": true,
	"SharedKey": false, "IdleSessions": true, "PrincipalProfiles": true, "TopicHead": true,
	"CreateTask": false, "GetTask": true, "UpdateTask": false, "CountTasks": true,
	"CreateWebhook": false, "GetWebhook": true, "UpdateWebhook": false, "DeleteWebhook": false, "TopicWebhooks": true,
	"CountWebhooks": true, "PutWebhookVerified": false, "WebhookVerified": true,
}

// inner is a store whose every method panics (a nil storeconfig.Store):
// what the wrapper counts before it forwards.
type inner struct{ storeconfig.Store }

// TestWrapCountsEveryMethod calls every method of the stores
// (storeconfig.Store) on a wrapped store and checks that each call is
// counted once, under the method's name, and classified as a read or a
// write. A method that the wrapper does not override fails here.
func TestWrapCountsEveryMethod(t *testing.T) {
	var c storecount.Counter
	wrapped := storecount.Wrap(inner{}, &c)
	v := reflect.ValueOf(wrapped)
	iface := reflect.TypeFor[storeconfig.Store]()
	for m := range iface.Methods() {
		if m.Name == "Close" {
			continue
		}
		t.Run(m.Name, func(t *testing.T) {
			read, ok := isRead[m.Name]
			if !ok {
				t.Errorf("%s.%s is not classified: add it to storecount's reads (if it only reads) and to isRead", iface, m.Name)
			}
			if got := storecount.IsRead(m.Name); got != read {
				t.Errorf("IsRead(%q) = %v, want %v", m.Name, got, read)
			}
			c.Reset()
			fn := v.MethodByName(m.Name)
			args := make([]reflect.Value, fn.Type().NumIn())
			for i := range args {
				args[i] = reflect.Zero(fn.Type().In(i))
			}
			func() {
				defer func() { recover() }() // the inner store panics
				fn.Call(args)
			}()
			if diff := cmp.Diff(storecount.Counts{m.Name: 1}, c.Counts()); diff != "" {
				t.Errorf("counts after one %s (-want +got):\n%s", m.Name, diff)
			}
		})
	}
}

// TestWrapSQLite counts the requests of a real store, reads and writes
// apart, and starts again after Reset.
func TestWrapSQLite(t *testing.T) {
	ctx := context.Background()
	sq, err := sqlitestore.New(filepath.Join(t.TempDir(), "count.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	var c storecount.Counter
	st := storecount.Wrap(sq, &c)
	defer st.Close()
	now := time.Now()
	if err := st.CreateSession(ctx, &notify.Session{ID: "s1", CreatedAt: now, ExpiresAt: now.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, err := st.GetSession(ctx, "s1"); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := st.CountSessions(ctx, "", 10); err != nil {
		t.Fatal(err)
	}
	if _, err := st.GetSession(ctx, "missing"); err == nil {
		t.Fatal("GetSession of a missing session: no error")
	}
	got := c.Counts()
	if diff := cmp.Diff(storecount.Counts{"CreateSession": 1, "GetSession": 3, "CountSessions": 1}, got); diff != "" {
		t.Errorf("counts (-want +got):\n%s", diff)
	}
	if got.Reads() != 4 || got.Writes() != 1 || got.Total() != 5 {
		t.Errorf("%v: %d reads, %d writes, %d in all; want 4, 1, 5", got, got.Reads(), got.Writes(), got.Total())
	}
	if s := got.String(); s != "CountSessions=1 CreateSession=1 GetSession=3" {
		t.Errorf("String() = %q", s)
	}
	c.Reset()
	if _, err := st.CountInWindow(ctx, "k", 1, 1, now.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(storecount.Counts{"CountInWindow": 1}, c.Counts()); diff != "" {
		t.Errorf("counts after Reset (-want +got):\n%s", diff)
	}
}

func TestCountsSub(t *testing.T) {
	a := storecount.Counts{"GetSession": 5, "Append": 2, "Topics": 1}
	b := storecount.Counts{"GetSession": 3, "Append": 2, "Subscribe": 1}
	want := storecount.Counts{"GetSession": 2, "Topics": 1, "Subscribe": -1}
	if diff := cmp.Diff(want, a.Sub(b)); diff != "" {
		t.Errorf("Sub (-want +got):\n%s", diff)
	}
	sum := storecount.Counts{}
	sum.Add(a)
	sum.Add(b)
	if diff := cmp.Diff(storecount.Counts{"GetSession": 8, "Append": 4, "Topics": 1, "Subscribe": 1}, sum); diff != "" {
		t.Errorf("Add (-want +got):\n%s", diff)
	}
}
