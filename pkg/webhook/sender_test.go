package webhook

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
)

// TestSendAllowedOrigin: a delivery to an allowed http://127.0.0.1:PORT
// origin arrives with every header, and verifies under the
// standard-webhooks Go library.
func TestSendAllowedOrigin(t *testing.T) {
	sec := newSecret(t, 32)
	var got http.Header
	var gotBody []byte
	srv := newCounting(t, false, func(w http.ResponseWriter, r *http.Request) {
		got = r.Header.Clone()
		gotBody, _ = io.ReadAll(r.Body)
		w.WriteHeader(http.StatusNoContent)
	})
	s := NewSender(Policy{Allow: []Origin{srv.origin(t)}})
	body, err := EventBody("evt_1", "order.created", time.Now(), json.RawMessage(`{"id":1}`), "c1")
	if err != nil {
		t.Fatal(err)
	}
	o := s.Send(context.Background(), Message{ID: "evt_1", SubscriptionID: "sub_1", URL: srv.URL + "/hook", Body: body, Secrets: []Secret{sec}})
	if !o.OK() || o.Status != http.StatusNoContent || o.Retry {
		t.Fatalf("Send: %+v", o)
	}
	for _, h := range []string{HeaderID, HeaderTimestamp, HeaderSignature, HeaderSubscriptionID} {
		if got.Get(h) == "" {
			t.Errorf("header %s missing", h)
		}
	}
	if got.Get("Content-Type") != "application/json" || got.Get(HeaderSubscriptionID) != "sub_1" || got.Get(HeaderID) != "evt_1" {
		t.Errorf("headers: %v", got)
	}
	wh, err := standardwebhooks.NewWebhook(sec.Reveal())
	if err != nil {
		t.Fatal(err)
	}
	if err := wh.Verify(gotBody, got); err != nil {
		t.Errorf("standard-webhooks Verify: %v", err)
	}
}

// tlsPolicy returns a Policy trusting srv's certificate.
func tlsPolicy(srv *counting) Policy {
	pool := x509.NewCertPool()
	pool.AddCert(srv.Certificate())
	return Policy{TLSConfig: &tls.Config{RootCAs: pool}}
}

// TestSendHTTPSByNameAllowed: an allowed https origin by name (resolved by
// the injected resolver to the loopback server) keeps the name in the Host
// header and TLS SNI: the httptest certificate is valid for example.com.
func TestSendHTTPSByNameAllowed(t *testing.T) {
	var host, sni string
	srv := newCounting(t, true, func(w http.ResponseWriter, r *http.Request) {
		host, sni = r.Host, r.TLS.ServerName
	})
	dns := &fakeDNS{}
	dns.set("example.com", "127.0.0.1")
	p := tlsPolicy(srv)
	p.Resolver = dns
	p.Allow = []Origin{{Scheme: "https", Host: "example.com", Port: srv.port()}}
	s := NewSender(p)
	u := "https://example.com:" + srv.port() + "/hook"
	o := s.Send(context.Background(), Message{ID: "evt_1", SubscriptionID: "sub_1", URL: u, Body: []byte(`{}`), Secrets: []Secret{newSecret(t, 24)}})
	if !o.OK() {
		t.Fatalf("Send: %+v", o)
	}
	if host != "example.com:"+srv.port() || sni != "example.com" {
		t.Errorf("Host %q, SNI %q", host, sni)
	}
}

// TestSendBlocked: without an allow entry the loopback server is refused
// at delivery time, literal or by name, without a request.
func TestSendBlocked(t *testing.T) {
	srv := newCounting(t, true, func(w http.ResponseWriter, r *http.Request) {})
	dns := &fakeDNS{}
	dns.set("rebind.example.com", "93.184.215.14")
	p := tlsPolicy(srv)
	p.Resolver = dns
	s := NewSender(p)
	u := "https://rebind.example.com:" + srv.port() + "/hook"
	if err := p.CheckResolved(context.Background(), u); err != nil {
		t.Fatalf("CheckResolved at subscribe time (public): %v", err)
	}
	dns.set("rebind.example.com", "127.0.0.1")
	o := s.Send(context.Background(), Message{ID: "evt_1", SubscriptionID: "sub_1", URL: u, Body: []byte(`{}`), Secrets: []Secret{newSecret(t, 24)}})
	if o.Category != CategoryBlockedAddress || o.Retry || !errors.Is(o.Err, ErrBlockedAddress) {
		t.Errorf("rebinding: %+v", o)
	}
	if WireCategory(o.Category) != CategoryConnectionRefused {
		t.Errorf("wire category %q", WireCategory(o.Category))
	}
	if n := srv.n.Load(); n != 0 {
		t.Errorf("%d requests reached the server", n)
	}
	if !strings.Contains(o.Err.Error(), "rebind.example.com") {
		t.Errorf("error does not name the host: %v", o.Err)
	}
}

// send is a one-secret Send of a small body.
func send(s *Sender, url string) Outcome {
	sec, _ := ParseSecret("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	return s.Send(context.Background(), Message{ID: "evt_1", SubscriptionID: "sub_1", URL: url, Body: []byte(`{"eventId":"evt_1"}`), Secrets: []Secret{sec}})
}

// TestSendRefusesSpecialAddresses: callback addresses that are not
// globally routable are refused at delivery time, whether the URL names
// them literally or a host name resolves to them, and no request reaches
// the (loopback) server. Each is a Retry false, blocked_address outcome.
func TestSendRefusesSpecialAddresses(t *testing.T) {
	srv := newCounting(t, true, func(w http.ResponseWriter, r *http.Request) {})
	dns := &fakeDNS{}
	p := tlsPolicy(srv)
	p.Resolver = dns
	s := NewSender(p)
	port := srv.port()
	for _, ip := range []string{
		"127.0.0.1", "10.0.0.1", "172.16.5.4", "192.168.1.20", "169.254.169.254", "100.64.1.1", "0.0.0.0",
		"::1", "fe80::1", "fd00::1", "::ffff:127.0.0.1", "::ffff:169.254.169.254", "64:ff9b::7f00:1", "::",
	} {
		a := netip.MustParseAddr(ip)
		lit := a.String()
		if a.Is6() {
			lit = "[" + lit + "]"
		}
		name := "h" + strings.NewReplacer(".", "-", ":", "-").Replace(ip) + ".example.com"
		dns.set(name, ip)
		for _, u := range []string{"https://" + lit + ":" + port + "/hook", "https://" + name + ":" + port + "/hook"} {
			o := send(s, u)
			if o.Category != CategoryBlockedAddress || o.Retry || !errors.Is(o.Err, ErrBlockedAddress) {
				t.Errorf("%s: %+v", u, o)
			}
		}
	}
	// A name with several addresses, all of them blocked, is refused.
	dns.set("mixed.example.com", "127.0.0.1", "10.0.0.1")
	if o := send(s, "https://mixed.example.com:"+port+"/"); o.Category != CategoryBlockedAddress {
		t.Errorf("mixed private: %+v", o)
	}
	if n := srv.n.Load(); n != 0 {
		t.Errorf("%d requests reached the server", n)
	}
}

// TestSendNoRedirect: a 302 to another server is not followed: the
// outcome is a failure (http_3xx, on the wire http_4xx) and the target
// gets no request.
func TestSendNoRedirect(t *testing.T) {
	target := newCounting(t, false, func(w http.ResponseWriter, r *http.Request) {})
	from := newCounting(t, false, func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, target.URL+"/stolen", http.StatusFound)
	})
	s := NewSender(Policy{Allow: []Origin{from.origin(t), target.origin(t)}})
	o := send(s, from.URL+"/hook")
	if o.OK() || o.Status != http.StatusFound || o.Category != CategoryRedirect || WireCategory(o.Category) != CategoryHTTP4xx {
		t.Errorf("redirect: %+v", o)
	}
	if n := target.n.Load(); n != 0 {
		t.Errorf("the redirect was followed: %d requests", n)
	}
}

// TestSendStatuses: 410 and 413 are not retried, other 4xx and 5xx are.
func TestSendStatuses(t *testing.T) {
	for _, tt := range []struct {
		status   int
		category string
		retry    bool
	}{
		{200, "", false}, {202, "", false}, {204, "", false},
		{410, CategoryHTTP4xx, false}, {413, CategoryHTTP4xx, false},
		{400, CategoryHTTP4xx, true}, {401, CategoryHTTP4xx, true}, {425, CategoryHTTP4xx, true}, {429, CategoryHTTP4xx, true},
		{500, CategoryHTTP5xx, true}, {502, CategoryHTTP5xx, true}, {503, CategoryHTTP5xx, true},
		{307, CategoryRedirect, true},
	} {
		srv := newCounting(t, false, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Location", "http://127.0.0.1:1/")
			w.WriteHeader(tt.status)
			w.Write([]byte(strings.Repeat("x", 100<<10))) // more than is read
		})
		o := send(NewSender(Policy{Allow: []Origin{srv.origin(t)}}), srv.URL)
		if o.Status != tt.status || o.Category != tt.category || o.Retry != tt.retry {
			t.Errorf("%d: %+v", tt.status, o)
		}
		if o.OK() != (tt.category == "") {
			t.Errorf("%d: OK() = %v", tt.status, o.OK())
		}
	}
}

// TestSendTimeout: an endpoint slower than Policy.Timeout is a timeout,
// retried.
func TestSendTimeout(t *testing.T) {
	release := make(chan struct{})
	srv := newCounting(t, false, func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	})
	defer close(release)
	start := time.Now()
	o := send(NewSender(Policy{Allow: []Origin{srv.origin(t)}, Timeout: 200 * time.Millisecond}), srv.URL)
	if o.Category != CategoryTimeout || !o.Retry || o.Status != 0 {
		t.Errorf("timeout: %+v", o)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("took %v with a 200 ms timeout", d)
	}
}

// TestSendConnectionRefused: nothing listening is connection_refused,
// retried.
func TestSendConnectionRefused(t *testing.T) {
	srv := newCounting(t, false, func(w http.ResponseWriter, r *http.Request) {})
	o0 := srv.origin(t)
	u := srv.URL
	srv.Close()
	o := send(NewSender(Policy{Allow: []Origin{o0}}), u)
	if o.Category != CategoryConnectionRefused || !o.Retry {
		t.Errorf("refused: %+v", o)
	}
}

// TestSendTLSError: an endpoint whose certificate is not trusted is a
// tls_error.
func TestSendTLSError(t *testing.T) {
	srv := newCounting(t, true, func(w http.ResponseWriter, r *http.Request) {})
	o := send(NewSender(Policy{Allow: []Origin{srv.origin(t)}}), srv.URL) // system roots only
	if o.Category != CategoryTLS || !o.Retry {
		t.Errorf("TLS: %+v", o)
	}
}

// TestSendBodyTooLarge: a 300 KiB body is not sent; 256 KiB is.
func TestSendBodyTooLarge(t *testing.T) {
	srv := newCounting(t, false, func(w http.ResponseWriter, r *http.Request) { io.Copy(io.Discard, r.Body) })
	s := NewSender(Policy{Allow: []Origin{srv.origin(t)}})
	sec := newSecret(t, 32)
	big := []byte(`"` + strings.Repeat("x", 300<<10) + `"`)
	o := s.Send(context.Background(), Message{ID: "evt_big", SubscriptionID: "sub_1", URL: srv.URL, Body: big, Secrets: []Secret{sec}})
	if o.Category != CategoryBodyTooLarge || o.Retry || !errors.Is(o.Err, ErrBodyTooLarge) || WireCategory(o.Category) != CategoryHTTP4xx {
		t.Errorf("300 KiB: %+v", o)
	}
	if n := srv.n.Load(); n != 0 {
		t.Errorf("%d requests reached the server", n)
	}
	ok := []byte(`"` + strings.Repeat("x", DefaultMaxBody-2) + `"`)
	if o := s.Send(context.Background(), Message{ID: "evt_ok", SubscriptionID: "sub_1", URL: srv.URL, Body: ok, Secrets: []Secret{sec}}); !o.OK() {
		t.Errorf("256 KiB: %+v", o)
	}
}

// TestSendAllowIsExact: an allowed http://127.0.0.1:PORT works; the same
// host on another port, or over https, is refused before any request.
func TestSendAllowIsExact(t *testing.T) {
	allowedSrv := newCounting(t, false, func(w http.ResponseWriter, r *http.Request) {})
	other := newCounting(t, false, func(w http.ResponseWriter, r *http.Request) {})
	s := NewSender(Policy{Allow: []Origin{allowedSrv.origin(t)}})
	if o := send(s, allowedSrv.URL+"/hook"); !o.OK() {
		t.Fatalf("allowed origin: %+v", o)
	}
	if o := send(s, other.URL+"/hook"); o.OK() || o.Retry || !errors.Is(o.Err, ErrInvalidURL) {
		t.Errorf("another port over http: %+v", o)
	}
	if o := send(s, strings.Replace(other.URL, "http:", "https:", 1)); o.Category != CategoryBlockedAddress {
		t.Errorf("another port over https: %+v", o)
	}
	if n := other.n.Load(); n != 0 {
		t.Errorf("%d requests reached the other port", n)
	}
}

// TestSendInvalidMessage: no secret, no id, or a header value with a line
// break or beyond ASCII is refused before any request.
func TestSendInvalidMessage(t *testing.T) {
	srv := newCounting(t, false, func(w http.ResponseWriter, r *http.Request) {})
	s := NewSender(Policy{Allow: []Origin{srv.origin(t)}})
	sec := newSecret(t, 32)
	for name, m := range map[string]Message{
		"no secret":    {ID: "e", SubscriptionID: "s", URL: srv.URL, Body: []byte(`{}`)},
		"zero secret":  {ID: "e", SubscriptionID: "s", URL: srv.URL, Body: []byte(`{}`), Secrets: []Secret{{}}},
		"no id":        {SubscriptionID: "s", URL: srv.URL, Body: []byte(`{}`), Secrets: []Secret{sec}},
		"crlf id":      {ID: "e\r\nX-Evil: 1", SubscriptionID: "s", URL: srv.URL, Body: []byte(`{}`), Secrets: []Secret{sec}},
		"no sub":       {ID: "e", URL: srv.URL, Body: []byte(`{}`), Secrets: []Secret{sec}},
		"non-ASCII id": {ID: "evt_ü", SubscriptionID: "s", URL: srv.URL, Body: []byte(`{}`), Secrets: []Secret{sec}},
	} {
		o := s.Send(context.Background(), m)
		if o.Category != CategoryInvalidMessage || o.Retry || !errors.Is(o.Err, ErrInvalidMessage) {
			t.Errorf("%s: %+v", name, o)
		}
	}
	if n := srv.n.Load(); n != 0 {
		t.Errorf("%d requests", n)
	}
}

// TestSendFreshSignature: each attempt has its own timestamp and
// signature (a retry is never stale).
func TestSendFreshSignature(t *testing.T) {
	var stamps, sigs []string
	srv := newCounting(t, false, func(w http.ResponseWriter, r *http.Request) {
		stamps = append(stamps, r.Header.Get(HeaderTimestamp))
		sigs = append(sigs, r.Header.Get(HeaderSignature))
	})
	now := time.Unix(1_800_000_000, 0)
	s := NewSender(Policy{Allow: []Origin{srv.origin(t)}, Now: func() time.Time { return now }})
	send(s, srv.URL)
	now = now.Add(90 * time.Second)
	send(s, srv.URL)
	if d := cmp.Diff([]string{"1800000000", "1800000090"}, stamps); d != "" {
		t.Errorf("timestamps (-want +got):\n%s", d)
	}
	if len(sigs) != 2 || sigs[0] == sigs[1] {
		t.Errorf("signatures: %q", sigs)
	}
}

// TestVerify: the handshake succeeds on the echo, and fails with
// challenge_failed on a wrong echo, a missing one or an oversized body,
// and with http_4xx/http_5xx on those statuses; it is never retried.
func TestVerify(t *testing.T) {
	sec := newSecret(t, 32)
	var bodies [][]byte
	var ids []string
	answer := func(w http.ResponseWriter, r *http.Request, f func(challenge string)) {
		b, _ := io.ReadAll(r.Body)
		bodies = append(bodies, b)
		ids = append(ids, r.Header.Get(HeaderID))
		var c Control
		json.Unmarshal(b, &c)
		f(c.Challenge)
	}
	cases := []struct {
		name     string
		h        func(w http.ResponseWriter, challenge string)
		status   int
		category string
	}{
		{"echo", func(w http.ResponseWriter, c string) { json.NewEncoder(w).Encode(map[string]string{"challenge": c}) }, 200, ""},
		{"wrong echo", func(w http.ResponseWriter, c string) {
			json.NewEncoder(w).Encode(map[string]string{"challenge": c + "x"})
		}, 200, CategoryChallengeFailed},
		{"empty body", func(w http.ResponseWriter, c string) {}, 200, CategoryChallengeFailed},
		{"not JSON", func(w http.ResponseWriter, c string) { w.Write([]byte(c)) }, 200, CategoryChallengeFailed},
		{"oversized", func(w http.ResponseWriter, c string) {
			w.Write([]byte(`{"challenge":"` + c + `","pad":"` + strings.Repeat("x", 5000) + `"}`))
		}, 200, CategoryChallengeFailed},
		{"404", func(w http.ResponseWriter, c string) { w.WriteHeader(404) }, 404, CategoryHTTP4xx},
		{"503 with the echo", func(w http.ResponseWriter, c string) {
			w.WriteHeader(503)
			json.NewEncoder(w).Encode(map[string]string{"challenge": c})
		}, 503, CategoryHTTP5xx},
	}
	for _, tt := range cases {
		srv := newCounting(t, false, func(w http.ResponseWriter, r *http.Request) {
			answer(w, r, func(c string) { tt.h(w, c) })
		})
		o := NewSender(Policy{Allow: []Origin{srv.origin(t)}}).Verify(context.Background(), srv.URL+"/hook", "sub_1", []Secret{sec})
		if o.Status != tt.status || o.Category != tt.category || o.Retry {
			t.Errorf("%s: %+v", tt.name, o)
		}
	}
	// Every verification POST: a fresh id and nonce, the envelope's shape.
	seen := map[string]bool{}
	for i, b := range bodies {
		var c map[string]any
		if err := json.Unmarshal(b, &c); err != nil || c["type"] != "verification" || len(c) != 2 {
			t.Errorf("body %s", b)
		}
		ch, _ := c["challenge"].(string)
		if len(ch) < 32 || seen[ch] || seen[ids[i]] || !strings.HasPrefix(ids[i], "msg_verification_") {
			t.Errorf("challenge %q id %q", ch, ids[i])
		}
		seen[ch], seen[ids[i]] = true, true
	}
}

// TestDualSigning: a message signed with two secrets (a rotation) verifies
// under either with the standard-webhooks library, and under neither
// with a third.
func TestDualSigning(t *testing.T) {
	oldS, newS, other := newSecret(t, 32), newSecret(t, 48), newSecret(t, 32)
	var hdr http.Header
	var body []byte
	srv := newCounting(t, false, func(w http.ResponseWriter, r *http.Request) {
		hdr = r.Header.Clone()
		body, _ = io.ReadAll(r.Body)
	})
	s := NewSender(Policy{Allow: []Origin{srv.origin(t)}})
	if o := s.Send(context.Background(), Message{ID: "evt_r", SubscriptionID: "sub_1", URL: srv.URL, Body: []byte(`{"x":1}`), Secrets: []Secret{newS, oldS}}); !o.OK() {
		t.Fatal(o)
	}
	if n := len(strings.Fields(hdr.Get(HeaderSignature))); n != 2 {
		t.Fatalf("%d signatures: %q", n, hdr.Get(HeaderSignature))
	}
	for name, sec := range map[string]Secret{"new": newS, "old": oldS} {
		wh, _ := standardwebhooks.NewWebhook(sec.Reveal())
		if err := wh.Verify(body, hdr); err != nil {
			t.Errorf("%s secret: %v", name, err)
		}
	}
	wh, _ := standardwebhooks.NewWebhook(other.Reveal())
	if err := wh.Verify(body, hdr); err == nil {
		t.Error("verified under an unrelated secret")
	}
}

// TestSendSystemResolver: with the default resolver, localhost (refused
// by name before resolving) and a zoned link-local literal are refused
// as blocked addresses, and the numeric
// spellings of 127.0.0.1 that some resolvers accept (2130706433, 0x7f.1,
// 127.1) are refused as invalid URLs; nothing reaches the server.
func TestSendSystemResolver(t *testing.T) {
	srv := newCounting(t, true, func(w http.ResponseWriter, r *http.Request) {})
	s := NewSender(tlsPolicy(srv))
	port := srv.port()
	for _, host := range []string{"localhost", "2130706433", "0x7f.1", "127.1", "[fe80::1%25lo]", "localhost."} {
		o := send(s, "https://"+host+":"+port+"/hook")
		if o.OK() || o.Category != CategoryBlockedAddress && o.Category != CategoryInvalidMessage && o.Category != CategoryConnectionRefused {
			t.Errorf("%s: %+v", host, o)
		}
	}
	if o := send(s, "https://localhost:"+port+"/hook"); o.Category != CategoryBlockedAddress {
		t.Errorf("localhost: %+v", o)
	}
	if n := srv.n.Load(); n != 0 {
		t.Errorf("%d requests reached the server", n)
	}
}

// TestSendConcurrent: one Sender used by 64 goroutines at once delivers
// every message exactly once to a Receiver (run with -race).
func TestSendConcurrent(t *testing.T) {
	rig := newReceiverRig(t, nil)
	rig.r.Dedup = 0
	s := NewSender(Policy{Allow: []Origin{(&counting{Server: rig.srv}).origin(t)}})
	var wg sync.WaitGroup
	errs := make(chan string, 64)
	for i := range 64 {
		wg.Go(func() {
			id := fmt.Sprintf("evt_%d", i)
			body, _ := EventBody(id, "x", time.Now(), json.RawMessage(`{}`), "")
			if o := s.Send(context.Background(), Message{ID: id, SubscriptionID: "sub_known", URL: rig.srv.URL, Body: body, Secrets: []Secret{rig.sec}}); !o.OK() {
				errs <- fmt.Sprintf("%s: %+v", id, o)
			}
		})
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	seen := map[string]int{}
	for _, d := range rig.handled {
		seen[d.WebhookID]++
	}
	if len(seen) != 64 || len(rig.handled) != 64 {
		t.Errorf("handled %d deliveries of %d ids", len(rig.handled), len(seen))
	}
}

// BenchmarkSend: one signed event POST to a loopback Receiver that
// verifies it (keep-alive connections), in parallel.
func BenchmarkSend(b *testing.B) {
	sec := newSecret(b, 32)
	recv := &Receiver{Secrets: func(string) []Secret { return []Secret{sec} }, Dedup: -1}
	srv := httptest.NewServer(recv)
	defer srv.Close()
	allow, _ := ParseAllow(srv.URL)
	s := NewSender(Policy{Allow: allow})
	body, _ := EventBody("evt_1", "order.created", time.Now(), json.RawMessage(`{"orderId":"o-1","total":42}`), "c")
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if o := s.Send(context.Background(), Message{ID: "evt_1", SubscriptionID: "sub_1", URL: srv.URL, Body: body, Secrets: []Secret{sec}}); !o.OK() {
				b.Error(o)
				return
			}
		}
	})
}

// TestSendAcceptedDespiteBody: a 2xx is an accepted delivery even when the
// response body then stalls past the timeout (not a retry that would
// deliver the event twice); Verify, which needs the body, fails.
func TestSendAcceptedDespiteBody(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	srv := newCounting(t, false, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "100")
		w.WriteHeader(http.StatusOK)
		w.Write([]byte(`{"challenge":`))
		w.(http.Flusher).Flush()
		select {
		case <-r.Context().Done():
		case <-release:
		}
	})
	s := NewSender(Policy{Allow: []Origin{srv.origin(t)}, Timeout: 300 * time.Millisecond})
	if o := send(s, srv.URL); !o.OK() || o.Status != 200 {
		t.Errorf("Send: %+v", o)
	}
	if o := s.Verify(context.Background(), srv.URL, "sub_1", []Secret{newSecret(t, 32)}); o.OK() || o.Category != CategoryTimeout || o.Retry {
		t.Errorf("Verify: %+v", o)
	}
	s.CloseIdleConnections()
}
