package mcp

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/mcpush/mcpush/pkg/notify"
	"github.com/mcpush/mcpush/pkg/notify/sqlitestore"
)

// racingCASStore runs race, once, just before the first conditional
// append for registry kind first is stored: another process's whole
// notifyChanges, with registry changes of its own, between this
// process's read of the registry hashes and its conditional append.
type racingCASStore struct {
	*sqlitestore.Store
	first string
	race  func()
}

func (s *racingCASStore) Append(ctx context.Context, id, stream string, data [][]byte, o *notify.AppendOptions) (int64, bool, error) {
	if s.race != nil && o != nil && o.NotifiedHash != nil && o.NotifiedHash.Registry == s.first {
		race := s.race
		s.race = nil
		race()
	}
	return s.Store.Append(ctx, id, stream, data, o)
}

// raceSetup is two processes on one SQLite store, A's store racing
// (racingCASStore, first: tools), and a 2025-era session notified of the
// registries as they are.
type raceSetup struct {
	inner  *sqlitestore.Store
	racing *racingCASStore
	a, b   *Server
	sess   *notify.Session
}

func newRaceSetup(t *testing.T) *raceSetup {
	t.Helper()
	ctx := context.Background()
	inner, err := sqlitestore.New(filepath.Join(t.TempDir(), "race.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { inner.Close() })
	racing := &racingCASStore{Store: inner, first: notify.RegistryTools}
	quiet := &ServerOptions{DynamicRegistries: true}
	baseline, err := inner.RegistryHashes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	sess := &notify.Session{ID: "race-session-0123456789abcdef", Principal: "alice", ProtocolVersion: "2025-11-25",
		Initialized: true, NotifiedHashes: baseline, CreatedAt: now, ExpiresAt: now.Add(time.Hour)}
	if err := inner.CreateSession(ctx, sess); err != nil {
		t.Fatal(err)
	}
	return &raceSetup{inner: inner, racing: racing, sess: sess,
		a: NewServer(&Implementation{Name: "a", Version: "1"}, racing, quiet),
		b: NewServer(&Implementation{Name: "b", Version: "1"}, inner, quiet)}
}

// notify runs srv's notifyChanges on the session as the store has it.
func (r *raceSetup) notify(t *testing.T, srv *Server) {
	t.Helper()
	st, err := r.inner.GetSession(context.Background(), r.sess.ID)
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.notifyChanges(context.Background(), &ServerSession{srv: srv, state: st}); err != nil {
		t.Fatal(err)
	}
}

// TestNotifyChangesLosingRace: process A reads the registry hashes
// (tools t1, prompts p1); before its first conditional append, the
// prompts registry moves on to p2 and process B notifies the session of
// both tools t1 and prompts p2. A loses the tools append and re-reads the
// session, whose notified prompts hash (p2) is now newer than A's read
// (p1). A must not then "notify" the session of a move back to p1: one
// prompts/list_changed in all, and the session's notified hash stays p2.
// Before the fix A appended a second prompts/list_changed (p2 -> p1) and
// any later check a third (p1 -> p2): 3 changes of the prompts registry
// produced 4 notifications in TestPushListChanged.
func TestNotifyChangesLosingRace(t *testing.T) {
	ctx := context.Background()
	r := newRaceSetup(t)
	apply := func(kind, key, item, msg string) {
		t.Helper()
		if _, _, err := r.inner.ApplyRegistry(ctx, kind, notify.OpPut, map[string]json.RawMessage{key: json.RawMessage(item)}, msg); err != nil {
			t.Fatal(err)
		}
	}
	apply(notify.RegistryTools, "t", `{"name":"t","description":"v1"}`, "m1")
	apply(notify.RegistryPrompts, "p", `{"name":"p","messages":[{"role":"user","text":"v1"}]}`, "m2")
	r.racing.race = func() {
		apply(notify.RegistryPrompts, "p", `{"name":"p","messages":[{"role":"user","text":"v2"}]}`, "m3")
		r.notify(t, r.b)
	}

	r.notify(t, r.a)
	if r.racing.race != nil {
		t.Fatal("the race never ran: A made no conditional append for tools")
	}
	// A later check, on either process, finds nothing to say.
	r.notify(t, r.a)
	r.notify(t, r.b)

	evs, err := r.inner.ReadEvents(ctx, r.sess.ID, getStream, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	counts := map[string]int{}
	for _, ev := range evs {
		var m struct{ Method string }
		_ = json.Unmarshal(ev.Data, &m)
		counts[m.Method]++
	}
	if got := counts[listChangedMethod[notify.RegistryTools]]; got != 1 {
		t.Errorf("%d tools/list_changed for one change, want 1 (log %v)", got, counts)
	}
	if got := counts[listChangedMethod[notify.RegistryPrompts]]; got != 1 {
		t.Errorf("%d prompts/list_changed for the session's one move (to p2), want 1 (log %v)", got, counts)
	}
	final, err := r.inner.GetSession(ctx, r.sess.ID)
	if err != nil {
		t.Fatal(err)
	}
	hashes, _ := r.inner.RegistryHashes(ctx)
	if final.NotifiedHashes[notify.RegistryPrompts] != hashes[notify.RegistryPrompts] {
		t.Errorf("notified prompts hash %q, want the registry's current %q", final.NotifiedHashes[notify.RegistryPrompts], hashes[notify.RegistryPrompts])
	}
}

// TestReservedPrefixUpgrade: notify.UpgradeListen, which spells the
// reserved prefix itself (it cannot import this package), recognizes the
// backing sessions this package names (listenPrincipal) and no client's.
func TestReservedPrefixUpgrade(t *testing.T) {
	legacy := json.RawMessage(`{"mcpush/process":"process-1","mcpush/request":"s:L1"}`)
	backing := &notify.Session{Principal: listenPrincipal("alice"), ClientInfo: legacy}
	if !notify.UpgradeListen(backing) || backing.Listen.Request != "s:L1" {
		t.Errorf("UpgradeListen does not read a backing session of %q: %+v", listenPrincipal("alice"), backing)
	}
	client := &notify.Session{Principal: "alice", ClientInfo: legacy}
	if notify.UpgradeListen(client) {
		t.Error("UpgradeListen changed a client's session")
	}
}

// TestNotifyChangesBoundedRounds: a process that loses every conditional
// append (before each of its appends the registry moves, another process
// notifies the session of it, and the registry moves on again) gives up after maxNotifyAttempts
// rounds, having appended nothing itself, instead of chasing the other
// process for ever; the session has one list_changed per move the other
// process notified.
func TestNotifyChangesBoundedRounds(t *testing.T) {
	ctx := context.Background()
	r := newRaceSetup(t)
	version := 0
	move := func() {
		version++
		item := fmt.Sprintf(`{"name":"t","description":"v%d"}`, version)
		if _, _, err := r.inner.ApplyRegistry(ctx, notify.RegistryTools, notify.OpPut, map[string]json.RawMessage{"t": json.RawMessage(item)}, fmt.Sprint("m", version)); err != nil {
			t.Fatal(err)
		}
	}
	rounds := 0
	var race func()
	race = func() {
		rounds++
		move()
		r.b.regs.mu.Lock()
		r.b.regs.hashes = nil // B reads the registries afresh, as a process whose cache is new
		r.b.regs.mu.Unlock()
		r.notify(t, r.b)
		move()               // so that A, having re-read, has a move to notify
		r.racing.race = race // and loses it too
	}
	move()
	r.racing.race = race
	r.notify(t, r.a)
	if rounds != maxNotifyAttempts {
		t.Errorf("A tried %d rounds, want %d", rounds, maxNotifyAttempts)
	}
	evs, err := r.inner.ReadEvents(ctx, r.sess.ID, getStream, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != rounds {
		t.Errorf("%d list_changed in the log, want %d (one per move B notified, none of A's)", len(evs), rounds)
	}
}
