package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"sync"
	"time"

	"github.com/mcpush/mcpush/pkg/notify"
)

// subscriptions/listen (2026 era) is the only way the server pushes to a
// client. A listen stream is backed by a short-lived session in the store
// (never visible to the client): it holds the stream's baseline registry
// hashes and its resource subscriptions, so that registry changes and SNS
// events reach it through the same store paths as a 2025 session's GET
// stream, from any process, exactly once per change (the conditional
// append of notifyChanges), coalesced between two checks, and nothing
// for a change back to the last notified hash.

// SubscriptionFilter names the notifications a listen stream wants.
type SubscriptionFilter struct {
	ToolsListChanged      bool     `json:"toolsListChanged,omitempty"`
	PromptsListChanged    bool     `json:"promptsListChanged,omitempty"`
	ResourcesListChanged  bool     `json:"resourcesListChanged,omitempty"`
	ResourceSubscriptions []string `json:"resourceSubscriptions,omitempty"`
}

// Bounds of a listen filter.
const (
	// MaxListenSubscriptions bounds resourceSubscriptions.
	MaxListenSubscriptions = 100
	// maxListenURI bounds one subscribed URI.
	maxListenURI = 2048
)

// listenKey identifies a listen stream on this process for
// notifications/cancelled: the principal and the listen request's id.
func listenKey(principal string, id json.RawMessage) string {
	return principalTag(principal) + "|" + canonicalID(id)
}

// listens are the listen streams open on this process, by listenKey.
type listens struct {
	mu      sync.Mutex
	cancels map[string]context.CancelFunc
}

func (l *listens) add(key string, cancel context.CancelFunc) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.cancels == nil {
		l.cancels = map[string]context.CancelFunc{}
	}
	l.cancels[key] = cancel
}

func (l *listens) remove(key string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.cancels, key)
}

func (l *listens) cancel(key string) bool {
	l.mu.Lock()
	c := l.cancels[key]
	l.mu.Unlock()
	if c != nil {
		c()
	}
	return c != nil
}

// cancelListen ends the listen stream that a notifications/cancelled names,
// when this process serves it.
func (h *StreamableHandler) cancelListen(_ context.Context, principal string, m *Message) {
	p, err := decodeParams[CancelledParams](m.Params)
	if err != nil || len(p.RequestID) == 0 {
		return
	}
	h.listens.cancel(listenKey(principal, p.RequestID))
}

// parseListenFilter decodes and checks a listen request's filter: unknown
// notification types and unbounded lists are invalid params.
func parseListenFilter(params json.RawMessage) (*SubscriptionFilter, error) {
	var p struct {
		Notifications json.RawMessage `json:"notifications"`
	}
	if err := json.Unmarshal(params, &p); err != nil {
		return nil, Errorf(CodeInvalidParams, "invalid params: %v", err)
	}
	if len(p.Notifications) == 0 || p.Notifications[0] != '{' {
		return nil, Errorf(CodeInvalidParams, "invalid params: subscriptions/listen needs a notifications object")
	}
	dec := json.NewDecoder(bytes.NewReader(p.Notifications))
	dec.DisallowUnknownFields()
	var f SubscriptionFilter
	if err := dec.Decode(&f); err != nil {
		return nil, Errorf(CodeInvalidParams, "invalid params: notifications: %v (known types: toolsListChanged, promptsListChanged, resourcesListChanged, resourceSubscriptions)", err)
	}
	if len(f.ResourceSubscriptions) > MaxListenSubscriptions {
		return nil, Errorf(CodeInvalidParams, "invalid params: at most %d resourceSubscriptions", MaxListenSubscriptions)
	}
	for _, uri := range f.ResourceSubscriptions {
		if uri == "" || len(uri) > maxListenURI {
			return nil, Errorf(CodeInvalidParams, "invalid params: a resourceSubscriptions URI must have 1 to %d bytes", maxListenURI)
		}
	}
	return &f, nil
}

// acknowledged narrows f to what the server can deliver.
func (s *Server) acknowledged(f *SubscriptionFilter) *SubscriptionFilter {
	caps := s.capabilities()
	return &SubscriptionFilter{
		ToolsListChanged:      f.ToolsListChanged && caps.Tools != nil && caps.Tools.ListChanged,
		PromptsListChanged:    f.PromptsListChanged && caps.Prompts != nil && caps.Prompts.ListChanged,
		ResourcesListChanged:  f.ResourcesListChanged && caps.Resources != nil && caps.Resources.ListChanged,
		ResourceSubscriptions: map[bool][]string{true: f.ResourceSubscriptions}[caps.Resources != nil && caps.Resources.Subscribe],
	}
}

// admits reports whether a logged notification goes to a stream with
// filter f.
func (f *SubscriptionFilter) admits(method string) bool {
	switch method {
	case "notifications/tools/list_changed":
		return f.ToolsListChanged
	case "notifications/prompts/list_changed":
		return f.PromptsListChanged
	case "notifications/resources/list_changed":
		return f.ResourcesListChanged
	case "notifications/resources/updated":
		return len(f.ResourceSubscriptions) > 0
	}
	return false
}

// tagSubscription adds the subscription id to a notification's
// params._meta.
func tagSubscription(msg []byte, id json.RawMessage) ([]byte, string, error) {
	var m Message
	if err := json.Unmarshal(msg, &m); err != nil {
		return nil, "", err
	}
	params := map[string]json.RawMessage{}
	if len(m.Params) > 0 {
		if err := json.Unmarshal(m.Params, &params); err != nil {
			return nil, "", err
		}
	}
	meta := map[string]json.RawMessage{}
	if raw := params["_meta"]; len(raw) > 0 {
		_ = json.Unmarshal(raw, &meta)
	}
	meta[metaSubscriptionID] = id
	params["_meta"], _ = json.Marshal(meta)
	m.Params, _ = json.Marshal(params)
	out, err := json.Marshal(m)
	return out, m.Method, err
}

// serveListen serves subscriptions/listen: the acknowledgement, then the
// opted-in notifications as they happen, until the client leaves or
// cancels (no response), or the server shuts down or nears the request's
// deadline (the empty listen result: the client listens again).
func (h *StreamableHandler) serveListen(w http.ResponseWriter, r *http.Request, ss *ServerSession, m *Message) {
	f, err := parseListenFilter(m.Params)
	if err != nil {
		writeJSON(w, http.StatusOK, encodeResponse(m.ID, nil, err.(*Error)))
		return
	}
	ack := h.srv.acknowledged(f)
	srv := h.srv
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	key := listenKey(ss.Principal(), m.ID)
	h.listens.add(key, cancel)
	defer h.listens.remove(key)

	// The stream's backing session: its baseline is the registries now.
	hashes, err := srv.store.RegistryHashes(ctx)
	if err != nil {
		srv.log.ErrorContext(ctx, "opening listen stream", "err", err)
		writeJSON(w, http.StatusInternalServerError, encodeResponse(m.ID, nil, Errorf(CodeInternalError, "internal error: opening the listen stream")))
		return
	}
	now := srv.opts.Now()
	st := &notify.Session{
		ID:                 "listen-" + randomID(16),
		Principal:          ss.Principal(),
		ProtocolVersion:    ss.ProtocolVersion(),
		ClientCapabilities: ss.state.ClientCapabilities,
		Initialized:        true,
		CreatedAt:          now,
		ExpiresAt:          now.Add(srv.opts.SessionIdleTimeout),
		NotifiedHashes:     hashes,
	}
	if err := srv.store.CreateSession(ctx, st); err != nil {
		srv.log.ErrorContext(ctx, "opening listen stream", "err", err)
		writeJSON(w, http.StatusInternalServerError, encodeResponse(m.ID, nil, Errorf(CodeInternalError, "internal error: opening the listen stream")))
		return
	}
	defer func() {
		if err := srv.store.DeleteSession(context.WithoutCancel(ctx), st.ID); err != nil && !errors.Is(err, notify.ErrNotFound) {
			srv.log.WarnContext(ctx, "closing listen stream", "err", err)
		}
	}()
	for _, uri := range ack.ResourceSubscriptions {
		if err := srv.store.Subscribe(ctx, st.ID, uri); err != nil {
			srv.log.ErrorContext(ctx, "opening listen stream", "err", err)
			writeJSON(w, http.StatusInternalServerError, encodeResponse(m.ID, nil, Errorf(CodeInternalError, "internal error: subscribing")))
			return
		}
	}
	lss := &ServerSession{srv: srv, state: st}

	h.streams.Add(1)
	defer h.streams.Done()
	sse := newSSEWriter(w)
	sse.start()
	ackMsg, _ := encodeNotification("notifications/subscriptions/acknowledged", map[string]any{
		"notifications": ack,
		"_meta":         map[string]json.RawMessage{metaSubscriptionID: m.ID},
	})
	if sse.event("", ackMsg) != nil {
		return
	}
	h.pumpListen(ctx, sse, lss, ack, m.ID)
}

// pumpListen copies a listen stream's log to the client.
func (h *StreamableHandler) pumpListen(ctx context.Context, sse *sseWriter, lss *ServerSession, f *SubscriptionFilter, id json.RawMessage) {
	srv := h.srv
	end := func() {
		res, _ := json.Marshal(map[string]any{
			"resultType": resultComplete,
			"_meta":      map[string]json.RawMessage{metaSubscriptionID: id},
		})
		sse.event("", encodeResponse(id, json.RawMessage(res), nil))
	}
	var deadline <-chan time.Time
	if d, ok := h.streamDeadline(ctx); ok {
		t := time.NewTimer(time.Until(d))
		defer t.Stop()
		deadline = t.C
	}
	poll := time.NewTimer(srv.opts.PollInterval)
	defer poll.Stop()
	lastWrite := time.Now()
	var after int64
	for {
		select {
		case <-ctx.Done():
			return
		case <-h.closing:
			end()
			return
		case <-deadline:
			end()
			return
		case <-poll.C:
		}
		if err := srv.notifyChanges(ctx, lss); err != nil && ctx.Err() == nil {
			srv.log.WarnContext(ctx, "checking registry changes", "stream", lss.ID(), "err", err)
		}
		evs, err := srv.store.ReadEvents(ctx, lss.ID(), getStream, after, readBatch)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			srv.log.WarnContext(ctx, "reading listen stream", "stream", lss.ID(), "err", err)
		}
		for _, ev := range evs {
			after = ev.Seq
			if isControl(ev.Data) {
				continue
			}
			msg, method, err := tagSubscription(ev.Data, id)
			if err != nil || !f.admits(method) {
				continue
			}
			if sse.event("", msg) != nil {
				return
			}
			lastWrite = time.Now()
		}
		if time.Since(lastWrite) >= h.opts.KeepAlive {
			if sse.comment("keepalive") != nil {
				return
			}
			lastWrite = time.Now()
		}
		if len(evs) == readBatch {
			poll.Reset(0)
		} else {
			poll.Reset(srv.opts.PollInterval)
		}
	}
}
