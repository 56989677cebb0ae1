// Package storetest is the contract suite that every notify.Store
// implementation runs.
//
// An implementation's test package calls RunChild first thing in TestMain
// and Run from a test:
//
//	func TestMain(m *testing.M) {
//		storetest.RunChild(open)
//		os.Exit(m.Run())
//	}
//
//	func TestContract(t *testing.T) {
//		storetest.Run(t, open, func(t *testing.T) string {
//			return filepath.Join(t.TempDir(), "store.db")
//		})
//	}
//
// The suite checks behaviour only through the notify.Store interface. Its
// concurrency tests race goroutines on two Store values opened on the same
// backing database, and race several processes: the suite re-executes the
// test binary, and RunChild does the child's part.
package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/mcpush/mcpush/pkg/notify"
)

// Store is what the suite checks: the notify.Store contract and every
// capability beside it, which mcpush's consumers of a store require
// (mcp.Store, ingest.Store) and both stores implement (the same set as
// storeconfig.Store).
type Store interface {
	notify.Store
	notify.TaskStore
	notify.RateCounter
	notify.SessionCounter
	notify.SessionReclaimer
	notify.ProfileLister
	notify.SharedKeys
	notify.TopicHeads
	notify.WebhookStore
}

// Opener opens a Store on the backing database named by dsn (e.g. a file
// path or a table name).
type Opener func(dsn string) (Store, error)

// Run runs the contract suite. newDSN returns a fresh, empty backing
// database for one subtest.
//
// The subtests run in parallel. Some open a second Store on the same dsn;
// one (Processes) starts child processes that open it too, so the dsn
// must name the same database in another process, which inherits this
// one's environment. Expiry is tested with real time (sleeping about a
// second), since an Opener has no clock to inject; times are compared to
// the millisecond.
func Run(t *testing.T, open Opener, newDSN func(t *testing.T) string) {
	t.Helper()
	s := &suite{open: open, newDSN: newDSN}
	tests := []struct {
		name string
		f    func(*testing.T, *suite)
	}{
		{"Session", testSession},
		{"SessionFresh", testSessionFresh},
		{"UpdateSession", testUpdateSession},
		{"SessionListen", testSessionListen},
		{"DeleteSession", testDeleteSession},
		{"MissingSession", testMissingSession},
		{"Expiry", testExpiry},
		{"AppendRead", testAppendRead},
		{"StreamHead", testStreamHead},
		{"Changes", testChanges},
		{"ChangesMany", testChangesMany},
		{"AppendIdempotencyKey", testAppendIdempotencyKey},
		{"AppendNotifiedHash", testAppendNotifiedHash},
		{"AppendEach", testAppendEach},
		{"AppendEachOrder", testAppendEachOrder},
		{"MarkDelivered", testMarkDelivered},
		{"Mailbox", testMailbox},
		{"Subscriptions", testSubscriptions},
		{"TopicEvents", testTopicEvents},
		{"TopicHead", testTopicHead},
		{"Registry", testRegistry},
		{"RegistryKinds", testRegistryKinds},
		{"Invalid", testInvalid},
		{"TooLarge", testTooLarge},
		{"URILimit", testURILimit},
		{"RateCounter", testRateCounter},
		{"SessionCount", testSessionCount},
		{"SharedKey", testSharedKey},
		{"IdleSessions", testIdleSessions},
		{"PrincipalProfiles", testPrincipalProfiles},
		{"Tasks", testTasks},
		{"Webhooks", testWebhooks},
		{"WebhookVerified", testWebhookVerified},
		{"ConcurrentAppend", testConcurrentAppend},
		{"ConcurrentConditions", testConcurrentConditions},
		{"ConcurrentTopics", testConcurrentTopics},
		{"ConcurrentRegistry", testConcurrentRegistry},
		{"Processes", testProcesses},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tt.f(t, s)
		})
	}
}

type suite struct {
	open   Opener
	newDSN func(t *testing.T) string
}

// store opens a Store on a fresh backing database.
func (s *suite) store(t *testing.T) Store {
	t.Helper()
	st, _ := s.storeDSN(t)
	return st
}

// storeDSN opens a Store on a fresh backing database and returns its dsn.
func (s *suite) storeDSN(t *testing.T) (Store, string) {
	t.Helper()
	dsn := s.newDSN(t)
	return s.reopen(t, dsn), dsn
}

// reopen opens another Store on dsn, closed when t ends.
func (s *suite) reopen(t *testing.T, dsn string) Store {
	t.Helper()
	st, err := s.open(dsn)
	if err != nil {
		t.Fatalf("open(%q): %v", dsn, err)
	}
	t.Cleanup(func() {
		if err := st.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return st
}

// cmpOpts compares store results: nil and empty are equal, and times may
// differ by less than a millisecond (a store may keep only milliseconds).
var cmpOpts = cmp.Options{
	cmpopts.EquateEmpty(),
	cmpopts.EquateApproxTime(time.Millisecond),
}

// now returns the current time at millisecond precision, without a
// monotonic clock reading.
func now() time.Time {
	return time.Now().Truncate(time.Millisecond).UTC()
}

// newSession returns a session that expires in an hour. The caller may
// change it before creating it.
func newSession(id string) *notify.Session {
	n := now()
	return &notify.Session{
		ID:              id,
		ProtocolVersion: "2025-06-18",
		CreatedAt:       n,
		ExpiresAt:       n.Add(time.Hour),
	}
}

// createSession creates a session with newSession(id), changed by opts.
func createSession(t *testing.T, st notify.Store, id string, opts ...func(*notify.Session)) *notify.Session {
	t.Helper()
	sess := newSession(id)
	for _, o := range opts {
		o(sess)
	}
	if err := st.CreateSession(t.Context(), sess); err != nil {
		t.Fatalf("CreateSession(%q): %v", id, err)
	}
	return sess
}

func getSession(t *testing.T, st notify.Store, id string) *notify.Session {
	t.Helper()
	sess, err := st.GetSession(t.Context(), id)
	if err != nil {
		t.Fatalf("GetSession(%q): %v", id, err)
	}
	if sess.NotifiedHashes == nil {
		t.Errorf("GetSession(%q).NotifiedHashes is nil, want a non-nil map", id)
	}
	return sess
}

// appendEvents appends events and fails the test on error or when the
// append did not happen.
func appendEvents(t *testing.T, st notify.Store, sessionID, streamID string, data ...string) int64 {
	t.Helper()
	seq, ok, err := st.Append(t.Context(), sessionID, streamID, bytesOf(data...), nil)
	if err != nil || !ok {
		t.Fatalf("Append(%q, %q, %q) = %d, %t, %v; want appended", sessionID, streamID, data, seq, ok, err)
	}
	return seq
}

func readEvents(t *testing.T, st notify.Store, sessionID, streamID string, after int64, limit int) []notify.Event {
	t.Helper()
	evs, err := st.ReadEvents(t.Context(), sessionID, streamID, after, limit)
	if err != nil {
		t.Fatalf("ReadEvents(%q, %q, %d, %d): %v", sessionID, streamID, after, limit, err)
	}
	return evs
}

func bytesOf(data ...string) [][]byte {
	b := make([][]byte, len(data))
	for i, d := range data {
		b[i] = []byte(d)
	}
	return b
}

// events returns the events with the given data, numbered from first.
func events(first int64, data ...string) []notify.Event {
	evs := make([]notify.Event, len(data))
	for i, d := range data {
		evs[i] = notify.Event{Seq: first + int64(i), Data: []byte(d)}
	}
	return evs
}

// wantErr reports whether err matches want (nil means no error).
func wantErr(err, want error) bool {
	if want == nil {
		return err == nil
	}
	return errors.Is(err, want)
}

// sessionCalls are one call of every Store method that names a session,
// for checking that a missing, expired or deleted session is ErrNotFound.
// DeleteSession comes last.
func sessionCalls(id string) []struct {
	name string
	call func(context.Context, notify.Store) error
} {
	return []struct {
		name string
		call func(context.Context, notify.Store) error
	}{
		{"GetSession", func(ctx context.Context, st notify.Store) error {
			_, err := st.GetSession(ctx, id)
			return err
		}},
		{"UpdateSession", func(ctx context.Context, st notify.Store) error {
			sess := newSession(id)
			return st.UpdateSession(ctx, sess)
		}},
		{"Append", func(ctx context.Context, st notify.Store) error {
			_, _, err := st.Append(ctx, id, "s", bytesOf("x"), nil)
			return err
		}},
		{"Append/IdempotencyKey", func(ctx context.Context, st notify.Store) error {
			_, _, err := st.Append(ctx, id, "s", bytesOf("x"), &notify.AppendOptions{IdempotencyKey: "k"})
			return err
		}},
		{"Append/NotifiedHash", func(ctx context.Context, st notify.Store) error {
			_, _, err := st.Append(ctx, id, "s", bytesOf("x"), &notify.AppendOptions{
				NotifiedHash: &notify.HashCAS{Registry: notify.RegistryTools, Old: "", New: "h"}})
			return err
		}},
		{"ReadEvents", func(ctx context.Context, st notify.Store) error {
			_, err := st.ReadEvents(ctx, id, "s", 0, 10)
			return err
		}},
		{"MarkDelivered", func(ctx context.Context, st notify.Store) error {
			return st.MarkDelivered(ctx, id, 1)
		}},
		{"PutMessage", func(ctx context.Context, st notify.Store) error {
			_, err := st.PutMessage(ctx, id, "k", []byte("m"))
			return err
		}},
		{"GetMessage", func(ctx context.Context, st notify.Store) error {
			_, err := st.GetMessage(ctx, id, "k")
			return err
		}},
		{"Subscribe", func(ctx context.Context, st notify.Store) error {
			return st.Subscribe(ctx, id, "file:///x")
		}},
		{"Unsubscribe", func(ctx context.Context, st notify.Store) error {
			return st.Unsubscribe(ctx, id, "file:///x")
		}},
		{"DeleteSession", func(ctx context.Context, st notify.Store) error {
			return st.DeleteSession(ctx, id)
		}},
	}
}

// checkGone checks that every method naming the session id reports
// ErrNotFound.
func checkGone(t *testing.T, st notify.Store, id string) {
	t.Helper()
	for _, c := range sessionCalls(id) {
		if err := c.call(t.Context(), st); !errors.Is(err, notify.ErrNotFound) {
			t.Errorf("%s(%q): got %v, want ErrNotFound", c.name, id, err)
		}
	}
}

// checkSubscribers checks Subscribers(uri).
func checkSubscribers(t *testing.T, st notify.Store, uri string, want ...string) {
	t.Helper()
	got, err := st.Subscribers(t.Context(), uri)
	if err != nil {
		t.Fatalf("Subscribers(%q): %v", uri, err)
	}
	if diff := cmp.Diff(want, got, cmpOpts); diff != "" {
		t.Errorf("Subscribers(%q) mismatch (-want +got):\n%s", uri, diff)
	}
}

// jsonString returns a JSON string value of n bytes in all.
func jsonString(n int) json.RawMessage {
	b := make([]byte, n)
	for i := range b {
		b[i] = 'x'
	}
	b[0], b[n-1] = '"', '"'
	return b
}

// compactItems returns items with every value compacted, for comparing
// registries semantically.
func compactItems(items map[string]json.RawMessage) map[string]string {
	out := make(map[string]string, len(items))
	for k, v := range items {
		var b []byte
		if c, err := compactJSON(v); err == nil {
			b = c
		} else {
			b = v
		}
		out[k] = string(b)
	}
	return out
}

// storesAs returns a Store of the suite twice (as the caller names its
// roles) and another Store on the same database.
func storesAs(t *testing.T, s *suite) (Store, Store, Store) {
	t.Helper()
	st, dsn := s.storeDSN(t)
	return st, st, s.reopen(t, dsn)
}
