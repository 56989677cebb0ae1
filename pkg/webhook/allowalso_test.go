package webhook

import (
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
)

// TestAllowAlso: an origin Policy.AllowAlso admits passes CheckURL and is
// delivered to (http, loopback) from the moment it answers true, while
// the Policy is in use; another port of the same host stays refused, and
// so does the origin once AllowAlso answers false again.
func TestAllowAlso(t *testing.T) {
	srv := newCounting(t, false, func(w http.ResponseWriter, r *http.Request) {})
	other := newCounting(t, false, func(w http.ResponseWriter, r *http.Request) {})
	var on atomic.Bool
	want := srv.origin(t)
	s := NewSender(Policy{AllowAlso: func(o Origin) bool { return on.Load() && o == want }})
	url := srv.URL + "/hook"
	if err := s.Policy().CheckURL(url); !errors.Is(err, ErrInvalidURL) {
		t.Fatalf("before: CheckURL = %v", err)
	}
	if o := send(s, url); o.OK() {
		t.Fatalf("before: Send = %+v", o)
	}
	on.Store(true)
	if err := s.Policy().CheckURL(url); err != nil {
		t.Fatalf("allowed: CheckURL = %v", err)
	}
	if o := send(s, url); !o.OK() {
		t.Fatalf("allowed: Send = %+v", o)
	}
	if err := s.Policy().CheckURL(other.URL + "/hook"); !errors.Is(err, ErrInvalidURL) {
		t.Errorf("another port: CheckURL = %v", err)
	}
	if o := send(s, strings.Replace(other.URL, "http:", "https:", 1)); o.Category != CategoryBlockedAddress {
		t.Errorf("another port over https: %+v", o)
	}
	on.Store(false)
	if o := send(s, url); o.OK() {
		t.Errorf("withdrawn: Send = %+v", o)
	}
	if n, m := srv.n.Load(), other.n.Load(); n != 1 || m != 0 {
		t.Errorf("requests: %d to the allowed origin (want 1), %d to the other (want 0)", n, m)
	}
}
