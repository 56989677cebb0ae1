package mcp_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcpush/mcpush/pkg/envconfig"
	"github.com/mcpush/mcpush/pkg/mcp"
	"github.com/mcpush/mcpush/pkg/notify"
	"github.com/mcpush/mcpush/pkg/notify/sqlitestore"
	"github.com/mcpush/mcpush/pkg/webhook"
)

// TestEventsErrorsCode: EventsErrors.Code maps each of SEP-3415's five
// Events codes to ChatGPT's, and nothing else; the default (and an
// unknown value) keeps SEP-3415's; envconfig spells the dialects as this
// package does.
func TestEventsErrorsCode(t *testing.T) {
	sep := []int{mcp.CodeNotFound, mcp.CodeForbidden, mcp.CodeResourceExhausted, mcp.CodeUnsupported, mcp.CodeCallbackEndpointError}
	chatgpt := []int{-32011, -32012, -32013, -32014, -32015}
	for i, c := range sep {
		if got := mcp.EventsErrorsChatGPT.Code(c); got != chatgpt[i] {
			t.Errorf("chatgpt Code(%d) = %d, want %d", c, got, chatgpt[i])
		}
		for _, d := range []mcp.EventsErrors{mcp.EventsErrorsSEP3415, "", "other"} {
			if got := d.Code(c); got != c {
				t.Errorf("%q Code(%d) = %d, want it unchanged", d, c, got)
			}
		}
	}
	for _, c := range []int{mcp.CodeInvalidParams, mcp.CodeMethodNotFound, mcp.CodeInternalError, mcp.CodeHeaderMismatch} {
		if got := mcp.EventsErrorsChatGPT.Code(c); got != c {
			t.Errorf("chatgpt Code(%d) = %d: not an Events code, want it unchanged", c, got)
		}
	}
	if envconfig.EventsErrorsSEP3415 != string(mcp.EventsErrorsSEP3415) || envconfig.EventsErrorsChatGPT != string(mcp.EventsErrorsChatGPT) {
		t.Error("envconfig's spellings of the dialects differ from mcp's")
	}
}

// TestEventsErrorsDialect: a server answers every Events error in the
// dialect of ServerOptions.EventsErrors, with the same message and data:
// NotFound, Unsupported (a type without the mode; webhook delivery off),
// Forbidden (an anonymous subscribe), CallbackEndpointError (a wrong
// challenge echo) and ResourceExhausted (over MaxPerPrincipal).
func TestEventsErrorsDialect(t *testing.T) {
	good := httptest.NewServer(&webhook.Receiver{
		Secrets: func(string) []webhook.Secret { s, _ := webhook.ParseSecret(dialectSecret); return []webhook.Secret{s} },
		Handle:  func(webhook.Delivery) error { return nil },
	})
	defer good.Close()
	liar := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(`{"challenge":"not-the-one"}`))
	}))
	defer liar.Close()
	allow, err := webhook.ParseAllow(good.URL + "," + liar.URL)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		dialect mcp.EventsErrors
		codes   map[string]int
	}{
		{"", map[string]int{"NotFound": -32023, "Forbidden": -32024, "ResourceExhausted": -32025, "Unsupported": -32026, "CallbackEndpointError": -32027}},
		{mcp.EventsErrorsSEP3415, map[string]int{"NotFound": -32023, "Forbidden": -32024, "ResourceExhausted": -32025, "Unsupported": -32026, "CallbackEndpointError": -32027}},
		{mcp.EventsErrorsChatGPT, map[string]int{"NotFound": -32011, "Forbidden": -32012, "ResourceExhausted": -32013, "Unsupported": -32014, "CallbackEndpointError": -32015}},
	} {
		t.Run(string(tc.dialect), func(t *testing.T) {
			hooks := dialectServer(t, tc.dialect, &mcp.WebhookOptions{Sender: webhook.NewSender(webhook.Policy{Allow: allow}), MaxPerPrincipal: 1})
			plain := dialectServer(t, tc.dialect, nil)
			sub := func(url string) string {
				return `"name":"e","delivery":{"url":"` + url + `","secret":"` + dialectSecret + `"}`
			}
			if r := whCall(t, hooks, "alice", "events/subscribe", sub(good.URL)); r.Error != nil {
				t.Fatalf("the one subscription: %+v", r.Error)
			}
			for _, c := range []struct {
				name, url, principal, method, params, want, data string
			}{
				{"unknown type", hooks, "alice", "events/poll", `"name":"nope","cursor":null`, "NotFound", `{"kind":"event"}`},
				{"no such subscription", hooks, "alice", "events/unsubscribe", `"name":"e","delivery":{"url":"` + good.URL + `/other"}`, "NotFound", `{"kind":"subscription"}`},
				{"a type without poll", hooks, "alice", "events/poll", `"name":"hook","cursor":null`, "Unsupported", `{"feature":"deliveryMode","value":"poll"}`},
				{"webhook delivery off", plain, "alice", "events/subscribe", sub(good.URL), "Unsupported", `{"feature":"deliveryMode","value":"webhook"}`},
				{"anonymous", hooks, "", "events/subscribe", sub(good.URL), "Forbidden", `{"reason":"unauthenticated"}`},
				{"wrong challenge echo", hooks, "bob", "events/subscribe", sub(liar.URL), "CallbackEndpointError", `{"reason":"challenge_failed"}`},
				{"over MaxPerPrincipal", hooks, "alice", "events/subscribe", sub(good.URL + "/second"), "ResourceExhausted", `{"limit":"subscriptions","max":1}`},
			} {
				r := whCall(t, c.url, c.principal, c.method, c.params)
				if r.Error == nil || r.Error.Code != tc.codes[c.want] || !strings.HasPrefix(r.Error.Message, c.want+":") || string(r.Error.Data) != c.data {
					t.Errorf("%s: %+v, want %s %d with data %s", c.name, r.Error, c.want, tc.codes[c.want], c.data)
				}
			}
		})
	}
}

// dialectSecret is the receiver's secret in TestEventsErrorsDialect.
const dialectSecret = "whsec_MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY="

// dialectServer serves a server in dialect d with webhook delivery wh
// (nil: none) on a fresh SQLite store with the event types "e" (every
// mode) and "hook" (webhook only), authenticated by X-Principal.
func dialectServer(t *testing.T, d mcp.EventsErrors, wh *mcp.WebhookOptions) string {
	st, err := sqlitestore.New(filepath.Join(t.TempDir(), "dialect.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	items := map[string]json.RawMessage{}
	for _, it := range []notify.EventItem{{Name: "e", Topic: "t"}, {Name: "hook", Topic: "t", Delivery: []string{notify.DeliveryWebhook}}} {
		items[it.Name], _ = json.Marshal(it.WithDefaults())
	}
	if _, _, err := st.ApplyRegistry(context.Background(), notify.RegistryEvents, notify.OpPut, items, "m1"); err != nil {
		t.Fatal(err)
	}
	srv := mcp.NewServer(&mcp.Implementation{Name: "dialect", Version: "1"}, st, &mcp.ServerOptions{
		Logger:            slog.New(slog.NewTextHandler(io.Discard, nil)),
		DynamicRegistries: true, Events: true, EventsErrors: d, RegistryRefresh: 20 * time.Millisecond,
		StateKeys: [][]byte{[]byte("events-dialect-key-0123456789abcdef01")},
		Webhooks:  wh,
	})
	h := mcp.NewStreamableHandler(srv, &mcp.StreamableOptions{LocalhostOnly: true, Authenticator: headerPrincipal{}})
	ts := httptest.NewServer(h)
	t.Cleanup(func() { ts.Close(); h.Close() })
	return ts.URL
}

// TestWebhookNotFoundCode: the webhook package's copy of the NotFound
// code (for the ingest's terminated envelope, which cannot link this
// package) is EventsErrors.Code's, in every dialect.
func TestWebhookNotFoundCode(t *testing.T) {
	for _, d := range []mcp.EventsErrors{"", mcp.EventsErrorsSEP3415, mcp.EventsErrorsChatGPT} {
		if got, want := webhook.NotFoundCode(string(d)), d.Code(mcp.CodeNotFound); got != want {
			t.Errorf("webhook.NotFoundCode(%q) = %d, mcp says %d", d, got, want)
		}
		if got, want := webhook.ForbiddenCode(string(d)), d.Code(mcp.CodeForbidden); got != want {
			t.Errorf("webhook.ForbiddenCode(%q) = %d, mcp says %d", d, got, want)
		}
	}
}
