package delivery

import (
	"errors"
	"strings"
	"testing"
)

// FuzzParseTask: a queue message body is input like any other: ParseTask
// never panics, refuses with ErrInvalidTask, and what it accepts encodes
// back to a task that parses to the same.
func FuzzParseTask(f *testing.F) {
	for _, s := range []string{
		`{"k":"fanout","t":"orders","s":1}`, `{"k":"subscription","t":"orders","i":"sub_1","r":true}`,
		`{"k":"recheck"}`, `{"k":"fanout","t":""}`, `not json`, `{"k":"x"}`, `{"k":"fanout","t":"o","s":-1}`,
		`{"k":"subscription","t":"o"}`, `{"k":"fanout","t":"o","a":"` + strings.Repeat("a", 3000) + `"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		task, err := ParseTask(b)
		if err != nil {
			if !errors.Is(err, ErrInvalidTask) {
				t.Fatalf("ParseTask(%q) = %v, not ErrInvalidTask", b, err)
			}
			return
		}
		again, err := MarshalTask(task)
		if err != nil {
			t.Fatalf("MarshalTask of an accepted task: %v", err)
		}
		back, err := ParseTask(again)
		if err != nil || back.key() != task.key() || back.Seq != task.Seq || back.Retry != task.Retry || back.Check != task.Check {
			t.Fatalf("round trip %q -> %q: %+v, %v", b, again, back, err)
		}
	})
}
