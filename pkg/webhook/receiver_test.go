package webhook

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// receiverRig is a Receiver on a real loopback server, recording what it
// handles.
type receiverRig struct {
	r       *Receiver
	srv     *httptest.Server
	sec     Secret
	mu      sync.Mutex
	handled []Delivery
	fail    error // returned by Handle when set
}

func newReceiverRig(t *testing.T, now func() time.Time) *receiverRig {
	rig := &receiverRig{sec: newSecret(t, 32)}
	rig.r = &Receiver{
		Secrets: func(sub string) []Secret {
			if sub == "sub_known" || sub == "sub_second" {
				return []Secret{rig.sec}
			}
			return nil
		},
		Handle: func(d Delivery) error {
			rig.mu.Lock()
			defer rig.mu.Unlock()
			if rig.fail != nil {
				return rig.fail
			}
			rig.handled = append(rig.handled, d)
			return nil
		},
		Now:     now,
		MaxBody: 64 << 10,
		Dedup:   3,
	}
	rig.srv = httptest.NewServer(rig.r)
	t.Cleanup(rig.srv.Close)
	return rig
}

// post sends a request signed with sec at ts.
func (rig *receiverRig) post(t *testing.T, id, sub string, body []byte, sec Secret, ts time.Time) (int, []byte) {
	t.Helper()
	sig, _ := sec.webhook().Sign(id, ts, body)
	req, _ := http.NewRequest(http.MethodPost, rig.srv.URL, bytes.NewReader(body))
	req.Header.Set(HeaderID, id)
	req.Header.Set(HeaderTimestamp, strconv.FormatInt(ts.Unix(), 10))
	req.Header.Set(HeaderSignature, sig)
	req.Header.Set(HeaderSubscriptionID, sub)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Error(err) // not Fatal: post runs in goroutines too
		return 0, nil
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	b.ReadFrom(resp.Body)
	return resp.StatusCode, b.Bytes()
}

func TestReceiver(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	rig := newReceiverRig(t, func() time.Time { return now })
	ev, _ := EventBody("evt_1", "order.created", now, json.RawMessage(`{"id":1}`), "c1")

	if code, _ := rig.post(t, "evt_1", "sub_known", ev, rig.sec, now); code != http.StatusNoContent {
		t.Fatalf("good delivery: %d", code)
	}
	// A duplicate webhook-id: 200, not handled again.
	if code, _ := rig.post(t, "evt_1", "sub_known", ev, rig.sec, now.Add(time.Minute)); code != http.StatusOK {
		t.Errorf("duplicate: %d", code)
	}
	// The same event for another subscription is not a duplicate.
	if code, _ := rig.post(t, "evt_1", "sub_second", ev, rig.sec, now); code != http.StatusNoContent {
		t.Errorf("the same event for another subscription: %d", code)
	}
	for _, tt := range []struct {
		name string
		id   string
		sub  string
		body []byte
		sec  Secret
		ts   time.Time
		want int
	}{
		{"wrong secret", "evt_2", "sub_known", ev, newSecret(t, 32), now, http.StatusUnauthorized},
		{"stale", "evt_3", "sub_known", ev, rig.sec, now.Add(-5*time.Minute - time.Second), http.StatusUnauthorized},
		{"future", "evt_4", "sub_known", ev, rig.sec, now.Add(5*time.Minute + time.Second), http.StatusUnauthorized},
		{"unknown subscription", "evt_5", "sub_other", ev, rig.sec, now, http.StatusServiceUnavailable},
		{"not JSON", "evt_6", "sub_known", []byte(`nope`), rig.sec, now, http.StatusBadRequest},
		{"event without name", "evt_7", "sub_known", []byte(`{"eventId":"e"}`), rig.sec, now, http.StatusBadRequest},
		{"oversized", "evt_8", "sub_known", []byte(`"` + strings.Repeat("x", 64<<10) + `"`), rig.sec, now, http.StatusRequestEntityTooLarge},
	} {
		if code, _ := rig.post(t, tt.id, tt.sub, tt.body, tt.sec, tt.ts); code != tt.want {
			t.Errorf("%s: %d, want %d", tt.name, code, tt.want)
		}
	}
	// A tampered body with a good signature of another body.
	sig, _ := rig.sec.webhook().Sign("evt_9", now, ev)
	req, _ := http.NewRequest(http.MethodPost, rig.srv.URL, strings.NewReader(strings.Replace(string(ev), `"id":1`, `"id":2`, 1)))
	req.Header.Set(HeaderID, "evt_9")
	req.Header.Set(HeaderTimestamp, strconv.FormatInt(now.Unix(), 10))
	req.Header.Set(HeaderSignature, sig)
	req.Header.Set(HeaderSubscriptionID, "sub_known")
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("tampered body: %v %v", resp.StatusCode, err)
	}
	// Oversized without a Content-Length (chunked): 413 while reading.
	big := []byte(`"` + strings.Repeat("x", 64<<10) + `"`)
	sig, _ = rig.sec.webhook().Sign("evt_10", now, big)
	req, _ = http.NewRequest(http.MethodPost, rig.srv.URL, io.MultiReader(bytes.NewReader(big)))
	req.Header.Set(HeaderID, "evt_10")
	req.Header.Set(HeaderTimestamp, strconv.FormatInt(now.Unix(), 10))
	req.Header.Set(HeaderSignature, sig)
	req.Header.Set(HeaderSubscriptionID, "sub_known")
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusRequestEntityTooLarge || req.ContentLength != 0 {
		t.Errorf("oversized, chunked: %v %v (Content-Length %d)", resp.StatusCode, err, req.ContentLength)
	}
	// Missing headers, GET.
	if resp, _ := http.Post(rig.srv.URL, "application/json", bytes.NewReader(ev)); resp.StatusCode != http.StatusBadRequest {
		t.Errorf("no headers: %d", resp.StatusCode)
	}
	if resp, _ := http.Get(rig.srv.URL); resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("GET: %d", resp.StatusCode)
	}
	if len(rig.handled) != 2 || rig.handled[1].SubscriptionID != "sub_second" || rig.handled[0].Event == nil || rig.handled[0].Event.EventID != "evt_1" ||
		rig.handled[0].SubscriptionID != "sub_known" || !rig.handled[0].Timestamp.Equal(now) {
		t.Errorf("handled: %+v", rig.handled)
	}
}

// TestReceiverHandleErrors: a failing Handle answers 500 and the id is not
// remembered (the retry is handled); ErrGone answers 410.
func TestReceiverHandleErrors(t *testing.T) {
	now := time.Now()
	rig := newReceiverRig(t, nil)
	ev, _ := EventBody("evt_1", "x", now, nil, "")
	rig.fail = errors.New("disk full")
	if code, _ := rig.post(t, "evt_1", "sub_known", ev, rig.sec, now); code != http.StatusInternalServerError {
		t.Errorf("failing Handle: %d", code)
	}
	rig.fail = ErrGone
	if code, _ := rig.post(t, "evt_1", "sub_known", ev, rig.sec, now); code != http.StatusGone {
		t.Errorf("ErrGone: %d", code)
	}
	rig.fail = nil
	if code, _ := rig.post(t, "evt_1", "sub_known", ev, rig.sec, now); code != http.StatusNoContent {
		t.Errorf("retry: %d", code)
	}
	if len(rig.handled) != 1 {
		t.Errorf("handled %d times", len(rig.handled))
	}
}

// TestReceiverDedupBounded: the set of remembered ids holds Dedup ids; an
// older one is handled again.
func TestReceiverDedupBounded(t *testing.T) {
	now := time.Now()
	rig := newReceiverRig(t, nil) // Dedup 3
	for _, id := range []string{"a", "b", "c", "d", "a", "d"} {
		ev, _ := EventBody(id, "x", now, nil, "")
		rig.post(t, id, "sub_known", ev, rig.sec, now)
	}
	var got []string
	for _, d := range rig.handled {
		got = append(got, d.WebhookID)
	}
	if strings.Join(got, ",") != "a,b,c,d,a" {
		t.Errorf("handled %v", got)
	}
	if len(rig.r.seen) != 3 || len(rig.r.ring) != 3 {
		t.Errorf("remembered %d ids, ring %d", len(rig.r.seen), len(rig.r.ring))
	}
}

// TestSenderToReceiver: the Sender's verification handshake against a
// Receiver succeeds, and its event, gap and terminated deliveries are
// verified and handled, signed with two secrets of which the Receiver
// knows only the old one.
func TestSenderToReceiver(t *testing.T) {
	rig := newReceiverRig(t, nil)
	srv := &counting{Server: rig.srv}
	s := NewSender(Policy{Allow: []Origin{srv.origin(t)}})
	secrets := []Secret{newSecret(t, 24), rig.sec}
	if o := s.Verify(context.Background(), rig.srv.URL, "sub_known", secrets); !o.OK() {
		t.Fatalf("Verify: %+v", o)
	}
	ev, _ := EventBody("evt_1", "order.created", time.Now(), json.RawMessage(`{"a":[1,2]}`), "")
	gap, _ := GapBody("c9")
	term, _ := TerminatedBody(-32001, "authorization revoked", map[string]string{"reason": "revoked"})
	for _, m := range []Message{
		{ID: "evt_1", Body: ev}, {ID: ControlID(ControlGap), Body: gap}, {ID: ControlID(ControlTerminated), Body: term},
	} {
		m.SubscriptionID, m.URL, m.Secrets = "sub_known", rig.srv.URL, secrets
		if o := s.Send(context.Background(), m); !o.OK() {
			t.Errorf("%s: %+v", m.ID, o)
		}
	}
	if len(rig.handled) != 4 {
		t.Fatalf("handled %d", len(rig.handled))
	}
	if c := rig.handled[0].Control; c == nil || c.Type != ControlVerification {
		t.Errorf("verification: %+v", rig.handled[0])
	}
	if e := rig.handled[1].Event; e == nil || string(e.Data) != `{"a":[1,2]}` || e.Cursor != nil {
		t.Errorf("event: %+v", rig.handled[1])
	}
	if c := rig.handled[2].Control; c == nil || c.Type != ControlGap || c.Cursor == nil || *c.Cursor != "c9" {
		t.Errorf("gap: %+v", rig.handled[2])
	}
	if c := rig.handled[3].Control; c == nil || c.Error == nil || c.Error.Code != -32001 || string(c.Error.Data) != `{"reason":"revoked"}` {
		t.Errorf("terminated: %+v", rig.handled[3])
	}
}

// FuzzParseBody: ParseBody never panics, and what it accepts is exactly
// one of an event (with an id and a name) and a control envelope (with a
// type).
func FuzzParseBody(f *testing.F) {
	ev, _ := EventBody("evt_1", "order.created", time.Unix(0, 0), json.RawMessage(`{"x":1}`), "c")
	gap, _ := GapBody("")
	term, _ := TerminatedBody(1, "m", nil)
	for _, s := range [][]byte{ev, gap, term, []byte(`{"type":"verification","challenge":"abc"}`), []byte(`{"type":1}`), []byte(`[]`), []byte(`null`)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		d, err := ParseBody(body)
		if err != nil {
			return
		}
		switch {
		case (d.Event == nil) == (d.Control == nil):
			t.Fatalf("event %v control %v", d.Event, d.Control)
		case d.Event != nil && (d.Event.EventID == "" || d.Event.Name == ""):
			t.Fatalf("event without id or name: %+v", d.Event)
		case d.Control != nil && d.Control.Type == "":
			t.Fatalf("control without type")
		}
	})
}

// TestReceiverConcurrentDuplicates: copies of one delivery arriving while
// the first is being handled are answered 503 (retryable), not 200, so a
// first copy that then fails still leaves the sender a reason to retry;
// the delivery is handled once.
func TestReceiverConcurrentDuplicates(t *testing.T) {
	now := time.Now()
	rig := newReceiverRig(t, nil)
	entered, release := make(chan struct{}), make(chan struct{})
	inner := rig.r.Handle
	rig.r.Handle = func(d Delivery) error {
		close(entered)
		<-release
		return inner(d)
	}
	ev, _ := EventBody("evt_c", "x", now, nil, "")
	first := make(chan int)
	go func() {
		code, _ := rig.post(t, "evt_c", "sub_known", ev, rig.sec, now)
		first <- code
	}()
	<-entered
	for range 3 {
		if code, _ := rig.post(t, "evt_c", "sub_known", ev, rig.sec, now); code != http.StatusServiceUnavailable {
			t.Errorf("copy during handling: %d", code)
		}
	}
	close(release)
	if code := <-first; code != http.StatusNoContent {
		t.Errorf("first: %d", code)
	}
	if code, _ := rig.post(t, "evt_c", "sub_known", ev, rig.sec, now); code != http.StatusOK {
		t.Errorf("copy after: %d", code)
	}
	if len(rig.handled) != 1 {
		t.Errorf("handled %d", len(rig.handled))
	}
}
