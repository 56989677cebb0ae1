package webhook

import (
	"encoding/json"
	"regexp"
	"testing"
	"time"
)

func TestBodies(t *testing.T) {
	ts := time.Date(2026, 2, 19, 16, 0, 0, 123_456_789, time.FixedZone("x", 3600))
	for _, tt := range []struct {
		name string
		got  func() ([]byte, error)
		want string
	}{
		{"event", func() ([]byte, error) {
			return EventBody("evt_1", "incident.created", ts, json.RawMessage(`{"severity":"P1"}`), "cursor_xyz")
		}, `{"eventId":"evt_1","name":"incident.created","timestamp":"2026-02-19T15:00:00.123Z","data":{"severity":"P1"},"cursor":"cursor_xyz"}`},
		{"event without cursor or data", func() ([]byte, error) { return EventBody("e", "n", ts, nil, "") },
			`{"eventId":"e","name":"n","timestamp":"2026-02-19T15:00:00.123Z","data":null,"cursor":null}`},
		{"gap", func() ([]byte, error) { return GapBody("c1") }, `{"type":"gap","cursor":"c1"}`},
		{"gap without replay", func() ([]byte, error) { return GapBody("") }, `{"type":"gap","cursor":null}`},
		{"terminated", func() ([]byte, error) { return TerminatedBody(-32600, "revoked", nil) },
			`{"type":"terminated","error":{"code":-32600,"message":"revoked"}}`},
		{"terminated with data", func() ([]byte, error) { return TerminatedBody(1, "m", []int{1}) },
			`{"type":"terminated","error":{"code":1,"message":"m","data":[1]}}`},
	} {
		b, err := tt.got()
		if err != nil || string(b) != tt.want {
			t.Errorf("%s: %s, %v\nwant %s", tt.name, b, err, tt.want)
		}
	}
	if _, err := EventBody("", "n", ts, nil, ""); err == nil {
		t.Error("EventBody without an id")
	}
	if _, err := EventBody("e", "n", ts, json.RawMessage(`{bad`), ""); err == nil {
		t.Error("EventBody with bad data")
	}
	re := regexp.MustCompile(`^msg_gap_[A-Za-z0-9_-]{22}$`)
	a, b := ControlID(ControlGap), ControlID(ControlGap)
	if !re.MatchString(a) || a == b {
		t.Errorf("ControlID: %q %q", a, b)
	}
}

func TestRetryNext(t *testing.T) {
	t0 := time.Unix(1_800_000_000, 0)
	var r Retry
	var got []time.Duration
	now := t0
	for attempt := 1; ; attempt++ {
		next, ok := r.Next(attempt, t0, now)
		if !ok {
			break
		}
		got = append(got, next.Sub(now))
		now = next.Add(5 * time.Second) // the attempt took 5 s
	}
	want := []time.Duration{30 * time.Second, time.Minute, 2 * time.Minute, 4 * time.Minute}
	if len(got) != len(want) {
		t.Fatalf("delays %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("delay %d: %v, want %v", i+1, got[i], want[i])
		}
	}
	// The window: no attempt starts more than Window after the first.
	r = Retry{Attempts: 100, Base: time.Minute, Max: 10 * time.Minute, Window: 15 * time.Minute}
	if _, ok := r.Next(3, t0, t0.Add(12*time.Minute)); ok {
		t.Error("an attempt at 16 min of a 15 min window")
	}
	if next, ok := r.Next(1, t0, t0); !ok || next != t0.Add(time.Minute) {
		t.Errorf("Next(1) = %v %v", next, ok)
	}
	// Max caps the delay; jitter stays below Jitter.
	r = Retry{Attempts: 50, Base: time.Second, Max: 3 * time.Second, Window: time.Hour, Jitter: time.Second}
	for i := 0; i < 100; i++ {
		next, ok := r.Next(40, t0, t0)
		if d := next.Sub(t0); !ok || d < 3*time.Second || d >= 4*time.Second {
			t.Fatalf("Next(40) delay %v %v", d, ok)
		}
	}
}
