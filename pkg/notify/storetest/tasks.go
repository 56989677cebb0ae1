package storetest

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/mcpush/mcpush/pkg/notify"
)

// testTasks checks notify.TaskStore: a task is created once, read back
// whole from another Store on the same database, found only under its
// principal, updated only at its current version (terminal statuses stop
// counting as live, as do a lease or a wait that ended), counted per
// principal up to the limit, gone when it
// expires (and its id reusable then), and bad arguments are refused.
func testTasks(t *testing.T, s *suite) {
	_, ts, other := storesAs(t, s)
	ctx := t.Context()
	now := time.Now().Truncate(time.Millisecond).UTC()
	task := func(principal, id string, ttl time.Duration) *notify.Task {
		return &notify.Task{
			Principal: principal, ID: id, Status: notify.TaskWorking, StatusMessage: "started",
			Request:   json.RawMessage(`{"name":"slow"}`),
			CreatedAt: now, UpdatedAt: now, ExpiresAt: now.Add(ttl), LeaseUntil: now.Add(30 * time.Second),
		}
	}
	count := func(principal string, limit, want int) {
		t.Helper()
		if got, err := other.CountTasks(ctx, principal, limit); err != nil || got.Live != want {
			t.Errorf("CountTasks(%q, %d) = %+v, %v; want %d live", principal, limit, got, err, want)
		}
	}

	a1 := task("alice", "t1", time.Hour)
	if err := ts.CreateTask(ctx, a1); err != nil || a1.Version != 1 {
		t.Fatalf("CreateTask = %v, version %d; want nil, 1", err, a1.Version)
	}
	if err := other.CreateTask(ctx, task("alice", "t1", time.Hour)); !errors.Is(err, notify.ErrExists) {
		t.Errorf("CreateTask of a taken id = %v, want ErrExists", err)
	}
	got, err := other.GetTask(ctx, "alice", "t1")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(a1, got); diff != "" {
		t.Errorf("GetTask (-created +read):\n%s", diff)
	}
	if _, err := other.GetTask(ctx, "bob", "t1"); !errors.Is(err, notify.ErrNotFound) {
		t.Errorf("GetTask under another principal = %v, want ErrNotFound", err)
	}
	if _, err := other.GetTask(ctx, "alice", "nope"); !errors.Is(err, notify.ErrNotFound) {
		t.Errorf("GetTask of a missing task = %v, want ErrNotFound", err)
	}

	// Optimistic concurrency: the second writer of one version loses.
	stale := *got
	got.Status, got.InputRequests = notify.TaskInputRequired, json.RawMessage(`{"k":{"method":"elicitation/create"}}`)
	if err := other.UpdateTask(ctx, got); err != nil || got.Version != 2 {
		t.Fatalf("UpdateTask = %v, version %d; want nil, 2", err, got.Version)
	}
	stale.Status = notify.TaskCompleted
	if err := ts.UpdateTask(ctx, &stale); !errors.Is(err, notify.ErrConflict) {
		t.Errorf("UpdateTask at an old version = %v, want ErrConflict", err)
	}
	if r, _ := ts.GetTask(ctx, "alice", "t1"); r == nil || r.Status != notify.TaskInputRequired || string(r.InputRequests) != string(got.InputRequests) {
		t.Errorf("after the lost update GetTask = %+v, want the winner's input_required", r)
	}
	missing := task("alice", "never", time.Hour)
	missing.Version = 1
	if err := ts.UpdateTask(ctx, missing); !errors.Is(err, notify.ErrNotFound) {
		t.Errorf("UpdateTask of a missing task = %v, want ErrNotFound", err)
	}

	// Counting: live (not terminal, not expired) tasks per principal.
	for _, id := range []string{"t2", "t3"} {
		if err := ts.CreateTask(ctx, task("alice", id, time.Hour)); err != nil {
			t.Fatal(err)
		}
	}
	if err := ts.CreateTask(ctx, task("bob", "t1", time.Hour)); err != nil {
		t.Fatalf("CreateTask of another principal's id: %v", err)
	}
	count("alice", 10, 3)
	count("alice", 2, 2)
	count("bob", 10, 1)
	count("carol", 1, 0)
	got.Status, got.Result = notify.TaskCompleted, json.RawMessage(`{"content":[]}`)
	if err := ts.UpdateTask(ctx, got); err != nil {
		t.Fatal(err)
	}
	count("alice", 10, 2)

	// Bytes: the records of every unexpired task, ended ones included.
	bytesOf := func(principal string) int64 {
		t.Helper()
		c, err := other.CountTasks(ctx, principal, 10)
		if err != nil {
			t.Fatal(err)
		}
		return c.Bytes
	}
	var want int64
	for _, id := range []string{"t1", "t2", "t3"} {
		r, err := ts.GetTask(ctx, "alice", id)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := notify.CheckTask(r)
		want += int64(len(b))
	}
	if got := bytesOf("alice"); got != want {
		t.Errorf("CountTasks(alice).Bytes = %d, want %d (the three records, the ended one too)", got, want)
	}
	if got := bytesOf("carol"); got != 0 {
		t.Errorf("CountTasks(carol).Bytes = %d, want 0", got)
	}

	// Expiry: an expired task is not found, not counted, and its id is
	// free again.
	if err := ts.CreateTask(ctx, task("dave", "short", time.Second)); err != nil {
		t.Fatal(err)
	}
	count("dave", 10, 1)
	before := bytesOf("dave")
	time.Sleep(1100 * time.Millisecond)
	if _, err := other.GetTask(ctx, "dave", "short"); !errors.Is(err, notify.ErrNotFound) {
		t.Errorf("GetTask of an expired task = %v, want ErrNotFound", err)
	}
	count("dave", 10, 0)
	if got := bytesOf("dave"); before == 0 || got != 0 {
		t.Errorf("CountTasks(dave).Bytes = %d before its task expired, %d after; want > 0, 0", before, got)
	}
	if err := ts.CreateTask(ctx, task("dave", "short", time.Hour)); err != nil {
		t.Errorf("CreateTask over an expired task: %v", err)
	}

	// A working task whose lease ended (its process died) and one whose
	// wait for input ended stop counting, unread; a renewed lease counts.
	for _, id := range []string{"dead", "waited"} {
		d := task("erin", id, time.Hour)
		d.LeaseUntil = time.Now().Add(time.Second)
		if id == "waited" {
			d.Status = notify.TaskInputRequired
		}
		if err := ts.CreateTask(ctx, d); err != nil {
			t.Fatal(err)
		}
	}
	count("erin", 10, 2)
	renewed, err := ts.GetTask(ctx, "erin", "dead")
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Until(renewed.LeaseUntil) + 100*time.Millisecond)
	count("erin", 10, 0)
	renewed.LeaseUntil = time.Now().Add(time.Minute)
	if err := ts.UpdateTask(ctx, renewed); err != nil {
		t.Fatal(err)
	}
	count("erin", 10, 1)

	// Bad arguments change nothing.
	if err := ts.CreateTask(ctx, task("alice", "", time.Hour)); !errors.Is(err, notify.ErrInvalid) {
		t.Errorf("CreateTask with no id = %v, want ErrInvalid", err)
	}
	if _, err := ts.GetTask(ctx, "alice", ""); !errors.Is(err, notify.ErrInvalid) {
		t.Errorf("GetTask with no id = %v, want ErrInvalid", err)
	}
	if _, err := ts.CountTasks(ctx, "alice", 0); !errors.Is(err, notify.ErrInvalid) {
		t.Errorf("CountTasks with limit 0 = %v, want ErrInvalid", err)
	}
	big := task("alice", "big", time.Hour)
	big.Result = json.RawMessage(`"` + strings.Repeat("x", notify.MaxItemBytes) + `"`)
	if err := ts.CreateTask(ctx, big); !errors.Is(err, notify.ErrTooLarge) {
		t.Errorf("CreateTask of a record over MaxItemBytes = %v, want ErrTooLarge", err)
	}
	if _, err := ts.GetTask(ctx, "alice", "big"); !errors.Is(err, notify.ErrNotFound) {
		t.Errorf("a refused task was stored: GetTask = %v", err)
	}
}
