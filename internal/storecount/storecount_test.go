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
)

// isRead classifies every method a wrapped store counts. A method added
// to notify.Store needs an override in storecount and a line here.
var isRead = map[string]bool{
	"CreateSession": false, "GetSession": true, "UpdateSession": false, "DeleteSession": false,
	"Append": false, "AppendEach": false, "ReadEvents": true, "MarkDelivered": false,
	"PutMessage": false, "GetMessage": true,
	"Subscribe": false, "Unsubscribe": false, "Subscribers": true,
	"AppendTopicEvent": false, "ReadTopicEvents": true, "Topics": true,
	"ApplyRegistry": false, "GetRegistry": true, "RegistryHashes": true, "Changes": true,
	"CountInWindow": false, "CountSessions": true,
	"SharedKey": false, "IdleSessions": true, "PrincipalProfiles": true,
}

// inner is a store whose every method panics (a nil notify.Store and
// nil counters): what the wrapper counts before it forwards.
type inner struct {
	notify.Store
	notify.RateCounter
	notify.SessionCounter
	notify.SharedKeys
	notify.SessionReclaimer
	notify.ProfileLister
}

// TestWrapCountsEveryMethod calls every method of notify.Store,
// notify.RateCounter and notify.SessionCounter on a wrapped store and
// checks that each call is counted once, under the method's name, and
// classified as a read or a write. A method of notify.Store that the
// wrapper does not override fails here.
func TestWrapCountsEveryMethod(t *testing.T) {
	var c storecount.Counter
	wrapped := storecount.Wrap(inner{}, &c)
	v := reflect.ValueOf(wrapped)
	for _, iface := range []reflect.Type{
		reflect.TypeFor[notify.Store](),
		reflect.TypeFor[notify.RateCounter](),
		reflect.TypeFor[notify.SessionCounter](),
		reflect.TypeFor[notify.SharedKeys](),
		reflect.TypeFor[notify.SessionReclaimer](),
		reflect.TypeFor[notify.ProfileLister](),
	} {
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
}

// Stores with some of the optional interfaces.
type (
	plainStore struct{ notify.Store }
	rateStore  struct {
		notify.Store
		notify.RateCounter
	}
	countStore struct {
		notify.Store
		notify.SessionCounter
	}
)

// TestWrapOptionalInterfaces: a wrapped store implements
// notify.RateCounter and notify.SessionCounter exactly when the store it
// wraps does, so that a server finds the same capabilities through it.
func TestWrapOptionalInterfaces(t *testing.T) {
	for _, tc := range []struct {
		name       string
		st         notify.Store
		rate, sess bool
	}{
		{"both", inner{}, true, true},
		{"none", plainStore{}, false, false},
		{"rate", rateStore{}, true, false},
		{"sessions", countStore{}, false, true},
	} {
		w := storecount.Wrap(tc.st, &storecount.Counter{})
		_, rate := w.(notify.RateCounter)
		_, sess := w.(notify.SessionCounter)
		if rate != tc.rate || sess != tc.sess {
			t.Errorf("%s: wrapped store is a RateCounter %v, a SessionCounter %v; want %v, %v", tc.name, rate, sess, tc.rate, tc.sess)
		}
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
	if _, err := st.(notify.SessionCounter).CountSessions(ctx, "", 10); err != nil {
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
	if _, err := st.(notify.RateCounter).CountInWindow(ctx, "k", 1, 1, now.Add(time.Minute)); err != nil {
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
