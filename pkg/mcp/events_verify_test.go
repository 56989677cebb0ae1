package mcp_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcpush/mcpush/pkg/mcp"
	"github.com/mcpush/mcpush/pkg/notify"
	"github.com/mcpush/mcpush/pkg/notify/storeconfig"
	"github.com/mcpush/mcpush/pkg/webhook"
)

// fakeResolver resolves the names of its map, and fails for others.
type fakeResolver map[string]string

func (r fakeResolver) LookupIPAddr(_ context.Context, host string) ([]net.IPAddr, error) {
	a, ok := r[host]
	if !ok {
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	return []net.IPAddr{{IP: net.ParseIP(a)}}, nil
}

// verifyRig is two server processes on one store (SQLite file or
// DynamoDB table) with a settable clock, webhook delivery allowed to one
// loopback receiver that answers every verification and counts them by
// path.
type verifyRig struct {
	urls  [2]string
	recv  *httptest.Server
	mu    sync.Mutex
	posts map[string]int // verification POSTs by path
	clock *atomic.Int64  // Unix nanoseconds: the servers' and the store's clock
	store storeconfig.Store
}

func (r *verifyRig) now() time.Time { return time.Unix(0, r.clock.Load()) }

func (r *verifyRig) verifications(path string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.posts[path]
}

func newVerifyRig(t *testing.T, hs heldStore, clock *atomic.Int64, max, destRate int) *verifyRig {
	r := &verifyRig{posts: map[string]int{}, clock: clock}
	secret, _ := webhook.ParseSecret(dialectSecret)
	recv := &webhook.Receiver{Secrets: func(string) []webhook.Secret { return []webhook.Secret{secret} }, Handle: func(webhook.Delivery) error { return nil }}
	r.recv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Method == http.MethodGet && req.URL.Path == webhook.WellKnownReceiverPath {
			w.Write([]byte(`{"receivers":["/published/"]}`))
			return
		}
		b, _ := io.ReadAll(req.Body)
		if strings.Contains(string(b), `"type":"verification"`) {
			r.mu.Lock()
			r.posts[req.URL.Path]++
			r.mu.Unlock()
		}
		req.Body = io.NopCloser(strings.NewReader(string(b)))
		recv.ServeHTTP(w, req)
	}))
	t.Cleanup(r.recv.Close)
	allow, err := webhook.ParseAllow(r.recv.URL)
	if err != nil {
		t.Fatal(err)
	}
	for i := range r.urls {
		st := hs.open(t)
		if i == 0 {
			r.store = st
			items := map[string]json.RawMessage{}
			e := notify.EventItem{Name: "e", Topic: "verify-" + hs.name, InputSchema: json.RawMessage(`{"type":"object","properties":{"n":{"type":"integer"}}}`)}
			items[e.Name], _ = json.Marshal(e.WithDefaults())
			if _, _, err := st.ApplyRegistry(context.Background(), notify.RegistryEvents, notify.OpPut, items, "verify-"+hs.name); err != nil {
				t.Fatal(err)
			}
		}
		policy := webhook.Policy{Allow: allow, Resolver: fakeResolver{"loopback.example": "127.0.0.1", "private.example": "10.0.0.7", "metadata.example": "169.254.169.254"}}
		srv := mcp.NewServer(&mcp.Implementation{Name: "verify", Version: "1"}, st, &mcp.ServerOptions{
			Logger:            slog.New(slog.NewTextHandler(io.Discard, nil)),
			DynamicRegistries: true, Events: true, Now: r.now, RegistryRefresh: 20 * time.Millisecond,
			StateKeys: [][]byte{[]byte("events-verify-key-0123456789abcdef0123")},
			Webhooks:  &mcp.WebhookOptions{Sender: webhook.NewSender(policy), MaxPerPrincipal: max, VerifyDestinationRate: destRate},
		})
		h := mcp.NewStreamableHandler(srv, &mcp.StreamableOptions{LocalhostOnly: true, Authenticator: headerPrincipal{}})
		ts := httptest.NewServer(h)
		t.Cleanup(func() { ts.Close(); h.Close() })
		r.urls[i] = ts.URL
	}
	return r
}

// subscribe makes principal's events/subscribe of "e" with arguments
// {"n": n} to callback, on process i.
func (r *verifyRig) subscribe(t *testing.T, i int, principal, callback string, n int) *rpcReply {
	t.Helper()
	return whCall(t, r.urls[i], principal, "events/subscribe", fmt.Sprintf(`"name":"e","arguments":{"n":%d},"delivery":{"url":%q,"secret":%q}`, n, callback, dialectSecret))
}

func (r *verifyRig) unsubscribe(t *testing.T, i int, principal, callback string, n int) {
	t.Helper()
	if res := whCall(t, r.urls[i], principal, "events/unsubscribe", fmt.Sprintf(`"name":"e","arguments":{"n":%d},"delivery":{"url":%q}`, n, callback)); res.Error != nil {
		t.Fatalf("unsubscribe: %+v", res.Error)
	}
}

// TestWebhookVerificationBounds: the verification POSTs of
// events/subscribe are bounded before they are made, on both stores and
// across two processes:
//   - a principal at its subscription bound is refused (ResourceExhausted)
//     with no POST to the new callback (before, the callback was POSTed to
//     and the subscription refused after);
//   - a callback whose name resolves only to loopback, private or
//     metadata addresses is -32602, and one that does not resolve -32027
//     connection_refused, at subscribe time, with no POST and nothing
//     stored;
//   - one origin gets at most VerifyDestinationRate POSTs a minute from
//     all principals and processes together (ResourceExhausted, data.limit
//     "destinationVerifications"), and more the next minute;
//   - a callback that its origin's /.well-known/mcp-webhook-receiver.json
//     covers is verified without a POST;
//   - a verified (principal, url, secret) is not POSTed to again for VerifiedTTL:
//     not for other arguments, nor after an unsubscribe, from either
//     process; another principal's subscribe to it is; after 24 h it is
//     again.
func TestWebhookVerificationBounds(t *testing.T) {
	var clock atomic.Int64 // Unix nanoseconds
	for _, hs := range clockedStores(t, func() time.Time { return time.Unix(0, clock.Load()) }) {
		t.Run(hs.name, func(t *testing.T) {
			// A minute's start and 5 s: the rate windows turn only when
			// the test moves the clock.
			clock.Store(time.Now().Truncate(time.Minute).Add(5 * time.Second).UnixNano())
			r := newVerifyRig(t, hs, &clock, 2, 3)
			cb := func(path string) string { return r.recv.URL + path }

			// The bound before the POST.
			for i, path := range []string{"/a1", "/a2"} {
				if res := r.subscribe(t, i, "alice", cb(path), 1); res.Error != nil {
					t.Fatalf("alice's subscribe %s: %+v", path, res.Error)
				}
			}
			res := r.subscribe(t, 1, "alice", cb("/a3"), 1)
			if res.Error == nil || res.Error.Code != mcp.CodeResourceExhausted || !strings.Contains(string(res.Error.Data), `"limit":"subscriptions"`) {
				t.Errorf("alice's third subscribe: %+v, want ResourceExhausted subscriptions", res.Error)
			}
			if n := r.verifications("/a3"); n != 0 {
				t.Errorf("%d verification POSTs to the callback of a subscribe over the bound, want 0", n)
			}

			// Names resolved at subscribe time.
			for _, tc := range []struct {
				host string
				code int
				data string
			}{
				{"loopback.example", mcp.CodeInvalidParams, ""},
				{"private.example", mcp.CodeInvalidParams, ""},
				{"metadata.example", mcp.CodeInvalidParams, ""},
				{"nx.example", mcp.CodeCallbackEndpointError, `{"reason":"connection_refused"}`},
			} {
				res := r.subscribe(t, 0, "carol", "https://"+tc.host+"/hook", 1)
				if res.Error == nil || res.Error.Code != tc.code || (tc.data != "" && string(res.Error.Data) != tc.data) {
					t.Errorf("a callback on %s: %+v, want code %d %s", tc.host, res.Error, tc.code, tc.data)
				}
			}
			if n, err := r.store.CountWebhooks(context.Background(), "carol", 10); err != nil || n != 0 {
				t.Errorf("carol's subscriptions after refused callbacks: %d, %v", n, err)
			}

			// Per destination: 2 POSTs already this minute; one more, then
			// ResourceExhausted, from any principal and process.
			var refused, passed int
			for i := range 6 {
				res := r.subscribe(t, i%2, fmt.Sprintf("p%d", i), cb(fmt.Sprintf("/p%d", i)), 1)
				switch {
				case res.Error == nil:
					passed++
				case res.Error.Code == mcp.CodeResourceExhausted && string(res.Error.Data) == `{"limit":"destinationVerifications","max":3}`:
					refused++
				default:
					t.Fatalf("p%d's subscribe: %+v", i, res.Error)
				}
			}
			posts := 0
			for i := range 6 {
				posts += r.verifications(fmt.Sprintf("/p%d", i))
			}
			if passed != 1 || refused != 5 || posts != 1 {
				t.Errorf("6 principals' subscribes to one origin in a minute: %d passed, %d refused, %d POSTs; want 1, 5, 1", passed, refused, posts)
			}
			r.clock.Add(int64(time.Minute))
			if res := r.subscribe(t, 1, "p5", cb("/p5"), 1); res.Error != nil {
				t.Errorf("the next minute: %+v", res.Error)
			}

			// The verified pair: no second POST for 24 h.
			r.clock.Add(int64(time.Minute))
			before := r.verifications("/a1")
			if res := r.subscribe(t, 1, "alice", cb("/a1"), 2); res.Error == nil || res.Error.Code != mcp.CodeResourceExhausted {
				t.Fatalf("alice is at her bound: %+v", res.Error)
			}
			r.unsubscribe(t, 0, "alice", cb("/a2"), 1)
			r.unsubscribe(t, 1, "alice", cb("/a1"), 1)
			for i, n := range []int{2, 3} { // other arguments, the other process
				if res := r.subscribe(t, i, "alice", cb("/a1"), n); res.Error != nil {
					t.Fatalf("alice's subscribe of /a1 with n %d: %+v", n, res.Error)
				}
			}
			r.unsubscribe(t, 0, "alice", cb("/a1"), 3)
			if res := r.subscribe(t, 0, "alice", cb("/a1"), 3); res.Error != nil { // after an unsubscribe
				t.Fatalf("alice's resubscribe: %+v", res.Error)
			}
			if n := r.verifications("/a1"); n != before {
				t.Errorf("%d verification POSTs to a pair verified within 24 h, want none", n-before)
			}
			if res := r.subscribe(t, 1, "bob", cb("/a1"), 1); res.Error != nil {
				t.Fatalf("bob's subscribe: %+v", res.Error)
			}
			if n := r.verifications("/a1"); n != before+1 {
				t.Errorf("%d POSTs for another principal's subscribe, want 1", n-before)
			}
			// The origin's receiver document covers /published/: verified
			// with no POST (and cached like a handshake).
			if res := r.subscribe(t, 0, "dave", cb("/published/x"), 1); res.Error != nil {
				t.Fatalf("dave's subscribe under the receiver document: %+v", res.Error)
			}
			if n := r.verifications("/published/x"); n != 0 {
				t.Errorf("%d verification POSTs to a callback its origin's receiver document covers, want 0", n)
			}
			r.clock.Add(int64(mcp.VerifiedTTL)) // alice's subscriptions (1 h) lapsed too
			if res := r.subscribe(t, 0, "alice", cb("/a1"), 4); res.Error != nil {
				t.Fatalf("alice's subscribe a day later: %+v", res.Error)
			}
			if n := r.verifications("/a1"); n != before+2 {
				t.Errorf("%d POSTs after VerifiedTTL, want 1", n-before-1)
			}
		})
	}
}
