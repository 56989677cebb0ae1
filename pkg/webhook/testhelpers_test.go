package webhook

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
)

// newSecret returns a fresh random secret of n bytes.
func newSecret(t testing.TB, n int) Secret {
	t.Helper()
	b := make([]byte, n)
	rand.Read(b)
	s, err := ParseSecret(SecretPrefix + base64.StdEncoding.EncodeToString(b))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// counting is a real HTTP server on loopback that counts its requests
// and answers with h.
type counting struct {
	*httptest.Server
	n atomic.Int64
}

func newCounting(t *testing.T, tls bool, h http.HandlerFunc) *counting {
	t.Helper()
	c := &counting{}
	wrapped := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c.n.Add(1)
		h(w, r)
	})
	if tls {
		c.Server = httptest.NewTLSServer(wrapped)
	} else {
		c.Server = httptest.NewServer(wrapped)
	}
	t.Cleanup(c.Close)
	return c
}

// origin returns the server's origin as an allowed Origin.
func (c *counting) origin(t *testing.T) Origin {
	t.Helper()
	u, _ := url.Parse(c.URL)
	o, err := originOf(u)
	if err != nil {
		t.Fatal(err)
	}
	return o
}

// port returns the server's port.
func (c *counting) port() string {
	u, _ := url.Parse(c.URL)
	return u.Port()
}

// fakeDNS is a Resolver with a fixed answer per host, which a test can
// change between calls (DNS rebinding); it counts lookups.
type fakeDNS struct {
	mu      sync.Mutex
	answers map[string][]string
	lookups int
}

func (f *fakeDNS) set(host string, ips ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.answers == nil {
		f.answers = map[string][]string{}
	}
	f.answers[host] = ips
}

func (f *fakeDNS) LookupIPAddr(_ context.Context, host string) ([]net.IPAddr, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lookups++
	ips, ok := f.answers[host]
	if !ok {
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	out := make([]net.IPAddr, len(ips))
	for i, s := range ips {
		out[i] = net.IPAddr{IP: net.ParseIP(s)}
	}
	return out, nil
}
