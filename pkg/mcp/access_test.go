package mcp_test

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/mcpush/mcpush/internal/testutil"
	"github.com/mcpush/mcpush/pkg/eventtools"
	"github.com/mcpush/mcpush/pkg/mcp"
	"github.com/mcpush/mcpush/pkg/notify"
	"github.com/mcpush/mcpush/pkg/webhook"
)

// tenantClaims are the callers of the access tests, by the name they
// send in X-Principal (standing for a bearer token the OAuth validator
// would decode: pkg/oauth's TestAuthenticateClaims covers that part).
var tenantClaims = map[string]notify.Claims{
	"alice": {"scope": "openid incidents:read", "team": "a", "cognito:groups": []any{"oncall"}},
	"bob":   {"scp": []any{"incidents:read"}, "team": "b", "cognito:groups": []any{"sre", "dev"}},
	"carol": {"scope": "openid", "team": "a", "cognito:groups": []any{"oncall"}}, // without the scope
}

// claimsAuth is a ClaimsAuthenticator over tenantClaims: an unknown
// name is refused (401).
type claimsAuth struct{}

func (a claimsAuth) Authenticate(r *http.Request) (string, error) {
	p, _, _, err := a.AuthenticateClaims(r)
	return p, err
}

func (claimsAuth) AuthenticateClaims(r *http.Request) (string, time.Time, notify.Claims, error) {
	name := r.Header.Get("X-Principal")
	c, ok := tenantClaims[name]
	if !ok {
		return "", time.Time{}, nil, fmt.Errorf("%w: unknown caller %q", mcp.ErrUnauthorized, name)
	}
	return "https://issuer.example#" + name, time.Time{}, c, nil
}

// accessTypes are the event types and tools items of the access tests,
// on topics suffixed with sfx:
//   - incident.created: scope incidents:read, team bound (each tenant
//     sees its own team's incidents);
//   - audit.a: team a only;
//   - news: no rule;
//   - tool echo: team a only.
func accessTypes(sfx string) (events, tools map[string]json.RawMessage) {
	events = map[string]json.RawMessage{}
	for _, it := range []notify.EventItem{
		{Name: "incident.created", Topic: "incidents" + sfx, InputSchema: json.RawMessage(`{"type":"object","properties":{"team":{"type":"string"},"severity":{"type":"string"}}}`),
			Access: &notify.Access{Scopes: []string{"incidents:read"}, Bind: map[string]string{"team": "team"}}},
		{Name: "audit.a", Topic: "audit" + sfx, Access: &notify.Access{Claims: map[string][]string{"team": {"a"}}}},
		{Name: "news", Topic: "news" + sfx},
	} {
		events[it.Name], _ = json.Marshal(it.WithDefaults())
	}
	tools = map[string]json.RawMessage{}
	tools["echo"], _ = json.Marshal(notify.ToolItem{Name: "echo", Access: &notify.Access{Claims: map[string][]string{"team": {"a"}}}})
	return events, tools
}

// accessServer serves st with claimsAuth, the Events extension and
// webhooks to allow, and the tools echo and open.
func accessServer(t *testing.T, st mcp.Store, allow string) string {
	t.Helper()
	pol := webhook.Policy{}
	if allow != "" {
		a, err := webhook.ParseAllow(allow)
		if err != nil {
			t.Fatal(err)
		}
		pol.Allow = a
	}
	srv := mcp.NewServer(&mcp.Implementation{Name: "access", Version: "1"}, st, &mcp.ServerOptions{
		DynamicRegistries: true, Events: true, RegistryRefresh: 20 * time.Millisecond,
		StateKeys: [][]byte{[]byte("access-test-key-0123456789abcdef0123")},
		// (Access, not the verification bounds, is under test: the
		// property test verifies hundreds of subscriptions to one origin.)
		Webhooks: &mcp.WebhookOptions{Sender: webhook.NewSender(pol), VerifyDestinationRate: 1 << 20},
	})
	for _, name := range []string{"echo", "open"} {
		srv.AddTool(&mcp.Tool{Name: name, InputSchema: json.RawMessage(`{"type":"object"}`)}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: name}}}, nil
		})
	}
	h := mcp.NewStreamableHandler(srv, &mcp.StreamableOptions{LocalhostOnly: true, Authenticator: claimsAuth{}, KeepAlive: time.Hour})
	ts := httptest.NewServer(h)
	t.Cleanup(func() { ts.Close(); h.Close() })
	return ts.URL
}

// caller makes requests as one principal in one era (a 2025-era session
// of its own, or 2026-era requests).
type caller struct {
	t         *testing.T
	url, name string
	sid       string // 2025 era
}

func newCaller(t *testing.T, url, name, era string) *caller {
	c := &caller{t: t, url: url, name: name}
	if era == "2025" {
		resp := testutil.Post(t, nil, url, "", `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`, "X-Principal", name)
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if c.sid = resp.Header.Get("Mcp-Session-Id"); c.sid == "" {
			t.Fatalf("initialize as %s: %d, no session", name, resp.StatusCode)
		}
	}
	return c
}

// call makes a request of method with params (members of the params
// object, or "").
func (c *caller) call(method, params string) *rpcReply {
	c.t.Helper()
	var body string
	hdr := []string{"X-Principal", c.name}
	tool := toolName(method, params)
	if c.sid == "" {
		if params != "" {
			params += ","
		}
		body = `{"jsonrpc":"2.0","id":1,"method":"` + method + `","params":{` + params + meta2026(`{}`) + `}}`
		hdr = append(hdr, headers2026(method, tool)...)
	} else {
		body = `{"jsonrpc":"2.0","id":1,"method":"` + method + `","params":{` + params + `}}`
		hdr = append(hdr, "Mcp-Protocol-Version", "2025-11-25")
	}
	_, r := call2026With(c.t, nil, c.url, body, append(hdr, sessionHeader(c.sid)...)...)
	return r
}

// toolName is the Mcp-Name of a request of method with params: the
// tool's name of a tools/call, the URI of a resources/read.
func toolName(method, params string) string {
	var p struct{ Name, URI string }
	json.Unmarshal([]byte("{"+params+"}"), &p)
	switch method {
	case "tools/call":
		return p.Name
	case "resources/read":
		return p.URI
	}
	return ""
}

func sessionHeader(sid string) []string {
	if sid == "" {
		return nil
	}
	return []string{"Mcp-Session-Id", sid}
}

// names returns the names of the result's list member.
func names(r *rpcReply, member string) []string {
	var out []string
	list, _ := r.Result[member].([]any)
	for _, it := range list {
		m, _ := it.(map[string]any)
		out = append(out, fmt.Sprint(m["name"]))
	}
	sort.Strings(out)
	return out
}

// refusal is the code and data of an error, to compare two refusals.
func refusal(r *rpcReply) string {
	if r.Error == nil {
		return "no error"
	}
	return fmt.Sprintf("%d %s", r.Error.Code, r.Error.Data)
}

// TestAccessTenants: two tenants (team a, team b) and a caller without
// the scope, on both stores and in both eras: events/list shows each
// only its types; events/poll, events/stream and events/subscribe refuse
// the others with Forbidden, alike for an unknown type, and change no
// stored state; bound arguments are filled in, and one naming another
// team is Forbidden, so each tenant polls only its own team's events;
// a webhook subscription records the claims it was granted on (never
// more) and a grant of no expiry is capped at the 24 h ceiling; tools/list
// hides a tool of team a from the others, and their tools/call is
// answered as for an unknown tool.
func TestAccessTenants(t *testing.T) {
	for _, hs := range clockedStores(t, time.Now) {
		t.Run(hs.name, func(t *testing.T) {
			ctx := context.Background()
			secret := newWhsec(32)
			parsed, _ := webhook.ParseSecret(secret)
			recv := &webhook.Receiver{Secrets: func(string) []webhook.Secret { return []webhook.Secret{parsed} }, Handle: func(webhook.Delivery) error { return nil }}
			hook := httptest.NewServer(recv)
			defer hook.Close()
			st := hs.open(t)
			ws := st.(notify.WebhookStore)
			url := accessServer(t, st, hook.URL)
			sfx := "-" + hs.name
			events, tools := accessTypes(sfx)
			if _, _, err := st.ApplyRegistry(ctx, notify.RegistryEvents, notify.OpPut, events, "ev"+sfx); err != nil {
				t.Fatal(err)
			}
			if _, _, err := st.ApplyRegistry(ctx, notify.RegistryTools, notify.OpPut, tools, "tl"+sfx); err != nil {
				t.Fatal(err)
			}
			// An unknown caller is refused before anything (the negative test of claimsAuth).
			if resp, _ := testutil.PostRead(t, nil, url, "", `{"jsonrpc":"2.0","id":1,"method":"events/list","params":{`+meta2026(`{}`)+`}}`, append(headers2026("events/list", ""), "X-Principal", "mallory")...); resp.StatusCode != http.StatusUnauthorized {
				t.Fatalf("unknown caller: %d, want 401", resp.StatusCode)
			}
			for _, era := range []string{"2025", "2026"} {
				t.Run(era, func(t *testing.T) {
					alice, bob, carol := newCaller(t, url, "alice", era), newCaller(t, url, "bob", era), newCaller(t, url, "carol", era)
					for c, want := range map[*caller][]string{
						alice: {"audit.a", "incident.created", "news"},
						bob:   {"incident.created", "news"},
						carol: {"audit.a", "news"}, // team a, without the scope
					} {
						if got := names(c.call("events/list", ""), "events"); !slices.Equal(got, want) {
							t.Errorf("events/list as %s: %v, want %v", c.name, got, want)
						}
					}
					for c, want := range map[*caller][]string{alice: {"echo", "open"}, bob: {"open"}, carol: {"echo", "open"}} {
						if got := names(c.call("tools/list", ""), "tools"); !slices.Equal(got, want) {
							t.Errorf("tools/list as %s: %v, want %v", c.name, got, want)
						}
					}

					// Refusals: Forbidden, alike for an unknown type, nothing stored.
					before := snapshot(t, ws, "incidents"+sfx) + snapshot(t, ws, "audit"+sfx)
					unknown := refusal(carol.call("events/poll", `"name":"no.such.type","cursor":null`))
					if !strings.HasPrefix(unknown, fmt.Sprint(mcp.CodeForbidden)) {
						t.Fatalf("poll of an unknown type: %s, want Forbidden", unknown)
					}
					sub := func(name, args string) string {
						return `"name":"` + name + `","arguments":` + args + `,"delivery":{"url":"` + hook.URL + `","secret":"` + secret + `"},"ttlMs":null`
					}
					for _, tc := range []struct {
						who           *caller
						method, param string
					}{
						{carol, "events/poll", `"name":"incident.created","cursor":null`},
						{bob, "events/poll", `"name":"audit.a","cursor":null`},
						{alice, "events/poll", `"name":"incident.created","arguments":{"team":"b"},"cursor":null`},
						{bob, "events/poll", `"name":"incident.created","arguments":{"team":"a"},"cursor":null`},
						{carol, "events/subscribe", sub("incident.created", `{}`)},
						{bob, "events/subscribe", sub("audit.a", `{}`)},
						{bob, "events/subscribe", sub("no.such.type", `{}`)},
						{alice, "events/subscribe", sub("incident.created", `{"team":"b"}`)},
						{carol, "events/unsubscribe", sub("incident.created", `{}`)},
					} {
						r := tc.who.call(tc.method, tc.param)
						if got := refusal(r); got != unknown {
							t.Errorf("%s %s %s: %s, want %s (as an unknown type)", tc.who.name, tc.method, tc.param, got, unknown)
						}
					}
					streamsBefore := listenBacking(t, st, "carol", "bob", "alice")
					for _, tc := range []struct {
						who    *caller
						params string
					}{
						{carol, `"name":"incident.created","cursor":null`},
						{bob, `"name":"audit.a","cursor":null`},
						{alice, `"name":"incident.created","arguments":{"team":"b"},"cursor":null`},
						{carol, `"name":"no.such.type","cursor":null`},
					} {
						resp := openAccessStream(t, ctx, tc.who, "s", tc.params)
						var m struct {
							Error *mcp.Error `json:"error"`
						}
						err := json.NewDecoder(resp.Body).Decode(&m)
						resp.Body.Close()
						if err != nil || m.Error == nil || fmt.Sprintf("%d %s", m.Error.Code, m.Error.Data) != unknown {
							t.Errorf("events/stream as %s %s: %v %+v, want %s", tc.who.name, tc.params, err, m.Error, unknown)
						}
					}
					if n := listenBacking(t, st, "carol", "bob", "alice"); n != streamsBefore {
						t.Errorf("refused streams stored backing sessions: %d, then %d", streamsBefore, n)
					}
					if after := snapshot(t, ws, "incidents"+sfx) + snapshot(t, ws, "audit"+sfx); after != before {
						t.Errorf("refusals changed the stored subscriptions:\n%s\n%s", before, after)
					}
					for _, c := range []*caller{bob} {
						unknownTool := c.call("tools/call", `"name":"no_such_tool","arguments":{}`)
						forbidden := c.call("tools/call", `"name":"echo","arguments":{}`)
						if unknownTool.Error == nil || forbidden.Error == nil || forbidden.Error.Code != unknownTool.Error.Code || !strings.Contains(unknownTool.Error.Message, "unknown tool") ||
							forbidden.Error.Message != strings.Replace(unknownTool.Error.Message, "no_such_tool", "echo", 1) {
							t.Errorf("tools/call of echo as %s: %+v; of an unknown tool: %+v", c.name, forbidden.Error, unknownTool.Error)
						}
					}
					if r := alice.call("tools/call", `"name":"echo","arguments":{}`); r.Error != nil || r.Result["isError"] == true {
						t.Errorf("tools/call of echo as alice: %+v %+v", r.Error, r.Result)
					}

					// Bound arguments: each tenant polls its own team's incidents only.
					cursors := map[*caller]*string{}
					for _, c := range []*caller{alice, bob} {
						r := poll2(t, c, `"name":"incident.created","cursor":null`)
						cursors[c] = r.Cursor
					}
					for i, team := range []string{"a", "b", "a", "c"} {
						if _, _, err := st.AppendTopicEvent(ctx, "incidents"+sfx, fmt.Sprintf("%s-%d", era, i), time.Now(), json.RawMessage(`{"team":"`+team+`","i":`+fmt.Sprint(i)+`}`)); err != nil {
							t.Fatal(err)
						}
					}
					for c, want := range map[*caller][]string{alice: {"a", "a"}, bob: {"b"}} {
						for _, args := range []string{``, `"arguments":{"team":"` + map[string]string{"alice": "a", "bob": "b"}[c.name] + `"},`} {
							r := poll2(t, c, `"name":"incident.created",`+args+cursorParam(cursors[c]))
							var got []string
							for _, ev := range r.Events {
								var d struct{ Team string }
								json.Unmarshal(ev.Data, &d)
								got = append(got, d.Team)
							}
							if !slices.Equal(got, want) {
								t.Errorf("poll as %s (%s): teams %v, want %v", c.name, args, got, want)
							}
						}
					}

					// A webhook subscription records what the rule reads, capped at the ceiling.
					r := alice.call("events/subscribe", sub("incident.created", `{}`))
					if r.Error != nil {
						t.Fatalf("subscribe as alice: %+v", r.Error)
					}
					if r.Result["refreshBefore"] == nil {
						t.Error("a subscription to a type with access was granted no expiry")
					}
					w, err := ws.GetWebhook(ctx, "incidents"+sfx, fmt.Sprint(r.Result["id"]))
					if err != nil {
						t.Fatal(err)
					}
					if diff := cmp.Diff(notify.Claims{"scope": "openid incidents:read", "team": "a"}, w.Claims); diff != "" {
						t.Errorf("recorded claims (-want +got):\n%s", diff)
					}
					if string(w.Arguments) != `{"team":"a"}` || w.ExpiresAt.IsZero() || w.ExpiresAt.After(time.Now().Add(mcp.MaxWebhookTTL)) {
						t.Errorf("stored subscription: arguments %s, expires %v", w.Arguments, w.ExpiresAt)
					}
					if !w.Permitted(decodeItem(t, events["incident.created"])) {
						t.Error("the recorded claims do not pass the delivery check")
					}
					if r := alice.call("events/unsubscribe", sub("incident.created", `{}`)); r.Error != nil {
						t.Errorf("unsubscribe as alice (the bound argument filled in again): %+v", r.Error)
					}
				})
			}
		})
	}
}

func decodeItem(t *testing.T, raw json.RawMessage) *notify.EventItem {
	t.Helper()
	e, err := notify.DecodeEventItem(raw)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// poll2 polls as c and fails the test on an error.
func poll2(t *testing.T, c *caller, params string) *mcp.PollEventsResult {
	t.Helper()
	r := c.call("events/poll", params)
	if r.Error != nil {
		t.Fatalf("poll as %s %s: %+v", c.name, params, r.Error)
	}
	b, _ := json.Marshal(r.Result)
	var out mcp.PollEventsResult
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return &out
}

// openAccessStream posts events/stream as c.
func openAccessStream(t *testing.T, ctx context.Context, c *caller, id, params string) *http.Response {
	t.Helper()
	var body string
	hdr := []string{"X-Principal", c.name}
	if c.sid == "" {
		body = `{"jsonrpc":"2.0","id":"` + id + `","method":"events/stream","params":{` + params + `,` + meta2026(`{}`) + `}}`
		hdr = append(hdr, headers2026("events/stream", "")...)
	} else {
		body = `{"jsonrpc":"2.0","id":"` + id + `","method":"events/stream","params":{` + params + `}}`
		hdr = append(hdr, "Mcp-Session-Id", c.sid, "Mcp-Protocol-Version", "2025-11-25")
	}
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, c.url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for ; len(hdr) > 1; hdr = hdr[2:] {
		req.Header.Set(hdr[0], hdr[1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// TestAccessStreamTerminated: a registry change (through the ingest)
// that removes a group from an event type's rule ends the live stream of
// the member of that group with notifications/events/terminated
// (Forbidden) and nothing after it but the stream's end, while the other
// group's stream goes on and receives the next event; on both stores, in
// both eras.
func TestAccessStreamTerminated(t *testing.T) {
	for _, hs := range clockedStores(t, time.Now) {
		t.Run(hs.name, func(t *testing.T) {
			st := hs.open(t)
			url := accessServer(t, st, "")
			for _, era := range []string{"2025", "2026"} {
				t.Run(era, func(t *testing.T) {
					ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
					defer cancel()
					topic := "pager-" + hs.name + "-" + era
					rule := func(groups string) string {
						return `{"type":"registry","registry":"events","op":"put","items":[{"name":"page.` + era + `","topic":"` + topic + `","access":{"claims":{"cognito:groups":` + groups + `}}}]}`
					}
					ingestRaw(t, st, "rule-1-"+topic, rule(`["oncall","sre"]`))
					waitListed(t, newCaller(t, url, "alice", "2026"), "page."+era)
					streams := map[string]<-chan map[string]any{}
					for _, name := range []string{"alice", "bob"} { // oncall, sre
						resp := openAccessStream(t, ctx, newCaller(t, url, name, era), "s-"+name, `"name":"page.`+era+`","cursor":null`)
						if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
							b, _ := io.ReadAll(resp.Body)
							t.Fatalf("stream as %s: %d %s %s", name, resp.StatusCode, ct, b)
						}
						streams[name] = streamMessages(t, resp)
						if ev := nextStream(t, streams[name]); ev.method != "notifications/events/active" {
							t.Fatalf("first message as %s: %+v", name, ev)
						}
					}
					if n := listenBacking(t, st, "alice", "bob"); n < 2 { // what TestAccessTenants counts is there
						t.Fatalf("%d backing sessions of two open streams", n)
					}
					ingestRaw(t, st, "rule-2-"+topic, rule(`["oncall"]`)) // sre removed
					m := next(t, streams["bob"])
					for m["method"] == "notifications/events/heartbeat" {
						m = next(t, streams["bob"])
					}
					p, _ := m["params"].(map[string]any)
					e, _ := p["error"].(map[string]any)
					if m["method"] != "notifications/events/terminated" || fmt.Sprint(e["code"]) != fmt.Sprint(mcp.CodeForbidden) {
						t.Fatalf("bob's stream after the change: %v", m)
					}
					for m := range streams["bob"] { // the result, then the end: no event
						if _, ok := m["result"]; !ok {
							t.Errorf("after terminated: %v", m)
						}
					}
					publish(t, st, topic, "after-"+topic, map[string]any{"n": 1})
					if ev := nextStream(t, streams["alice"]); ev.method != "notifications/events/event" {
						t.Errorf("alice's stream after the change: %+v", ev)
					}
				})
			}
		})
	}
}

// waitListed waits (at most 5 s) until events/list as c shows name: the
// registry cache is renewed in the background.
func waitListed(t *testing.T, c *caller, name string) {
	t.Helper()
	for range 100 {
		if slices.Contains(names(c.call("events/list", ""), "events"), name) {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("%s is not listed within 5 s", name)
}

// jsonClaimsAuth takes a caller's claims from the X-Claims header (a JSON
// object; the principal is derived from it): the property test's
// arbitrary tokens. A header that is not a JSON object is refused.
type jsonClaimsAuth struct{}

func (a jsonClaimsAuth) Authenticate(r *http.Request) (string, error) {
	p, _, _, err := a.AuthenticateClaims(r)
	return p, err
}

func (jsonClaimsAuth) AuthenticateClaims(r *http.Request) (string, time.Time, notify.Claims, error) {
	var c notify.Claims
	h := r.Header.Get("X-Claims")
	if err := json.Unmarshal([]byte(h), &c); err != nil || c == nil {
		return "", time.Time{}, nil, fmt.Errorf("%w: X-Claims is not a JSON object", mcp.ErrUnauthorized)
	}
	return "test#" + h, time.Time{}, c, nil
}

// TestAccessListEqualsSubscribe is a property test: for random access
// rules (scopes, group claims, a bound team) on 6 event types and random
// tokens, the types events/list shows a caller are exactly those its
// events/subscribe accepts (a real subscription, verified by a real
// receiver), and exactly those the rules permit; an unknown type is
// never accepted. 4 rounds of rules, 12 tokens each, seeded.
func TestAccessListEqualsSubscribe(t *testing.T) {
	rng := rand.New(rand.NewPCG(35, 35))
	pick := func(vocab []string) []string {
		var out []string
		for _, v := range vocab {
			if rng.IntN(2) == 0 {
				out = append(out, v)
			}
		}
		return out
	}
	scopes, groups, teams := []string{"s1", "s2", "s3"}, []string{"g1", "g2", "g3"}, []string{"a", "b"}
	secret := newWhsec(32)
	parsed, _ := webhook.ParseSecret(secret)
	hook := httptest.NewServer(&webhook.Receiver{Secrets: func(string) []webhook.Secret { return []webhook.Secret{parsed} }, Handle: func(webhook.Delivery) error { return nil }})
	defer hook.Close()
	allow, _ := webhook.ParseAllow(hook.URL)
	st := clockedStores(t, time.Now)[0].open(t)
	var accepted, refused int
	for round := range 4 {
		ctx := context.Background()
		items := map[string]json.RawMessage{}
		rules := map[string]*notify.Access{}
		for i := range 6 {
			name := fmt.Sprintf("t%d.r%d", i, round)
			var a *notify.Access
			if rng.IntN(5) > 0 {
				a = &notify.Access{Scopes: pick(scopes)}
				if g := pick(groups); len(g) > 0 && rng.IntN(2) == 0 {
					a.Claims = map[string][]string{"groups": g}
				}
				if rng.IntN(3) == 0 {
					a.Bind = map[string]string{"team": "team"}
				}
				if a.Check() != nil { // empty
					a = nil
				}
			}
			rules[name] = a
			items[name], _ = json.Marshal(notify.EventItem{Name: name, Topic: "prop", Access: a}.WithDefaults())
		}
		if _, _, err := st.ApplyRegistry(ctx, notify.RegistryEvents, notify.OpReplace, items, fmt.Sprint("prop-", round)); err != nil {
			t.Fatal(err)
		}
		srv := mcp.NewServer(&mcp.Implementation{Name: "prop", Version: "1"}, st, &mcp.ServerOptions{
			DynamicRegistries: true, Events: true,
			StateKeys: [][]byte{[]byte("access-prop-key-0123456789abcdef0123")},
			Webhooks:  &mcp.WebhookOptions{Sender: webhook.NewSender(webhook.Policy{Allow: allow}), VerifyRate: 1 << 20, VerifyDestinationRate: 1 << 20, MaxPerPrincipal: 1 << 10},
			Limits:    mcp.Limits{MaxRequestsPerMinute: 1 << 20},
		})
		h := mcp.NewStreamableHandler(srv, &mcp.StreamableOptions{LocalhostOnly: true, Authenticator: jsonClaimsAuth{}})
		ts := httptest.NewServer(h)
		for tok := range 12 {
			claims := notify.Claims{}
			if s := pick(scopes); len(s) > 0 {
				claims["scope"] = strings.Join(s, " ")
			}
			if g := pick(groups); len(g) > 0 {
				claims["groups"] = g
			}
			if rng.IntN(3) > 0 {
				claims["team"] = teams[rng.IntN(2)]
			}
			hdr, _ := json.Marshal(claims)
			call := func(method, params string) *rpcReply {
				body := `{"jsonrpc":"2.0","id":1,"method":"` + method + `","params":{` + params + meta2026(`{}`) + `}}`
				_, r := call2026(t, ts.URL, body, append(headers2026(method, ""), "X-Claims", string(hdr))...)
				return r
			}
			listed := names(call("events/list", ""), "events")
			var subscribed, permitted []string
			for name, rule := range rules {
				var dec notify.Claims
				json.Unmarshal(hdr, &dec) // as a token's claims arrive: decoded JSON
				if rule.Permits(dec) {
					permitted = append(permitted, name)
				}
				r := call("events/subscribe", `"name":"`+name+`","delivery":{"url":"`+hook.URL+`","secret":"`+secret+`"},`)
				switch {
				case r.Error == nil:
					subscribed = append(subscribed, name)
					accepted++
				case r.Error.Code == mcp.CodeForbidden:
					refused++
				default:
					t.Fatalf("subscribe %s with %s: %+v", name, hdr, r.Error)
				}
			}
			if r := call("events/subscribe", `"name":"unknown.r`+fmt.Sprint(round)+`","delivery":{"url":"`+hook.URL+`","secret":"`+secret+`"},`); r.Error == nil {
				t.Errorf("an unknown type was subscribed to with %s", hdr)
			}
			sort.Strings(subscribed)
			sort.Strings(permitted)
			if !slices.Equal(listed, subscribed) || !slices.Equal(listed, permitted) {
				t.Errorf("round %d token %d %s:\nlisted     %v\nsubscribed %v\npermitted  %v", round, tok, hdr, listed, subscribed, permitted)
			}
		}
		ts.Close()
		h.Close()
	}
	if accepted == 0 || refused == 0 {
		t.Errorf("a degenerate sample: %d accepted, %d refused", accepted, refused)
	}
	t.Logf("%d subscribes accepted, %d refused", accepted, refused)
}

// topicServer serves st with claimsAuth, the Events extension and the
// event tools (events_recent, events_wait, topics_list, events://{topic}).
func topicServer(t *testing.T, st mcp.Store) string {
	t.Helper()
	srv := mcp.NewServer(&mcp.Implementation{Name: "topics", Version: "1"}, st, &mcp.ServerOptions{
		DynamicRegistries: true, Events: true, RegistryRefresh: 20 * time.Millisecond,
		StateKeys: [][]byte{[]byte("access-test-key-0123456789abcdef0123")},
	})
	eventtools.Add(srv, st, &eventtools.Options{PollInterval: 20 * time.Millisecond})
	h := mcp.NewStreamableHandler(srv, &mcp.StreamableOptions{LocalhostOnly: true, Authenticator: claimsAuth{}, KeepAlive: time.Hour})
	ts := httptest.NewServer(h)
	t.Cleanup(func() { ts.Close(); h.Close() })
	return ts.URL
}

// topicStream opens what delivers c's resource subscriptions to uris:
// in the 2025 era resources/subscribe of each and the session's GET
// stream, in the 2026 era a listen stream.
func topicStream(t *testing.T, ctx context.Context, c *caller, uris []string) <-chan map[string]any {
	t.Helper()
	var resp *http.Response
	if c.sid != "" {
		for _, u := range uris {
			if r := c.call("resources/subscribe", `"uri":"`+u+`"`); r.Error != nil {
				t.Fatalf("resources/subscribe %s as %s: %+v", u, c.name, r.Error)
			}
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, c.url, nil)
		req.Header.Set("Accept", "text/event-stream")
		req.Header.Set("Mcp-Session-Id", c.sid)
		req.Header.Set("X-Principal", c.name)
		var err error
		if resp, err = http.DefaultClient.Do(req); err != nil {
			t.Fatal(err)
		}
	} else {
		list, _ := json.Marshal(uris)
		resp = postListen(t, ctx, c.url, `{"jsonrpc":"2.0","id":"l","method":"subscriptions/listen","params":{"notifications":{"resourceSubscriptions":`+string(list)+`},`+meta2026(`{}`)+`}}`, "X-Principal", c.name)
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("stream as %s: %d %s", c.name, resp.StatusCode, b)
	}
	return streamMessages(t, resp)
}

// topicMessages reads ch until a notification of topic end, and returns
// the topic notifications before it, as "updated <topic>" and
// "message <topic> <data>".
func topicMessages(t *testing.T, ch <-chan map[string]any, end string) []string {
	t.Helper()
	var out []string
	for range 100 {
		m := next(t, ch)
		p, _ := m["params"].(map[string]any)
		switch m["method"] {
		case "notifications/resources/updated":
			topic := strings.TrimPrefix(fmt.Sprint(p["uri"]), "events://")
			if topic == end {
				return out
			}
			out = append(out, "updated "+topic)
		case "notifications/message":
			d, _ := p["data"].(map[string]any)
			b, _ := json.Marshal(d["data"])
			if d["topic"] == end {
				return out
			}
			out = append(out, fmt.Sprint("message ", d["topic"], " ", string(b)))
		}
	}
	t.Fatal("no end marker in 100 messages")
	return nil
}

// toolOutput calls tool as c and returns its structured content.
func toolOutput(t *testing.T, c *caller, tool, args string) map[string]any {
	t.Helper()
	r := c.call("tools/call", `"name":"`+tool+`","arguments":`+args)
	if r.Error != nil || r.Result["isError"] == true {
		t.Fatalf("%s %s as %s: %+v %+v", tool, args, c.name, r.Error, r.Result)
	}
	out, _ := r.Result["structuredContent"].(map[string]any)
	return out
}

// dataOf returns the data of the events of an events_recent output, or
// of an events://<topic> read, as JSON texts.
func dataOf(out map[string]any) []string {
	evs, _ := out["events"].([]any)
	res := []string{}
	for _, e := range evs {
		m, _ := e.(map[string]any)
		b, _ := json.Marshal(m["data"])
		res = append(res, string(b))
	}
	return res
}

// TestAccessTopics: the topics named by event types with access rules,
// on both stores and in both eras, through the core paths: the 2025 GET
// stream of a session subscribed to events://<topic> and the 2026 listen
// stream deliver each tenant only its own team's incidents and the
// audit topic only to team a; events_recent, events_wait, events://
// reads, resources/list and topics_list show each caller only that, and
// answer a topic it may not read as they answer an unknown topic.
func TestAccessTopics(t *testing.T) {
	for _, hs := range clockedStores(t, time.Now) {
		t.Run(hs.name, func(t *testing.T) {
			st := hs.open(t)
			url := topicServer(t, st)
			var items []string
			for _, era := range []string{"2025", "2026"} {
				sfx := "-" + hs.name + "-" + era
				items = append(items,
					`{"name":"incident.`+era+`","topic":"inc`+sfx+`","access":{"scopes":["incidents:read"],"bind":{"team":"team"}}}`,
					`{"name":"audit.`+era+`","topic":"aud`+sfx+`","access":{"claims":{"team":["a"]}}}`)
			}
			ingestRaw(t, st, "types-"+hs.name, `{"type":"registry","registry":"events","op":"put","items":[`+strings.Join(items, ",")+`]}`)
			waitListed(t, newCaller(t, url, "alice", "2026"), "audit.2026")
			for _, era := range []string{"2025", "2026"} {
				t.Run(era, func(t *testing.T) {
					ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
					defer cancel()
					sfx := "-" + hs.name + "-" + era
					inc, aud, end := "inc"+sfx, "aud"+sfx, "end"+sfx
					alice, bob, carol := newCaller(t, url, "alice", era), newCaller(t, url, "bob", era), newCaller(t, url, "carol", era)
					uris := []string{"events://" + inc, "events://" + aud, "events://" + end}
					streams := map[*caller]<-chan map[string]any{}
					for _, c := range []*caller{alice, bob, carol} {
						streams[c] = topicStream(t, ctx, c, uris)
					}
					time.Sleep(100 * time.Millisecond) // the streams read their logs once
					publish(t, st, inc, "i1"+sfx, map[string]any{"team": "a", "n": 1})
					publish(t, st, inc, "i2"+sfx, map[string]any{"team": "b", "n": 2})
					publish(t, st, aud, "a1"+sfx, map[string]any{"n": 3})
					publish(t, st, end, "e1"+sfx, map[string]any{"end": true})
					// The 2025 GET stream carries each event (notifications/message after
					// its updated); the 2026 listen stream only the updated, which tells
					// a caller that may read some of the topic that it changed.
					want := map[*caller][]string{
						alice: {"updated " + inc, "message " + inc + ` {"n":1,"team":"a"}`, "updated " + aud, "message " + aud + ` {"n":3}`},
						bob:   {"updated " + inc, "message " + inc + ` {"n":2,"team":"b"}`},
						carol: {"updated " + aud, "message " + aud + ` {"n":3}`},
					}
					if era == "2026" {
						want = map[*caller][]string{
							alice: {"updated " + inc, "updated " + inc, "updated " + aud},
							bob:   {"updated " + inc, "updated " + inc},
							carol: {"updated " + aud},
						}
					}
					for c, want := range want {
						if diff := cmp.Diff(want, topicMessages(t, streams[c], end)); diff != "" {
							t.Errorf("stream of %s (-want +got):\n%s", c.name, diff)
						}
					}

					unknown := toolOutput(t, bob, "events_recent", `{"topic":"no-such-topic"}`)
					for _, tc := range []struct {
						c     *caller
						topic string
						want  []string
					}{
						{alice, inc, []string{`{"n":1,"team":"a"}`}},
						{bob, inc, []string{`{"n":2,"team":"b"}`}},
						{carol, inc, nil},
						{alice, aud, []string{`{"n":3}`}},
						{bob, aud, nil},
					} {
						out := toolOutput(t, tc.c, "events_recent", `{"topic":"`+tc.topic+`"}`)
						if got := dataOf(out); !slices.Equal(got, append([]string{}, tc.want...)) {
							t.Errorf("events_recent %s as %s: %v, want %v", tc.topic, tc.c.name, got, tc.want)
						}
						if tc.want == nil {
							out["topic"] = unknown["topic"]
							if diff := cmp.Diff(unknown, out); diff != "" {
								t.Errorf("events_recent %s as %s differs from an unknown topic's (-unknown +got):\n%s", tc.topic, tc.c.name, diff)
							}
						}
						r := tc.c.call("resources/read", `"uri":"events://`+tc.topic+`"`)
						contents, _ := r.Result["contents"].([]any)
						if r.Error != nil || len(contents) != 1 {
							t.Fatalf("resources/read %s as %s: %+v", tc.topic, tc.c.name, r)
						}
						var read map[string]any
						json.Unmarshal([]byte(fmt.Sprint(contents[0].(map[string]any)["text"])), &read)
						if got := dataOf(read); !slices.Equal(got, append([]string{}, tc.want...)) {
							t.Errorf("resources/read %s as %s: %v, want %v", tc.topic, tc.c.name, got, tc.want)
						}
					}
					for c, want := range map[*caller]bool{alice: true, bob: false, carol: true} {
						r := c.call("resources/list", "")
						listed := strings.Contains(fmt.Sprint(r.Result["resources"]), "events://"+aud)
						topics := strings.Contains(fmt.Sprint(toolOutput(t, c, "topics_list", `{}`)), "events://"+aud)
						if listed != want || topics != want {
							t.Errorf("as %s: events://%s in resources/list %v, in topics_list %v; want %v", c.name, aud, listed, topics, want)
						}
					}
					if out := toolOutput(t, bob, "events_wait", `{"topic":"`+aud+`","after":0,"timeoutSeconds":0.3}`); out["timedOut"] != true {
						t.Errorf("events_wait of %s as bob: %v, want a timeout", aud, out)
					}
					for c, want := range map[*caller]string{alice: `{"n":1,"team":"a"}`, bob: `{"n":2,"team":"b"}`} {
						out := toolOutput(t, c, "events_wait", `{"topic":"`+inc+`","after":0,"timeoutSeconds":5}`)
						ev, _ := out["event"].(map[string]any)
						if b, _ := json.Marshal(ev["data"]); string(b) != want {
							t.Errorf("events_wait of %s as %s: %v, want %s", inc, c.name, out, want)
						}
					}
				})
			}
		})
	}
}

// listenBacking counts the listen backing sessions (an events/stream's)
// of the named callers in st (its principal as pkg/mcp's listenPrincipal
// derives it).
func listenBacking(t *testing.T, st mcp.Store, names ...string) int {
	t.Helper()
	n := 0
	for _, name := range names {
		sum := sha256.Sum256([]byte("https://issuer.example#" + name))
		c, err := st.CountSessions(context.Background(), "mcpush-listen:"+base64.RawURLEncoding.EncodeToString(sum[:]), 100)
		if err != nil {
			t.Fatal(err)
		}
		n += c
	}
	return n
}

// TestAccessAuthorizeHook: ServerOptions.Authorize sees the principal,
// the claims, the action and the object (and the registry rule) of each
// use, and its refusals are answered as the registry rules' are; a hook
// that calls RegistryAccess keeps the registry rules.
func TestAccessAuthorizeHook(t *testing.T) {
	st := clockedStores(t, time.Now)[0].open(t)
	var mu sync.Mutex
	seen := map[string]bool{}
	srv := mcp.NewServer(&mcp.Implementation{Name: "hook", Version: "1"}, st, &mcp.ServerOptions{
		DynamicRegistries: true, Events: true,
		StateKeys: [][]byte{[]byte("access-test-key-0123456789abcdef0123")},
		Authorize: func(ctx context.Context, r *mcp.AccessRequest) bool {
			obj := r.Tool
			if r.Event != nil {
				obj = r.Event.Name
			}
			mu.Lock()
			seen[fmt.Sprintf("%s %s %s team=%v rule=%v", r.Principal, r.Action, obj, r.Claims["team"], r.Rule != nil)] = true
			mu.Unlock()
			if r.Claims["team"] == "b" && (obj == "news" || obj == "open") {
				return false // the program's own rule
			}
			return mcp.RegistryAccess(ctx, r)
		},
	})
	srv.AddTool(&mcp.Tool{Name: "open", InputSchema: json.RawMessage(`{"type":"object"}`)}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}}, nil
	})
	h := mcp.NewStreamableHandler(srv, &mcp.StreamableOptions{LocalhostOnly: true, Authenticator: claimsAuth{}})
	ts := httptest.NewServer(h)
	defer func() { ts.Close(); h.Close() }()
	events, _ := accessTypes("-hook")
	if _, _, err := st.ApplyRegistry(context.Background(), notify.RegistryEvents, notify.OpPut, events, "hook"); err != nil {
		t.Fatal(err)
	}
	alice, bob := newCaller(t, ts.URL, "alice", "2026"), newCaller(t, ts.URL, "bob", "2026")
	if got := names(bob.call("events/list", ""), "events"); !slices.Equal(got, []string{"incident.created"}) {
		t.Errorf("events/list as bob: %v, want incident.created only (news refused by the hook, audit.a by its rule)", got)
	}
	if got := names(alice.call("events/list", ""), "events"); !slices.Equal(got, []string{"audit.a", "incident.created", "news"}) {
		t.Errorf("events/list as alice: %v", got)
	}
	unknown := refusal(bob.call("events/poll", `"name":"no.such.type","cursor":null`))
	if got := refusal(bob.call("events/poll", `"name":"news","cursor":null`)); got != unknown || !strings.HasPrefix(got, fmt.Sprint(mcp.CodeForbidden)) {
		t.Errorf("poll of news as bob: %s, want %s (Forbidden, as an unknown type)", got, unknown)
	}
	if r := bob.call("tools/call", `"name":"open","arguments":{}`); r.Error == nil || !strings.Contains(r.Error.Message, `unknown tool "open"`) {
		t.Errorf("tools/call of open as bob: %+v", r.Error)
	}
	if r := alice.call("tools/call", `"name":"open","arguments":{}`); r.Error != nil {
		t.Errorf("tools/call of open as alice: %+v", r.Error)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, want := range []string{
		"https://issuer.example#bob events/list news team=b rule=false",
		"https://issuer.example#bob events/list audit.a team=b rule=true",
		"https://issuer.example#bob events/poll news team=b rule=false",
		"https://issuer.example#bob tools/call open team=b rule=false",
		"https://issuer.example#alice tools/call open team=a rule=false",
	} {
		if !seen[want] {
			t.Errorf("the hook was not asked %q; it saw %v", want, slices.Sorted(maps.Keys(seen)))
		}
	}
}

// TestAccessTaskTool: a tool with an access rule run as a task (2026
// era, a client declaring tasks) runs with the claims the request was
// permitted on, recorded in the task: events_wait, restricted to team a,
// completes for alice with the event of a topic only team a may read,
// and bob's call is answered as an unknown tool, with no task stored.
func TestAccessTaskTool(t *testing.T) {
	st := clockedStores(t, time.Now)[0].open(t)
	url := topicServer(t, st)
	ingestRaw(t, st, "task-types", `{"type":"registry","registry":"events","op":"put","items":[{"name":"audit.task","topic":"aud-task","access":{"claims":{"team":["a"]}}}]}`)
	ingestRaw(t, st, "task-tools", `{"type":"registry","registry":"tools","op":"put","items":[{"name":"events_wait","access":{"claims":{"team":["a"]}}}]}`)
	publish(t, st, "aud-task", "aud-task-1", map[string]any{"n": 1})
	waitListed(t, newCaller(t, url, "alice", "2026"), "audit.task")
	args := `{"topic":"aud-task","after":0,"timeoutSeconds":5}`
	if r := taskCall(t, url, "bob", "tools/call", "events_wait", `"name":"events_wait","arguments":`+args, tasksCaps); r.Error == nil || !strings.Contains(r.Error.Message, `unknown tool "events_wait"`) {
		t.Errorf("events_wait as bob: %+v %+v, want an unknown tool", r.Error, r.Result)
	}
	if c, err := st.CountTasks(context.Background(), "https://issuer.example#bob", 10); err != nil || c.Live != 0 || c.Bytes != 0 {
		t.Errorf("bob's refused call stored a task: %+v, %v", c, err)
	}
	id := startTask(t, url, "alice", "events_wait", args)
	done := waitStatus(t, url, "alice", id, "completed")
	res, _ := done["result"].(map[string]any)
	sc, _ := res["structuredContent"].(map[string]any)
	if ev, _ := sc["event"].(map[string]any); fmt.Sprint(ev["data"]) != "map[n:1]" {
		t.Errorf("the task's result: %v, want the event", done)
	}
}
