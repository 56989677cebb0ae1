package webhook

import (
	"context"
	"net/http"
	"strings"
	"testing"
)

// TestReceiverDocument: a callback URL is covered when its origin's
// /.well-known/mcp-webhook-receiver.json lists a prefix of its path, and
// not when the document is missing, malformed, oversized, redirects, or
// lists only other prefixes, nor for a path with dot or empty segments;
// the document is fetched with a GET to the origin only (no query, no
// path of the callback), and a blocked address is never connected to.
func TestReceiverDocument(t *testing.T) {
	var doc, gotPath, gotMethod string
	status := http.StatusOK
	srv := newCounting(t, false, func(w http.ResponseWriter, r *http.Request) {
		gotMethod, gotPath = r.Method, r.URL.RequestURI()
		if status == http.StatusFound {
			http.Redirect(w, r, "/elsewhere", status)
			return
		}
		w.WriteHeader(status)
		w.Write([]byte(doc))
	})
	s := NewSender(Policy{Allow: []Origin{srv.origin(t)}})
	ctx := context.Background()
	for _, tc := range []struct {
		name, doc, path string
		status          int
		want            bool
	}{
		{"a listed prefix", `{"receivers":["/other/","/hooks/"]}`, "/hooks/abc?x=1", 200, true},
		{"the prefix itself", `{"receivers":["/hooks/"]}`, "/hooks/", 200, true},
		{"another path", `{"receivers":["/hooks/"]}`, "/admin", 200, false},
		{"dot segments", `{"receivers":["/hooks/"]}`, "/hooks/../admin", 200, false},
		{"encoded dot segments", `{"receivers":["/hooks/"]}`, "/hooks/%2e%2e/admin", 200, false},
		{"empty segment", `{"receivers":["/hooks/"]}`, "/hooks//x", 200, false},
		{"a prefix without a slash", `{"receivers":["hooks/"]}`, "/hooks/x", 200, false},
		{"not found", `{"receivers":["/hooks/"]}`, "/hooks/x", 404, false},
		{"a redirect", ``, "/hooks/x", 302, false},
		{"not JSON", `<html>`, "/hooks/x", 200, false},
		{"oversized", `{"receivers":["/hooks/"],"pad":"` + strings.Repeat("x", MaxReceiverDocument) + `"}`, "/hooks/x", 200, false},
		{"beyond the first 64 prefixes", `{"receivers":[` + strings.Repeat(`"/no/",`, MaxReceiverPrefixes) + `"/hooks/"]}`, "/hooks/x", 200, false},
	} {
		doc, status = tc.doc, tc.status
		got, err := s.ReceiverDocument(ctx, srv.URL+tc.path)
		if got != tc.want {
			t.Errorf("%s: covered %v (%v), want %v", tc.name, got, err, tc.want)
		}
		if got && (gotMethod != http.MethodGet || gotPath != WellKnownReceiverPath) {
			t.Errorf("%s: fetched %s %s", tc.name, gotMethod, gotPath)
		}
	}
	// A name resolving to loopback (not an allowed origin): no request.
	dns := &fakeDNS{}
	dns.set("evil.example", "127.0.0.1")
	before := srv.n.Load()
	blocked := NewSender(Policy{Resolver: dns})
	if got, err := blocked.ReceiverDocument(ctx, "https://evil.example:"+srv.port()+"/hooks/x"); got || err == nil {
		t.Errorf("a blocked address: covered %v, %v", got, err)
	}
	if n := srv.n.Load() - before; n != 0 {
		t.Errorf("%d requests reached a blocked address", n)
	}
}
