package delivery

import (
	"net/url"
	"sync"
)

// unhealthyAfter: an origin whose last this many attempts all failed gets
// one attempt in flight at a time until one succeeds.
const unhealthyAfter = 3

// origins bounds the attempts in flight per callback origin in one
// process: a slow, hanging or failing host takes at most PerOrigin
// workers, and one once it is failing. Safe for concurrent use.
type origins struct {
	per int
	mu  sync.Mutex
	m   map[string]*originState
}

type originState struct {
	inflight int
	failures int // consecutive failed attempts
}

func newOrigins(per int) *origins { return &origins{per: per, m: map[string]*originState{}} }

// slot is one task's place at its origin.
type slot struct {
	o   *origins
	key string
}

// acquire takes a place at rawURL's origin; false when the origin is at
// its limit.
func (o *origins) acquire(rawURL string) (*slot, bool) {
	key := originKey(rawURL)
	o.mu.Lock()
	defer o.mu.Unlock()
	st := o.m[key]
	if st == nil {
		st = &originState{}
		o.m[key] = st
	}
	limit := o.per
	if st.failures >= unhealthyAfter {
		limit = 1
	}
	if st.inflight >= limit {
		return nil, false
	}
	st.inflight++
	return &slot{o: o, key: key}, true
}

// done records an attempt's outcome at the slot's origin.
func (s *slot) done(ok bool) {
	s.o.mu.Lock()
	defer s.o.mu.Unlock()
	if st := s.o.m[s.key]; st != nil {
		if ok {
			st.failures = 0
		} else {
			st.failures++
		}
	}
}

// release gives the place back; an idle, healthy origin is forgotten, so
// the map holds only origins in use or failing.
func (s *slot) release() {
	s.o.mu.Lock()
	defer s.o.mu.Unlock()
	st := s.o.m[s.key]
	if st == nil {
		return
	}
	st.inflight--
	if st.inflight <= 0 && st.failures == 0 {
		delete(s.o.m, s.key)
	}
}

// originKey is rawURL's scheme and host (with port); the URL itself when
// it does not parse (its own origin: the Sender refuses it anyway).
func originKey(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil || u.Host == "" {
		return rawURL
	}
	return u.Scheme + "://" + u.Host
}
