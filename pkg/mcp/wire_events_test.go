package mcp_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcpush/mcpush/pkg/mcp"
	"github.com/mcpush/mcpush/pkg/notify"
	"github.com/mcpush/mcpush/pkg/notify/delivery"
	"github.com/mcpush/mcpush/pkg/notify/ingest"
	"github.com/mcpush/mcpush/pkg/notify/sqlitestore"
	"github.com/mcpush/mcpush/pkg/webhook"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
)

// The servers of the golden exchanges of the Events extension and of the
// refusals (wireSetups), and the webhook receiver that records what a
// subscription's callback gets.

// wireKey is the state key of every exchange's server: it signs the
// cursors, which are therefore the same at every run.
const wireKey = "wire-test-key-0123456789abcdef0123"

// wireSecret is the webhook secret the exchanges subscribe with (the
// placeholder {{secret}}), 32 bytes.
var wireSecret = webhook.SecretPrefix + base64.StdEncoding.EncodeToString([]byte("wire-webhook-secret-0123456789ab"))

// wireStore is a fresh SQLite store.
func wireStore(t *testing.T) *sqlitestore.Store {
	t.Helper()
	st, err := sqlitestore.New(filepath.Join(t.TempDir(), "mcpush.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// wireServe serves a server on store over httptest and returns its URL.
func wireServe(t *testing.T, store mcp.Store, opts *mcp.ServerOptions, hopts *mcp.StreamableOptions) string {
	t.Helper()
	srv := mcp.NewServer(&mcp.Implementation{Name: "wire", Version: "1.0.0"}, store, opts)
	h := mcp.NewStreamableHandler(srv, hopts)
	ts := httptest.NewServer(h)
	t.Cleanup(func() { ts.Close(); h.Close() })
	return ts.URL
}

// wireEventsOptions serve the Events extension; the event types are the
// exchange's to publish (a registry message to the ingest).
func wireEventsOptions() *mcp.ServerOptions {
	return &mcp.ServerOptions{
		Logger:       slog.New(slog.DiscardHandler),
		PollInterval: 20 * time.Millisecond, RegistryRefresh: 20 * time.Millisecond,
		DynamicRegistries: true, Events: true,
		StateKeys: [][]byte{[]byte(wireKey)},
	}
}

// wireEvents is the server of 2026_events_poll: events/list and
// events/poll.
func wireEvents(t *testing.T) *wireEnv {
	st := wireStore(t)
	url := wireServe(t, st, wireEventsOptions(), &mcp.StreamableOptions{LocalhostOnly: true})
	return &wireEnv{url: url, ingest: ingest.New(st, nil)}
}

// wireEventStreams is the server of 2026_events_stream: its streams end
// 3 s after they open (MaxStreamDuration less StreamMargin), with the
// last heartbeat and the empty result.
func wireEventStreams(t *testing.T) *wireEnv {
	st := wireStore(t)
	url := wireServe(t, st, wireEventsOptions(), &mcp.StreamableOptions{LocalhostOnly: true,
		MaxStreamDuration: 3*time.Second + 100*time.Millisecond, StreamMargin: 100 * time.Millisecond})
	return &wireEnv{url: url, ingest: ingest.New(st, nil)}
}

// wireWebhooks is the server of 2026_events_webhook: webhook delivery
// for the principal of the X-Principal header, to a receiver on loopback
// (allowed by origin, {{hook}}); the ingest hands events off to a
// delivery engine that each ingest step drains.
func wireWebhooks(t *testing.T) *wireEnv {
	st := wireStore(t)
	secret, err := webhook.ParseSecret(wireSecret)
	if err != nil {
		t.Fatal(err)
	}
	hook := &wireHook{secret: wireSecret, recv: &webhook.Receiver{Secrets: func(string) []webhook.Secret { return []webhook.Secret{secret} }}}
	hs := httptest.NewServer(hook)
	t.Cleanup(hs.Close)
	allow, err := webhook.ParseAllow(hs.URL)
	if err != nil {
		t.Fatal(err)
	}
	sender := webhook.NewSender(webhook.Policy{Allow: allow})
	opts := wireEventsOptions()
	opts.Webhooks = &mcp.WebhookOptions{Sender: sender}
	url := wireServe(t, st, opts, &mcp.StreamableOptions{LocalhostOnly: true, Authenticator: headerPrincipal{}})
	sealer, err := notify.NewSealer([][]byte{[]byte(wireKey)}, notify.WebhookSealLabel)
	if err != nil {
		t.Fatal(err)
	}
	q := &drainQueue{}
	eng, err := delivery.New(delivery.Options{
		Store: st, Queue: q, Sender: sender, Sealer: sealer, CursorKey: []byte(wireKey),
		EventTypes: func(ctx context.Context) (map[string]*notify.EventItem, error) {
			reg, err := st.GetRegistry(ctx, notify.RegistryEvents)
			if err != nil {
				return nil, err
			}
			out := map[string]*notify.EventItem{}
			for name, raw := range reg.Items {
				if out[name], err = notify.DecodeEventItem(raw); err != nil {
					return nil, err
				}
			}
			return out, nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	return &wireEnv{
		url:    url,
		ingest: ingest.New(st, &ingest.Options{Delivery: q}),
		drain:  func(ctx context.Context) { q.drain(ctx, t, eng) },
		hook:   hook,
		vars:   map[string]string{"{{hook}}": hs.URL, "{{secret}}": wireSecret},
	}
}

// wireFaultStore is a store whose session reads fail, while down is set,
// as an unreachable DynamoDB's do.
type wireFaultStore struct {
	*sqlitestore.Store
	down *atomic.Bool
}

func (s wireFaultStore) GetSession(ctx context.Context, id string) (*notify.Session, error) {
	if s.down.Load() {
		return nil, fmt.Errorf("reading session %s: %w", id, notify.ErrUnavailable)
	}
	return s.Store.GetSession(ctx, id)
}

// wireRefusals is the server of refusals: bodies up to 1 KiB, one new
// session per principal per hour on a clock stopped at half past the
// hour (the 429's Retry-After is 1800), and a store with a switch.
func wireRefusals(t *testing.T) *wireEnv {
	st := wireStore(t)
	down := &atomic.Bool{}
	// The windows end after the real time too, which the store expires
	// counters by; a session lives an hour from the stopped clock, past
	// the real time too.
	stopped := time.Now().Truncate(time.Hour).Add(30 * time.Minute)
	opts := &mcp.ServerOptions{
		Logger:       slog.New(slog.DiscardHandler),
		PollInterval: 20 * time.Millisecond,
		StateKeys:    [][]byte{[]byte(wireKey)},
		Now:          func() time.Time { return stopped },
		Limits:       mcp.Limits{MaxSessionsPerHour: 1},
	}
	url := wireServe(t, wireFaultStore{Store: st, down: down}, opts, &mcp.StreamableOptions{LocalhostOnly: true, MaxBodyBytes: 1 << 10})
	return &wireEnv{url: url, ingest: ingest.New(st, nil), down: down}
}

// wireHook is a webhook receiver that records every request it gets,
// then answers it as a webhook.Receiver does (the verification's
// challenge echoed, a delivery 204, the GET of the well-known receiver
// document 405).
type wireHook struct {
	secret string
	recv   *webhook.Receiver

	mu  sync.Mutex
	got []wireHookPOST
}

// wireHookPOST is one request a wireHook got: a POST but for the GET of
// the well-known receiver document.
type wireHookPOST struct {
	method, path string
	header       http.Header
	body         []byte
}

func (h *wireHook) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	h.mu.Lock()
	h.got = append(h.got, wireHookPOST{method: r.Method, path: r.URL.Path, header: r.Header.Clone(), body: body})
	h.mu.Unlock()
	r.Body = io.NopCloser(bytes.NewReader(body))
	h.recv.ServeHTTP(w, r)
}

// take returns the requests got since the last take.
func (h *wireHook) take() []wireHookPOST {
	h.mu.Lock()
	defer h.mu.Unlock()
	got := h.got
	h.got = nil
	return got
}

// wireHookSkipped are the headers of a webhook POST that are the HTTP
// client's, not the sender's, and are not recorded.
var wireHookSkipped = []string{"Accept-Encoding", "Content-Length"}

var (
	wireControlID = regexp.MustCompile(`^msg_([a-z]+)_[A-Za-z0-9_-]+$`)
	wireChallenge = regexp.MustCompile(`("challenge":\s*)"[^"]*"`)
)

// webhooks checks and formats what the receiver got during step n: each
// POST's signature is verified (checkWebhookSignature); the signatures,
// the timestamp, the random part of a control envelope's webhook-id and
// the challenge are then replaced by placeholders, and the subscription
// id is learnt as {{subscription}}.
func (r *wireRun) webhooks(n string) string {
	var b strings.Builder
	for i, p := range r.env.hook.take() {
		verified := p.method == http.MethodPost
		if err := checkWebhookSignature(r.env.hook.secret, p); verified && err != nil {
			r.t.Errorf("webhook %s: request %d, %s %s: %v", n, i+1, p.method, p.path, err)
			verified = false
		}
		if id := p.header.Get(webhook.HeaderSubscriptionID); id != "" {
			r.vars["{{subscription}}"] = id
		}
		if i > 0 {
			b.WriteString("\n")
		}
		fmt.Fprintf(&b, "%s %s\n", p.method, p.path)
		keys := slices.Sorted(func(yield func(string) bool) {
			for k := range p.header {
				if !slices.Contains(wireHookSkipped, k) && !yield(k) {
					return
				}
			}
		})
		for _, k := range keys {
			for _, v := range p.header[k] {
				switch k {
				case http.CanonicalHeaderKey(webhook.HeaderSignature):
					if verified {
						var sigs []string
						for _, s := range strings.Fields(v) {
							version, _, _ := strings.Cut(s, ",")
							sigs = append(sigs, version+",{{signature}}")
						}
						v = strings.Join(sigs, " ")
					}
				case http.CanonicalHeaderKey(webhook.HeaderTimestamp):
					v = "{{unix}}"
				case http.CanonicalHeaderKey(webhook.HeaderID):
					v = wireControlID.ReplaceAllString(v, "msg_${1}_{{random}}")
				}
				fmt.Fprintf(&b, "%s: %s\n", k, v)
			}
		}
		if body := p.body; len(body) > 0 {
			var ind bytes.Buffer
			if json.Indent(&ind, body, "", "  ") == nil {
				body = ind.Bytes()
			}
			fmt.Fprintf(&b, "\n%s\n", wireChallenge.ReplaceAll(body, []byte(`$1"{{challenge}}"`)))
		}
	}
	if b.Len() == 0 {
		return ""
	}
	return r.normalise(b.String())
}

// checkWebhookSignature verifies a received POST with the standard-webhooks
// library, the verifier a receiver would use (signature over
// id.timestamp.body under the decoded whsec_ key; timestamp within its
// tolerance of now).
func checkWebhookSignature(secret string, p wireHookPOST) error {
	wh, err := standardwebhooks.NewWebhook(secret)
	if err != nil {
		return err
	}
	return wh.Verify(p.body, p.header)
}
