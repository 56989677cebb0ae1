package eventsconformance_test

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpush/mcpush/internal/eventsconformance"
	"github.com/mcpush/mcpush/internal/testutil"
	"github.com/mcpush/mcpush/pkg/mcp"
	"github.com/mcpush/mcpush/pkg/notify"
	"github.com/mcpush/mcpush/pkg/notify/sqlitestore"
	"github.com/mcpush/mcpush/pkg/webhook"
)

// headerPrincipal authenticates a request as its X-Principal header.
type headerPrincipal struct{}

func (headerPrincipal) Authenticate(r *http.Request) (string, error) {
	return r.Header.Get("X-Principal"), nil
}

// rig is a server with the fixtures on a SQLite file, over HTTP.
type rig struct {
	t   *testing.T
	url string
	st  eventsconformance.Store
	ctl *eventsconformance.Controls
}

// newRig starts a server with the fixtures registered (webhooks: with
// webhook delivery, and no origin allowed by configuration).
func newRig(t *testing.T, webhooks bool) *rig {
	st, err := sqlitestore.New(filepath.Join(t.TempDir(), "conformance.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	o := &mcp.ServerOptions{DynamicRegistries: true, Events: true, RegistryRefresh: 20 * time.Millisecond,
		StateKeys: [][]byte{[]byte("events-conformance-key-0123456789abcd")},
		Logger:    slog.New(slog.NewTextHandler(io.Discard, nil))}
	if webhooks {
		o.Webhooks = &mcp.WebhookOptions{Sender: webhook.NewSender(webhook.Policy{Timeout: 2 * time.Second})}
	}
	ctl := eventsconformance.New()
	ctl.Configure(o)
	srv := mcp.NewServer(&mcp.Implementation{Name: "conformance", Version: "1"}, st, o)
	ctl.Register(srv, st)
	if err := eventsconformance.Setup(context.Background(), st); err != nil {
		t.Fatal(err)
	}
	h := mcp.NewStreamableHandler(srv, &mcp.StreamableOptions{LocalhostOnly: true, Authenticator: headerPrincipal{}})
	ts := httptest.NewServer(h)
	t.Cleanup(func() { ts.Close(); h.Close() })
	return &rig{t: t, url: ts.URL, st: st, ctl: ctl}
}

// reply is a JSON-RPC response.
type reply struct {
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// call makes a 2026-era request of method with params (a JSON object) as
// principal alice.
func (r *rig) call(method, name, params string) *reply {
	r.t.Helper()
	body := `{"jsonrpc":"2.0","id":1,"method":"` + method + `","params":` + withMeta(params) + `}`
	hdr := []string{"Mcp-Protocol-Version", mcp.ProtocolVersion2026, "Mcp-Method", method, "X-Principal", "alice"}
	if name != "" {
		hdr = append(hdr, "Mcp-Name", name)
	}
	resp, b := testutil.PostRead(r.t, nil, r.url, "", body, hdr...)
	text := strings.TrimSpace(string(b))
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		lines := strings.Split(text, "\n")
		text = strings.TrimPrefix(lines[len(lines)-1], "data: ")
	}
	var rep reply
	if err := json.Unmarshal([]byte(text), &rep); err != nil {
		r.t.Fatalf("%s: response %q: %v", method, b, err)
	}
	return &rep
}

func withMeta(params string) string {
	meta := `"_meta":{"io.modelcontextprotocol/protocolVersion":"` + mcp.ProtocolVersion2026 + `","io.modelcontextprotocol/clientCapabilities":{}}`
	if strings.TrimSpace(params) == "{}" {
		return "{" + meta + "}"
	}
	return "{" + meta + "," + strings.TrimPrefix(strings.TrimSpace(params), "{")
}

// tool calls a control with args (JSON) and returns its text and whether
// it is a tool error.
func (r *rig) tool(name, args string) (string, bool) {
	r.t.Helper()
	rep := r.call("tools/call", name, `{"name":"`+name+`","arguments":`+args+`}`)
	if rep.Error != nil {
		r.t.Fatalf("%s: %+v", name, rep.Error)
	}
	var out struct {
		Content []struct {
			Text string `json:"text"`
		} `json:"content"`
		IsError bool `json:"isError"`
	}
	if err := json.Unmarshal(rep.Result, &out); err != nil || len(out.Content) != 1 {
		r.t.Fatalf("%s: result %s: %v", name, rep.Result, err)
	}
	return out.Content[0].Text, out.IsError
}

// mustTool is tool for a call that must succeed.
func (r *rig) mustTool(name, args string) string {
	r.t.Helper()
	text, isErr := r.tool(name, args)
	if isErr {
		r.t.Fatalf("%s %s: tool error %q", name, args, text)
	}
	return text
}

// toolNames lists the server's tools (one page).
func (r *rig) toolNames() []string {
	r.t.Helper()
	rep := r.call("tools/list", "", `{}`)
	var res struct {
		Tools []struct {
			Name string `json:"name"`
		} `json:"tools"`
	}
	if rep.Error != nil || json.Unmarshal(rep.Result, &res) != nil {
		r.t.Fatalf("tools/list: %+v %s", rep.Error, rep.Result)
	}
	var out []string
	for _, t := range res.Tools {
		if strings.HasPrefix(t.Name, "events_conformance_") {
			out = append(out, t.Name)
		}
	}
	slices.Sort(out)
	return out
}

var streamControls = []string{eventsconformance.ToolGeneration, eventsconformance.ToolQuota, eventsconformance.ToolRestart,
	eventsconformance.ToolTerminate, eventsconformance.ToolYieldError, eventsconformance.ToolYieldGap}

// TestControlsListed: the server lists every control by the suite's
// name; without webhook delivery, only those that need none.
func TestControlsListed(t *testing.T) {
	all := slices.Sorted(slices.Values(append(slices.Clone(streamControls), eventsconformance.ToolSubscribeAs,
		eventsconformance.ToolAllowCallbackOrigin, eventsconformance.ToolWebhookGap, eventsconformance.ToolWebhookTerminate,
		eventsconformance.ToolSubscriptionExists, eventsconformance.ToolSubscriptionState)))
	if got := newRig(t, true).toolNames(); !slices.Equal(got, all) {
		t.Errorf("with webhooks: %v, want %v", got, all)
	}
	if got, want := newRig(t, false).toolNames(), slices.Sorted(slices.Values(streamControls)); !slices.Equal(got, want) {
		t.Errorf("without webhooks: %v, want %v", got, want)
	}
}

// TestSetupEventTypes: events/list offers the fixtures' types over more
// than one page, conformance.events first with poll, push and webhook
// and a typed optional argument, conformance.push-only second with push
// only; events/poll refuses a mistyped argument.
func TestSetupEventTypes(t *testing.T) {
	r := newRig(t, true)
	var names []string
	var first map[string]any
	cursor := ""
	for pages := 1; ; pages++ {
		params := `{}`
		if cursor != "" {
			params = `{"cursor":"` + cursor + `"}`
		}
		rep := r.call("events/list", "", params)
		var res struct {
			Events     []map[string]any `json:"events"`
			NextCursor string           `json:"nextCursor"`
		}
		if rep.Error != nil || json.Unmarshal(rep.Result, &res) != nil {
			t.Fatalf("events/list: %+v", rep.Error)
		}
		for _, e := range res.Events {
			if e["name"] == eventsconformance.EventsType {
				first = e
			}
			names = append(names, e["name"].(string))
		}
		if res.NextCursor == "" {
			if pages < 2 {
				t.Errorf("events/list has %d page, want more than one", pages)
			}
			break
		}
		if pages > 5 {
			t.Fatal("events/list does not end")
		}
		cursor = res.NextCursor
	}
	if len(names) != eventsconformance.PageTypes+2 || names[0] != eventsconformance.EventsType || names[len(names)-1] != eventsconformance.PushOnlyType {
		t.Errorf("event types: %d, first %s, last %s", len(names), names[0], names[len(names)-1])
	}
	b, _ := json.Marshal(first)
	if !strings.Contains(string(b), `"delivery":["poll","push","webhook"]`) || !strings.Contains(string(b), `"channel":{`) {
		t.Errorf("%s: %s", eventsconformance.EventsType, b)
	}
	if rep := r.call("events/poll", "", `{"name":"`+eventsconformance.EventsType+`","arguments":{"channel":7},"cursor":null}`); rep.Error == nil || rep.Error.Code != mcp.CodeInvalidParams {
		t.Errorf("a mistyped argument: %+v", rep.Error)
	}
}

// stream is an events/stream read as it arrives.
type stream struct {
	mu   sync.Mutex
	msgs []map[string]any
	done chan struct{}
	stop context.CancelFunc
}

// openStream opens an events/stream of name from now.
func (r *rig) openStream(name string) *stream {
	r.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	body := `{"jsonrpc":"2.0","id":"S1","method":"events/stream","params":` + withMeta(`{"name":"`+name+`","cursor":null}`) + `}`
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, r.url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for _, kv := range [][2]string{{"Mcp-Protocol-Version", mcp.ProtocolVersion2026}, {"Mcp-Method", "events/stream"}, {"Mcp-Name", name}, {"X-Principal", "alice"}} {
		req.Header.Set(kv[0], kv[1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		r.t.Fatal(err)
	}
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		b, _ := io.ReadAll(resp.Body)
		r.t.Fatalf("events/stream %s: %d %s", name, resp.StatusCode, b)
	}
	s := &stream{done: make(chan struct{}), stop: cancel}
	go func() {
		defer close(s.done)
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			data, ok := strings.CutPrefix(sc.Text(), "data: ")
			if !ok {
				continue
			}
			var m map[string]any
			if json.Unmarshal([]byte(data), &m) == nil {
				s.mu.Lock()
				s.msgs = append(s.msgs, m)
				s.mu.Unlock()
			}
		}
	}()
	r.t.Cleanup(func() { cancel(); <-s.done })
	return s
}

// waitFor waits up to 5 s for a message whose method (or "result" for
// the final result) is method, after the first skip messages, and
// returns it.
func (s *stream) waitFor(t *testing.T, method string, skip int) map[string]any {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		s.mu.Lock()
		for _, m := range s.msgs[min(skip, len(s.msgs)):] {
			if m["method"] == method || method == "result" && m["result"] != nil {
				s.mu.Unlock()
				return m
			}
		}
		s.mu.Unlock()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	t.Fatalf("no %s in 5 s: %v", method, s.msgs)
	return nil
}

func (s *stream) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.msgs)
}

func (s *stream) ended() bool {
	select {
	case <-s.done:
		return true
	default:
		return false
	}
}

// TestStreamControls: yield_error and yield_gap reach a live stream of
// their type (an error, then an active with truncated) which stays open;
// terminate ends the push-only type's stream with terminated and the
// final result, and the type's next stream too; a type without push, an
// unknown type and bad arguments are tool errors.
func TestStreamControls(t *testing.T) {
	r := newRig(t, false)
	s := r.openStream(eventsconformance.EventsType)
	s.waitFor(t, "notifications/events/active", 0)
	n := s.count()
	r.mustTool(eventsconformance.ToolYieldError, `{"name":"`+eventsconformance.EventsType+`"}`)
	e := s.waitFor(t, "notifications/events/error", n)
	if b, _ := json.Marshal(e); !strings.Contains(string(b), `"code":-32603`) || !strings.Contains(string(b), `"io.modelcontextprotocol/subscriptionId":"S1"`) {
		t.Errorf("error notification: %s", b)
	}
	n = s.count()
	r.mustTool(eventsconformance.ToolYieldGap, `{"name":"`+eventsconformance.EventsType+`"}`)
	if a := s.waitFor(t, "notifications/events/active", n); a["params"].(map[string]any)["truncated"] != true {
		t.Errorf("gap: %v", a)
	}
	spare := r.openStream(eventsconformance.PushOnlyType)
	spare.waitFor(t, "notifications/events/active", 0)
	r.mustTool(eventsconformance.ToolTerminate, `{"name":"`+eventsconformance.PushOnlyType+`"}`)
	spare.waitFor(t, "notifications/events/terminated", 0)
	spare.waitFor(t, "result", 0)
	select {
	case <-spare.done:
	case <-time.After(5 * time.Second):
		t.Fatal("the terminated stream stays open")
	}
	later := r.openStream(eventsconformance.PushOnlyType)
	later.waitFor(t, "notifications/events/terminated", 0)
	if s.ended() {
		t.Error("the other type's stream ended")
	}
	for _, bad := range []string{`{"name":"conformance.pages.000"}`, `{"name":"no.such.type"}`, `{}`, `{"name":"x","extra":1}`} {
		if text, isErr := r.tool(eventsconformance.ToolYieldError, bad); !isErr {
			t.Errorf("yield_error %s: %q, want a tool error", bad, text)
		}
	}
}

// TestQuotaGenerationRestart: quota answers the listen cap as
// {"name","max"}, generation starts at 1, restart answers the next one
// and generation follows it.
func TestQuotaGenerationRestart(t *testing.T) {
	r := newRig(t, false)
	var q struct {
		Name string `json:"name"`
		Max  int    `json:"max"`
	}
	if err := json.Unmarshal([]byte(r.mustTool(eventsconformance.ToolQuota, `{}`)), &q); err != nil || q.Name != eventsconformance.EventsType || q.Max != mcp.DefaultLimits.MaxListensPerPrincipal {
		t.Errorf("quota: %+v, %v", q, err)
	}
	if g := r.mustTool(eventsconformance.ToolGeneration, `{}`); g != "1" {
		t.Errorf("generation %q, want 1", g)
	}
	if g := r.mustTool(eventsconformance.ToolRestart, `{}`); g != "2" {
		t.Errorf("restart answered %q, want 2", g)
	}
	if g := r.mustTool(eventsconformance.ToolGeneration, `{}`); g != "2" {
		t.Errorf("generation after the restart %q, want 2", g)
	}
}

// receiver is a webhook.Receiver on loopback that records what it
// verified.
type receiver struct {
	*httptest.Server
	mu     sync.Mutex
	secret string
	got    []webhook.Delivery
}

func newReceiver(t *testing.T, secret string) *receiver {
	rc := &receiver{secret: secret}
	recv := &webhook.Receiver{
		Secrets: func(string) []webhook.Secret {
			s, _ := webhook.ParseSecret(rc.secret)
			return []webhook.Secret{s}
		},
		Handle: func(d webhook.Delivery) error {
			rc.mu.Lock()
			defer rc.mu.Unlock()
			rc.got = append(rc.got, d)
			return nil
		},
	}
	rc.Server = httptest.NewServer(recv)
	t.Cleanup(rc.Close)
	return rc
}

// wait waits up to 5 s for a verified delivery that ok accepts.
func (rc *receiver) wait(t *testing.T, what string, ok func(webhook.Delivery) bool) webhook.Delivery {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		rc.mu.Lock()
		for _, d := range rc.got {
			if ok(d) {
				rc.mu.Unlock()
				return d
			}
		}
		rc.mu.Unlock()
	}
	t.Fatalf("no %s delivered in 5 s", what)
	return webhook.Delivery{}
}

func control(kind string) func(webhook.Delivery) bool {
	return func(d webhook.Delivery) bool { return d.Control != nil && d.Control.Type == kind }
}

func newWhsec() string {
	b := make([]byte, 32)
	rand.Read(b)
	return webhook.SecretPrefix + base64.StdEncoding.EncodeToString(b)
}

// subscribe subscribes alice's webhook of EventsType to url.
func (r *rig) subscribe(url, secret string) *reply {
	return r.call("events/subscribe", eventsconformance.EventsType, `{"name":"`+eventsconformance.EventsType+`","delivery":{"mode":"webhook","url":"`+url+`","secret":"`+secret+`"},"cursor":null}`)
}

// TestAllowCallbackOrigin: a loopback http callback is refused until
// allow_callback_origin names its origin; then it is verified and
// subscribed, and the process's deliveries (Emit) reach it; another port
// of the same host stays refused; malformed origins are tool errors and
// allow nothing.
func TestAllowCallbackOrigin(t *testing.T) {
	r := newRig(t, true)
	secret := newWhsec()
	rc := newReceiver(t, secret)
	other := newReceiver(t, secret)
	if rep := r.subscribe(rc.URL+"/hook", secret); rep.Error == nil || rep.Error.Code != mcp.CodeInvalidParams {
		t.Fatalf("before the control: %+v", rep.Error)
	}
	for _, bad := range []string{`{"origin":"` + rc.URL + `,` + other.URL + `"}`, `{"origin":"` + rc.URL + `/hook"}`, `{"origin":"ftp://127.0.0.1:1"}`, `{"origin":""}`, `{}`} {
		if text, isErr := r.tool(eventsconformance.ToolAllowCallbackOrigin, bad); !isErr {
			t.Errorf("allow %s: %q, want a tool error", bad, text)
		}
	}
	if rep := r.subscribe(rc.URL+"/hook", secret); rep.Error == nil {
		t.Fatal("a refused allowance allowed the callback")
	}
	if got := r.mustTool(eventsconformance.ToolAllowCallbackOrigin, `{"origin":"`+rc.URL+`"}`); got != rc.URL {
		t.Errorf("allow answered %q, want %q", got, rc.URL)
	}
	if rep := r.subscribe(rc.URL+"/hook", secret); rep.Error != nil {
		t.Fatalf("after the control: %+v", rep.Error)
	}
	rc.wait(t, "verification", control(webhook.ControlVerification))
	if rep := r.subscribe(other.URL+"/hook", secret); rep.Error == nil || rep.Error.Code != mcp.CodeInvalidParams {
		t.Errorf("another origin: %+v", rep.Error)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := r.ctl.Emit(ctx, r.st, 50*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	d := rc.wait(t, "event", func(d webhook.Delivery) bool { return d.Event != nil })
	if d.Event.Name != eventsconformance.EventsType || !strings.Contains(string(d.Event.Data), `"channel"`) {
		t.Errorf("delivered %+v", d.Event)
	}
	other.mu.Lock()
	defer other.mu.Unlock()
	if len(other.got) != 0 {
		t.Errorf("%d deliveries reached the other origin", len(other.got))
	}
}

// TestWebhookControls: subscription_state, subscription_exists,
// subscribe_as, webhook_gap and webhook_terminate on alice's
// subscription and on one made for bob: the envelopes arrive signed with
// the subscription's secret, the gap's cursor is the one answered, a
// terminated subscription is absent, bob's survives alice's unsubscribe,
// and a suspended one reads suspended.
func TestWebhookControls(t *testing.T) {
	r := newRig(t, true)
	secret := newWhsec()
	rc := newReceiver(t, secret)
	r.mustTool(eventsconformance.ToolAllowCallbackOrigin, `{"origin":"`+rc.URL+`"}`)
	url := rc.URL + "/hook"
	rep := r.subscribe(url, secret)
	var sub struct {
		ID string `json:"id"`
	}
	if rep.Error != nil || json.Unmarshal(rep.Result, &sub) != nil || sub.ID == "" {
		t.Fatalf("subscribe: %+v %s", rep.Error, rep.Result)
	}
	id := `{"id":"` + sub.ID + `"}`
	if s := r.mustTool(eventsconformance.ToolSubscriptionState, id); s != eventsconformance.StateActive {
		t.Errorf("state %q, want active", s)
	}
	if s := r.mustTool(eventsconformance.ToolSubscriptionState, `{"id":"sub_0123"}`); s != eventsconformance.StateAbsent {
		t.Errorf("state of an unknown id %q, want absent", s)
	}
	if s := r.mustTool(eventsconformance.ToolSubscriptionExists, `{"principal":"alice","id":"`+sub.ID+`"}`); s != "true" {
		t.Errorf("alice's exists: %q", s)
	}
	if s := r.mustTool(eventsconformance.ToolSubscriptionExists, `{"principal":"bob","id":"`+sub.ID+`"}`); s != "false" {
		t.Errorf("alice's as bob's: %q", s)
	}

	cursor := r.mustTool(eventsconformance.ToolWebhookGap, id)
	gap := rc.wait(t, "gap", control(webhook.ControlGap))
	if gap.Control.Cursor == nil || *gap.Control.Cursor != cursor || gap.SubscriptionID != sub.ID || !strings.HasPrefix(gap.WebhookID, "msg_gap_") {
		t.Errorf("gap %+v (cursor %v), answered %q", gap, gap.Control.Cursor, cursor)
	}
	if rep := r.call("events/poll", "", `{"name":"`+eventsconformance.EventsType+`","cursor":"`+cursor+`"}`); rep.Error != nil {
		t.Errorf("polling from the gap's cursor: %+v", rep.Error)
	}

	bobs := r.mustTool(eventsconformance.ToolSubscribeAs, `{"principal":"bob","name":"`+eventsconformance.EventsType+`","delivery":{"mode":"webhook","url":"`+url+`","secret":"`+secret+`"}}`)
	if bobs == sub.ID || !strings.HasPrefix(bobs, "sub_") {
		t.Fatalf("bob's id %q, alice's %q", bobs, sub.ID)
	}
	if again := r.mustTool(eventsconformance.ToolSubscribeAs, `{"principal":"bob","name":"`+eventsconformance.EventsType+`","delivery":{"url":"`+url+`","secret":"`+newWhsec()+`"},"ttlMs":null}`); again != bobs {
		t.Errorf("bob's refresh: %q, want %q", again, bobs)
	}
	for _, bad := range []string{
		`{"principal":"","name":"` + eventsconformance.EventsType + `","delivery":{"url":"` + url + `","secret":"` + secret + `"}}`,
		`{"principal":"bob","name":"` + eventsconformance.PushOnlyType + `","delivery":{"url":"` + url + `","secret":"` + secret + `"}}`,
		`{"principal":"bob","name":"` + eventsconformance.EventsType + `","delivery":{"url":"http://10.0.0.1/x","secret":"` + secret + `"}}`,
		`{"principal":"bob","name":"` + eventsconformance.EventsType + `","delivery":{"url":"` + url + `","secret":"whsec_c2hvcnQ="}}`,
	} {
		if text, isErr := r.tool(eventsconformance.ToolSubscribeAs, bad); !isErr {
			t.Errorf("subscribe_as %s: %q, want a tool error", bad, text)
		}
	}
	if rep := r.call("events/unsubscribe", eventsconformance.EventsType, `{"name":"`+eventsconformance.EventsType+`","delivery":{"mode":"webhook","url":"`+url+`"}}`); rep.Error != nil {
		t.Fatalf("alice's unsubscribe: %+v", rep.Error)
	}
	if s := r.mustTool(eventsconformance.ToolSubscriptionExists, `{"principal":"alice","id":"`+sub.ID+`"}`); s != "false" {
		t.Errorf("alice's after her unsubscribe: %q", s)
	}
	if s := r.mustTool(eventsconformance.ToolSubscriptionExists, `{"principal":"bob","id":"`+bobs+`"}`); s != "true" {
		t.Errorf("bob's after alice's unsubscribe: %q", s)
	}

	// Suspended, as the ingest leaves it after sustained failure.
	ctx := context.Background()
	w, err := r.st.GetWebhook(ctx, eventsconformance.EventsTopic, bobs)
	if err != nil {
		t.Fatal(err)
	}
	w.Status.Suspended = true
	if err := r.st.UpdateWebhook(ctx, w); err != nil {
		t.Fatal(err)
	}
	if s := r.mustTool(eventsconformance.ToolSubscriptionState, `{"id":"`+bobs+`"}`); s != eventsconformance.StateSuspended {
		t.Errorf("state %q, want suspended", s)
	}

	// bob's refresh rotated the secret: the envelope is signed with the
	// new one and the old one (the grace window); the receiver knows the
	// old one.
	r.mustTool(eventsconformance.ToolWebhookTerminate, `{"id":"`+bobs+`"}`)
	term := rc.wait(t, "terminated", control(webhook.ControlTerminated))
	if term.Control.Error == nil || term.SubscriptionID != bobs || !strings.HasPrefix(term.WebhookID, "msg_terminated_") {
		t.Errorf("terminated %+v", term)
	}
	if s := r.mustTool(eventsconformance.ToolSubscriptionState, `{"id":"`+bobs+`"}`); s != eventsconformance.StateAbsent {
		t.Errorf("state after terminate %q, want absent", s)
	}
	if _, err := r.st.GetWebhook(ctx, eventsconformance.EventsTopic, bobs); !errors.Is(err, notify.ErrNotFound) {
		t.Errorf("the terminated subscription's record: %v", err)
	}
	for _, tool := range []string{eventsconformance.ToolWebhookGap, eventsconformance.ToolWebhookTerminate} {
		if text, isErr := r.tool(tool, `{"id":"`+bobs+`"}`); !isErr {
			t.Errorf("%s of a removed subscription: %q, want a tool error", tool, text)
		}
	}
}
