package delivery

import (
	"net/url"
	"sync"
)

// Bounds of the per-origin limiter.
const (
	// unhealthyAfter: an origin whose last this many attempts all failed
	// gets one attempt in flight at a time until one succeeds.
	unhealthyAfter = 3
	// maxParked bounds the tasks parked for busy origins in one process;
	// beyond it a task is put back on the queue with a delay instead.
	maxParked = 100_000
	// maxOrigins bounds the origins remembered (in use, failing or
	// waited for); beyond it the idle ones are forgotten, failures and
	// all.
	maxOrigins = 10_000
)

// origins bounds the attempts in flight per callback origin in one
// process: a slow, hanging or failing host takes at most per workers,
// and one once it is failing. A task that finds its origin busy is
// parked (a Pool: it waits in memory, costing nothing, until a slot
// frees) or put back with a delay (a queue that outlives no invocation:
// SQS). Safe for concurrent use.
type origins struct {
	per    int
	mu     sync.Mutex
	m      map[string]*originState
	parked int // tasks parked, all origins
}

type originState struct {
	inflight int
	failures int     // consecutive failed attempts
	waiting  []*Task // parked, first come first served
	keys     map[string]*Task
}

func newOrigins(per int) *origins { return &origins{per: per, m: map[string]*originState{}} }

// slot is one task's place at its origin.
type slot struct {
	o   *origins
	key string
}

func (st *originState) limit(per int) int {
	if st.failures >= unhealthyAfter {
		return 1
	}
	return per
}

// acquire takes a place at rawURL's origin for t. When the origin is at
// its limit it returns false, and with park the task is kept to be
// handed back by a later release (parked reports it was).
func (o *origins) acquire(rawURL string, t *Task, park bool) (s *slot, parked bool) {
	key := originKey(rawURL)
	o.mu.Lock()
	defer o.mu.Unlock()
	st := o.m[key]
	if st == nil {
		if len(o.m) >= maxOrigins {
			for k, v := range o.m {
				if v.inflight == 0 && len(v.waiting) == 0 {
					delete(o.m, k)
				}
			}
		}
		st = &originState{}
		o.m[key] = st
	}
	if st.inflight < st.limit(o.per) {
		st.inflight++
		return &slot{o: o, key: key}, false
	}
	if !park || o.parked >= maxParked {
		return nil, false
	}
	k := t.key()
	if st.keys == nil {
		st.keys = map[string]*Task{}
	}
	if p := st.keys[k]; p != nil {
		// Parked already: it now runs for the later head too.
		*p = mergeTask(*p, *t)
		p.sub, p.Delay = nil, 0
		return nil, true
	}
	p := *t
	p.sub, p.Delay = nil, 0 // read afresh when it runs
	st.waiting = append(st.waiting, &p)
	st.keys[k] = &p
	o.parked++
	return nil, true
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

// release gives the place back and returns the parked tasks that may run
// now (as many as the origin's limit allows); an idle, healthy origin
// with nothing parked is forgotten, so the map holds only origins in use,
// failing or waited for.
func (s *slot) release() []Task {
	s.o.mu.Lock()
	defer s.o.mu.Unlock()
	st := s.o.m[s.key]
	if st == nil {
		return nil
	}
	st.inflight--
	n := min(len(st.waiting), st.limit(s.o.per)-st.inflight)
	var wake []Task
	if n > 0 {
		// Each woken task takes its place when it runs; one that finds
		// the origin busy again is parked again.
		for _, t := range st.waiting[:n] {
			wake = append(wake, *t)
			delete(st.keys, t.key())
		}
		st.waiting = st.waiting[n:]
		s.o.parked -= n
	}
	if st.inflight <= 0 && st.failures == 0 && len(st.waiting) == 0 {
		delete(s.o.m, s.key)
	}
	return wake
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
