package webhook

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

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
	dns.set("rebind.example", "93.184.215.14")
	p := tlsPolicy(srv)
	p.Resolver = dns
	s := NewSender(p)
	u := "https://rebind.example:" + srv.port() + "/hook"
	if err := p.CheckResolved(context.Background(), u); err != nil {
		t.Fatalf("CheckResolved at subscribe time (public): %v", err)
	}
	dns.set("rebind.example", "127.0.0.1")
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
	if !strings.Contains(o.Err.Error(), "rebind.example") {
		t.Errorf("error does not name the host: %v", o.Err)
	}
}
