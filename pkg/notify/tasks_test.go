package notify

import (
	"errors"
	"testing"
)

// TestTaskStatus: the five statuses parse as spelled; anything else is
// ErrInvalid naming it, refused by CheckTask (nothing to store) and by
// DecodeTask (a stored record with an unknown status).
func TestTaskStatus(t *testing.T) {
	for _, s := range []TaskStatus{TaskWorking, TaskInputRequired, TaskCompleted, TaskFailed, TaskCancelled} {
		if got, err := ParseTaskStatus(string(s)); got != s || err != nil {
			t.Errorf("ParseTaskStatus(%q) = %q, %v", s, got, err)
		}
	}
	const want = `notify: invalid argument: task status "done": want "working", "input_required", "completed", "failed" or "cancelled"`
	if _, err := ParseTaskStatus("done"); !errors.Is(err, ErrInvalid) || err.Error() != want {
		t.Errorf("ParseTaskStatus(done) = %v\nwant %s", err, want)
	}
	for _, s := range []TaskStatus{"", "Working", "done"} {
		if b, err := CheckTask(&Task{ID: "t1", Status: s}); !errors.Is(err, ErrInvalid) || b != nil {
			t.Errorf("CheckTask with status %q = %s, %v; want ErrInvalid", s, b, err)
		}
	}
	b, err := CheckTask(&Task{ID: "t1", Status: TaskCompleted})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := DecodeTask("p", "t1", 1, b); err != nil || got.Status != TaskCompleted {
		t.Errorf("DecodeTask = %+v, %v", got, err)
	}
	if _, err := DecodeTask("p", "t1", 1, []byte(`{"s":"done"}`)); !errors.Is(err, ErrInvalid) {
		t.Errorf("DecodeTask of status done = %v, want ErrInvalid", err)
	}
}
