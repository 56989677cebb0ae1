package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/mcpush/mcpush/pkg/notify"
)

// Session persistence: what a 2025-era session's client messages write to
// the store, and the read-modify-write of a stored session record.
// initialize creates the session's record (notify.Session);
// notifications/initialized marks it initialized; notifications/cancelled
// and the client's responses to server-to-client requests go to the
// session's mailboxes (PutMessage), where the process running the request
// finds them (watchCancel, ServerSession.call). updateSession and
// updateSessionIf change a stored record with optimistic concurrency,
// whatever it backs (a session's logging level, a listen stream's backing
// session, a process's liveness record); touch, touchRequest and
// touchWithin move a session's idle expiry. Backing sessions are created
// by createBacking (listen.go) for listen streams and events streams alike,
// liveness records in liveness.go;
// sessions end in streamable.go (DELETE) and sessionquota.go
// (reclaiming).

// checkInitialize decodes and checks initialize's params, touching no
// state: bad ones are refused before the request counts against any limit.
func (s *Server) checkInitialize(raw json.RawMessage) (InitializeParams, error) {
	p, err := decodeParams[InitializeParams](raw)
	if err != nil {
		return p, err
	}
	if p.ProtocolVersion == "" {
		return p, Errorf(CodeInvalidParams, "invalid params: initialize needs protocolVersion")
	}
	return p, s.checkClientInfo(raw, p.Capabilities)
}

// initialize creates a durable session for an initialize request.
func (s *Server) initialize(ctx context.Context, principal string, raw json.RawMessage) (*InitializeResult, *notify.Session, error) {
	p, err := s.checkInitialize(raw)
	if err != nil {
		return nil, nil, err
	}
	version := p.ProtocolVersion
	if !supportedVersion(version) {
		version = LatestProtocolVersion
	}
	var info json.RawMessage
	if p.ClientInfo != nil {
		info, _ = json.Marshal(p.ClientInfo)
	}
	// A new session's baseline is the registries as they are now: a fresh
	// session gets no list_changed for changes made before it existed.
	hashes, err := s.store.RegistryHashes(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("initialize: reading registry hashes: %w", err)
	}
	now := s.opts.Now()
	sess := &notify.Session{
		Principal:          principal,
		ProtocolVersion:    version,
		ClientInfo:         info,
		ClientCapabilities: p.Capabilities,
		CreatedAt:          now,
		ExpiresAt:          now.Add(s.opts.SessionIdleTimeout),
		NotifiedHashes:     hashes,
	}
	for attempt := 0; ; attempt++ {
		sess.ID = s.opts.NewSessionID()
		err = s.store.CreateSession(ctx, sess)
		if err == nil {
			break
		}
		if !errors.Is(err, notify.ErrExists) || attempt == 3 {
			return nil, nil, fmt.Errorf("initialize: creating session: %w", err)
		}
	}
	res := &InitializeResult{
		ProtocolVersion: version,
		Capabilities:    s.capabilities(),
		ServerInfo:      s.impl,
		Instructions:    s.opts.Instructions,
	}
	return res, sess, nil
}

// handleNotification acts on a client notification.
func (s *Server) handleNotification(ctx context.Context, ss *ServerSession, m *Message) error {
	switch m.Method {
	case "notifications/initialized":
		if ss.state.Initialized {
			return nil
		}
		return s.updateSession(ctx, ss, func(st *notify.Session) { st.Initialized = true })
	case "notifications/cancelled":
		p, err := decodeParams[CancelledParams](m.Params)
		if err != nil || !validRequestID(p.RequestID) {
			return Errorf(CodeInvalidParams, "notifications/cancelled needs a requestId: a string or a number of at most %d bytes", MaxIDBytes)
		}
		key := cancelKey(p.RequestID)
		if s.local.cancel(ss.ID(), key) {
			return nil // it runs here: nothing to tell other processes
		}
		// Another process may run it: it announced itself once it had run
		// long enough to be worth cancelling. A cancellation of anything
		// else (unknown, finished, or too young) is ignored, and stored
		// nowhere.
		if _, err := s.store.GetMessage(ctx, ss.ID(), runningKey(p.RequestID)); err != nil {
			if errors.Is(err, notify.ErrNotFound) {
				return nil
			}
			return err
		}
		stamp, _ := json.Marshal(s.opts.Now().UnixMilli())
		if _, err := s.store.PutMessage(ctx, ss.ID(), key, stamp); err != nil {
			return err
		}
	}
	// Other notifications (roots/list_changed, progress, ...) need no action.
	return nil
}

// handleResponse routes a client's response to a server-to-client request
// to the process waiting for it, through the store.
func (s *Server) handleResponse(ctx context.Context, ss *ServerSession, m *Message) error {
	var id string
	if json.Unmarshal(m.ID, &id) != nil || !strings.HasPrefix(id, requestIDPrefix) {
		// Not an answer to any request of ours: nothing to store.
		s.log.WarnContext(ctx, "response to an unknown request", "session", ss.ID(), "id", clipText(string(m.ID), 64))
		return nil
	}
	if _, err := s.store.GetMessage(ctx, ss.ID(), pendingKey(m.ID)); err != nil {
		if errors.Is(err, notify.ErrNotFound) {
			// Looks like ours, but no process of this session sent it.
			s.log.WarnContext(ctx, "response to a request never sent", "session", ss.ID(), "id", clipText(string(m.ID), 64))
			return nil
		}
		return err
	}
	data, err := json.Marshal(m)
	if err != nil {
		return err
	}
	key := responseKey(m.ID)
	if _, err := s.store.PutMessage(ctx, ss.ID(), key, data); err != nil {
		return err
	}
	s.local.wake(ss.ID(), key)
	return nil
}

// updateSession applies f to the session's profile with optimistic
// concurrency, re-reading on conflict.
func (s *Server) updateSession(ctx context.Context, ss *ServerSession, f func(*notify.Session)) error {
	return s.updateSessionIf(ctx, ss, f, nil)
}

// updateSessionIf is updateSession that, after a conflict, applies f
// again only if check passes on the session read back (nil: always); it
// returns check's error otherwise.
func (s *Server) updateSessionIf(ctx context.Context, ss *ServerSession, f func(*notify.Session), check func(*notify.Session) error) error {
	st := *ss.state
	for attempt := 0; ; attempt++ {
		f(&st)
		err := s.store.UpdateSession(ctx, &st)
		if err == nil {
			*ss.state = st
			return nil
		}
		if !errors.Is(err, notify.ErrConflict) || attempt == 5 {
			return err
		}
		fresh, err := s.store.GetSession(ctx, ss.ID())
		if err != nil {
			return err
		}
		if check != nil {
			if err := check(fresh); err != nil {
				return err
			}
		}
		st = *fresh
	}
}

// touch extends an idle session's expiry, at most once per half timeout,
// so that a busy session costs no write per request.
func (s *Server) touch(ctx context.Context, ss *ServerSession) {
	s.touchWithin(ctx, ss, s.opts.SessionIdleTimeout/2)
}

// touchRequest is touch for a client request: it extends the expiry once
// its remaining time is activityGranularity short of the whole timeout,
// so that the expiry tells when the session last served a request, to
// within activityGranularity, and a session in use is never reclaimed
// (reclaimSession). That costs one write per session per
// activityGranularity of requests.
func (s *Server) touchRequest(ctx context.Context, ss *ServerSession) {
	s.touchWithin(ctx, ss, s.opts.SessionIdleTimeout-activityGranularity)
}

// touchWithin extends the session's expiry to a whole idle timeout from
// now when no more than remaining is left of it.
func (s *Server) touchWithin(ctx context.Context, ss *ServerSession, remaining time.Duration) {
	now := s.opts.Now()
	if ss.state.ExpiresAt.Sub(now) > remaining {
		return
	}
	err := s.updateSession(ctx, ss, func(st *notify.Session) { st.ExpiresAt = now.Add(s.opts.SessionIdleTimeout) })
	if err != nil {
		s.log.WarnContext(ctx, "extending session expiry", "session", ss.ID(), "err", err)
	}
}
