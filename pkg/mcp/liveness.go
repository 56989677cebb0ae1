package mcp

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/mcpush/mcpush/pkg/notify"
)

// A process that serves listen streams keeps one liveness record in the
// store while it holds any, so that its streams' backing sessions may live
// long (listenHeldTTL: one write per stream per several minutes) and still
// stop counting against MaxListensPerPrincipal soon after the process
// dies (SIGKILL, a crash, a frozen sandbox): each backing session names
// the record of the process that serves it (notify.ListenState.Process,
// in its Listen), and a listen
// refused at the bound deletes the backing sessions whose process's record
// has expired (reclaimListens), then counts again.
//
// The record is a session with the reserved principal livenessPrincipal,
// which nothing counts and no request owns: created (before the
// acknowledgement) by the process's first listen stream, refreshed every
// livenessBeat to livenessTTL ahead by one heartbeat goroutine, whatever
// the number of streams, and deleted when the process's last stream ends
// (closed or parked), so that an idle process writes nothing. Its id is
// random per Server, so a record that expired (a process paused longer
// than livenessTTL) is stored again under the same id, and the backing
// sessions that were not reclaimed meanwhile count again.
const (
	// livenessTTL is a record's expiry after a beat.
	livenessTTL = 30 * time.Second
	// livenessBeat is how often a process holding listen streams
	// refreshes its record: two may fail before it expires.
	livenessBeat = 10 * time.Second
	// livenessCheck is how often the heartbeat looks at the clock (no
	// store request unless a beat is due): a process resumed after a
	// pause, whose timers are overdue, beats at once.
	livenessCheck = 2 * time.Second
	// reclaimMemo is how long a process does not look again at the
	// backing sessions of a principal whose streams were all served by
	// live processes: a client retrying at the bound costs one count.
	reclaimMemo = 5 * time.Second
	// maxReclaimMemo bounds the principals remembered.
	maxReclaimMemo = 4096
)

// liveness is a process's liveness record and the listen streams that
// hold it.
type liveness struct {
	mu      sync.Mutex
	id      string         // the record's session id, once drawn
	held    int            // listen streams holding the record
	rec     *ServerSession // the record, while held
	stop    chan struct{}  // ends the heartbeat of rec
	checked map[string]time.Time
}

// holdLiveness registers a listen stream with the process's liveness
// record and returns the record's id; the stream calls releaseLiveness
// when it ends. The first stream stores the record and starts the
// heartbeat.
func (s *Server) holdLiveness(ctx context.Context) (string, error) {
	lv := &s.live
	lv.mu.Lock()
	defer lv.mu.Unlock()
	if lv.id == "" {
		lv.id = "process-" + randomID(16)
	}
	if lv.rec == nil {
		now := s.opts.Now()
		st := &notify.Session{ID: lv.id, Principal: livenessPrincipal, CreatedAt: now, ExpiresAt: now.Add(livenessTTL)}
		err := s.store.CreateSession(ctx, st)
		if errors.Is(err, notify.ErrExists) {
			// Ours (the id is this Server's): a deletion that failed when
			// the last stream ended, or a creation whose answer was lost.
			// Take it as it is stored; the next beat extends it.
			st, err = s.store.GetSession(ctx, lv.id)
		}
		if err != nil {
			return "", err
		}
		lv.rec = &ServerSession{srv: s, state: st}
		lv.stop = make(chan struct{})
		go s.heartbeat(lv.rec, lv.stop)
	} else {
		s.beat(ctx)
	}
	lv.held++
	return lv.id, nil
}

// releaseLiveness ends a stream's hold on the liveness record; the last
// one stops the heartbeat and deletes the record, before the stream's
// request ends (on Lambda, before the invocation does: a sandbox frozen
// afterwards holds no record).
func (s *Server) releaseLiveness(ctx context.Context) {
	lv := &s.live
	lv.mu.Lock()
	defer lv.mu.Unlock()
	if lv.held--; lv.held > 0 || lv.rec == nil {
		return
	}
	close(lv.stop)
	id := lv.rec.ID()
	lv.rec, lv.stop = nil, nil
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := s.store.DeleteSession(ctx, id); err != nil && !errors.Is(err, notify.ErrNotFound) {
		s.log.WarnContext(ctx, "deleting the liveness record", "err", err)
	}
}

// heartbeat refreshes rec (beat) until stop is closed.
func (s *Server) heartbeat(rec *ServerSession, stop <-chan struct{}) {
	t := time.NewTicker(livenessCheck)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		s.live.mu.Lock()
		if s.live.rec == rec {
			ctx, cancel := context.WithTimeout(context.Background(), livenessBeat/2)
			s.beat(ctx)
			cancel()
		}
		s.live.mu.Unlock()
	}
}

// beat refreshes the record to livenessTTL ahead once livenessBeat has
// passed since the last refresh (by the server's clock), with one
// conditional update; a record found expired is stored again. The
// caller holds s.live.mu, and s.live.rec is set.
func (s *Server) beat(ctx context.Context) {
	rec := s.live.rec
	now := s.opts.Now()
	if rec.state.ExpiresAt.Sub(now) > livenessTTL-livenessBeat {
		return
	}
	err := s.updateSession(ctx, rec, func(st *notify.Session) { st.ExpiresAt = now.Add(livenessTTL) })
	if errors.Is(err, notify.ErrNotFound) {
		// Expired: the process was paused, or the store slow, for longer
		// than livenessTTL. Other processes may have reclaimed some of
		// its backing sessions meanwhile (their streams end at their
		// next read); the others count again from now.
		st := &notify.Session{ID: rec.ID(), Principal: livenessPrincipal, CreatedAt: now, ExpiresAt: now.Add(livenessTTL)}
		if err = s.store.CreateSession(ctx, st); err == nil {
			rec.state = st
		}
	}
	if err != nil {
		s.log.WarnContext(ctx, "refreshing the liveness record", "err", err)
	}
}

// reclaimListens deletes the backing sessions of lp (a listenPrincipal)
// whose serving process's liveness record is gone, at most limit: one
// read of the principal's sessions (listenProfiles), and one of each
// distinct process they name (this process's own excepted). A parked
// stream's session names none and is left to its expiry. It returns how
// many it deleted. A principal whose sessions were all served by live
// processes is not looked at again for reclaimMemo.
func (s *Server) reclaimListens(ctx context.Context, lp string, limit int) int {
	now := time.Now()
	lv := &s.live
	lv.mu.Lock()
	self, at := lv.id, lv.checked[lp]
	if lv.rec == nil {
		self = "" // not held: a session naming it was not closed
	}
	lv.mu.Unlock()
	if now.Sub(at) < reclaimMemo {
		return 0
	}
	listens, err := s.listenProfiles(ctx, lp, notify.ListenMatch{}, limit)
	if err != nil {
		s.log.WarnContext(ctx, "listing the listen streams of a principal", "err", err)
		return 0
	}
	alive := map[string]bool{}
	reclaimed := 0
	for _, st := range listens {
		id := st.ID
		owner := st.Listen.Process
		if owner == "" || owner == self {
			continue
		}
		live, ok := alive[owner]
		if !ok {
			rec, err := s.store.GetSession(ctx, owner)
			// Only a record known to be gone is dead: a failed read
			// reclaims nothing.
			live = err == nil && rec.Principal == livenessPrincipal || err != nil && !errors.Is(err, notify.ErrNotFound)
			alive[owner] = live
		}
		if live {
			continue
		}
		if err := s.store.DeleteSession(ctx, id); err == nil {
			reclaimed++
		} else if !errors.Is(err, notify.ErrNotFound) {
			s.log.WarnContext(ctx, "reclaiming an orphaned listen stream", "stream", id, "err", err)
		}
	}
	if reclaimed == 0 {
		lv.mu.Lock()
		if lv.checked == nil || len(lv.checked) >= maxReclaimMemo {
			lv.checked = map[string]time.Time{}
		}
		lv.checked[lp] = now
		lv.mu.Unlock()
	}
	return reclaimed
}
