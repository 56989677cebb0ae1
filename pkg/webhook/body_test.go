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
		now = next.Add(time.Second) // the attempt took 1 s
	}
	// The default schedule: each delay of DefaultDelays, stretched by up
	// to a tenth; all within the 15 min window.
	if len(got) != len(DefaultDelays) || r.MaxAttempts() != len(DefaultDelays)+1 {
		t.Fatalf("delays %v, want %d of them (MaxAttempts %d)", got, len(DefaultDelays), r.MaxAttempts())
	}
	for i, want := range DefaultDelays {
		if got[i] < want || got[i] >= want+want/10 {
			t.Errorf("delay %d: %v, want [%v, %v)", i+1, got[i], want, want+want/10)
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
	// An explicit list: exactly its delays (Jitter set), then give up.
	r = Retry{Delays: []time.Duration{time.Second, 2 * time.Second}, Jitter: 1}
	if next, ok := r.Next(2, t0, t0); !ok || next != t0.Add(2*time.Second) {
		t.Errorf("Delays Next(2) = %v %v", next, ok)
	}
	if _, ok := r.Next(3, t0, t0); ok || r.MaxAttempts() != 3 {
		t.Errorf("Delays Next(3) retries; MaxAttempts %d", r.MaxAttempts())
	}
}

// TestRetryRecovery: under the default schedule, a receiver that fails
// from the first attempt for any outage of up to 30 s (in 100 ms steps,
// each with fresh jitter) is attempted again at most 35 s after it is
// back: issue 33's target for a backlog after recovery.
func TestRetryRecovery(t *testing.T) {
	t0 := time.Unix(1_800_000_000, 0)
	var r Retry
	worst := time.Duration(0)
	for outage := time.Duration(0); outage <= 30*time.Second; outage += 100 * time.Millisecond {
		for range 20 {
			at, attempt := t0, 1
			for at.Sub(t0) < outage {
				next, ok := r.Next(attempt, t0, at)
				if !ok {
					t.Fatalf("outage %v: given up after %d attempts", outage, attempt)
				}
				at, attempt = next, attempt+1
			}
			worst = max(worst, at.Sub(t0)-outage)
		}
	}
	if worst > 35*time.Second {
		t.Errorf("an attempt came %v after the receiver was back, want at most 35 s", worst)
	}
	t.Logf("worst wait after recovery: %v", worst)
}
