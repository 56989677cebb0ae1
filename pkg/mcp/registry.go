package mcp

import (
	"context"
	"encoding/json"

	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/mcpush/mcpush/pkg/notify"
)

// Dynamic registries: tools, resources, prompts and event types published through SNS
// live in the store with a content hash each. A Server with
// DynamicRegistries serves them beside the features registered in code,
// and sends each session one list_changed per change.

// The dynamic items are notify.ToolItem (enables, disables or
// re-describes a tool registered in code), notify.ResourceItem (served as
// a static resource) and notify.PromptItem (a template: {{arg}} in a
// message text is replaced by the argument's value).

var registryKinds = []string{notify.RegistryTools, notify.RegistryResources, notify.RegistryPrompts}

var listChangedMethod = map[string]string{
	notify.RegistryTools:     "notifications/tools/list_changed",
	notify.RegistryResources: "notifications/resources/list_changed",
	notify.RegistryPrompts:   "notifications/prompts/list_changed",
	notify.RegistryEvents:    methodEventsListChanged,
}

// registryCache holds this process's copy of the dynamic registries. Once
// it has the hashes, a request never waits for them: when they are older
// than RegistryRefresh, one background read renews them (one store read
// for all kinds, shared by every request and stream of the process), and
// the items of a kind are read only when its hash changed. Safe for
// concurrent use.
type registryCache struct {
	mu         sync.Mutex
	fetched    time.Time
	hashes     map[string]string
	regs       map[string]*notify.Registry
	refreshing bool
}

// registryHashes returns the current hashes: read from the store when
// fresh is set or nothing is cached yet, otherwise the cached ones,
// renewed in the background when they are older than RegistryRefresh.
func (s *Server) registryHashes(ctx context.Context, fresh bool) (map[string]string, error) {
	return s.registryHashesAged(ctx, fresh, s.opts.RegistryRefresh)
}

// registryHashesAged is registryHashes renewing the cache in the
// background only when it is older than maxAge.
func (s *Server) registryHashesAged(ctx context.Context, fresh bool, maxAge time.Duration) (map[string]string, error) {
	c := &s.regs
	c.mu.Lock()
	if !fresh && c.hashes != nil {
		h := c.hashes
		if s.opts.Now().Sub(c.fetched) >= maxAge && !c.refreshing {
			c.refreshing = true
			go func() {
				ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
				defer cancel()
				if _, err := s.readRegistryHashes(ctx); err != nil {
					s.log.WarnContext(ctx, "refreshing registry hashes", "err", err)
				}
			}()
		}
		c.mu.Unlock()
		return h, nil
	}
	c.mu.Unlock()
	return s.readRegistryHashes(ctx)
}

// readRegistryHashes reads the hashes from the store into the cache. It
// returns what it read; the cache keeps whichever read started last, so
// a slow background read never replaces a newer one.
func (s *Server) readRegistryHashes(ctx context.Context) (map[string]string, error) {
	c := &s.regs
	started := s.opts.Now()
	h, err := s.store.RegistryHashes(ctx)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.refreshing = false
	if err != nil {
		return nil, err
	}
	if h == nil {
		h = map[string]string{}
	}
	if c.hashes == nil || !started.Before(c.fetched) {
		c.hashes, c.fetched = h, started
	}
	return h, nil
}

// registry returns the dynamic items of kind as of the cached hash.
func (s *Server) registry(ctx context.Context, kind string) (map[string]json.RawMessage, error) {
	if !s.opts.DynamicRegistries {
		return nil, nil
	}
	hashes, err := s.registryHashes(ctx, false)
	if err != nil {
		return nil, err
	}
	want := hashes[kind]
	if want == "" {
		return nil, nil
	}
	c := &s.regs
	c.mu.Lock()
	if r := c.regs[kind]; r != nil && r.Hash == want {
		c.mu.Unlock()
		return r.Items, nil
	}
	c.mu.Unlock()
	// Read without the lock: other requests keep using the cache meanwhile.
	r, err := s.store.GetRegistry(ctx, kind)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.regs == nil {
		c.regs = map[string]*notify.Registry{}
	}
	if cur := c.regs[kind]; cur == nil || cur.Hash != want {
		c.regs[kind] = r
	}
	return r.Items, nil
}

// notifyChanges puts a list_changed notification into the session's GET
// stream log for every registry whose hash differs from the one the
// session was last notified of. The append is conditional on the stored
// last-notified hash, so among all processes exactly one wins each
// change; a loser re-reads the session and sends nothing. Several changes
// between two checks coalesce into one notification, and a change back to
// the notified hash sends none.
func (s *Server) notifyChanges(ctx context.Context, ss *ServerSession) error {
	return s.notifyChangesAged(ctx, ss, s.opts.RegistryRefresh)
}

// notifyChangesAged is notifyChanges trusting this process's registry
// hashes up to maxAge old (an idle stream's reconnection: see pollGetLog).
func (s *Server) notifyChangesAged(ctx context.Context, ss *ServerSession, maxAge time.Duration) error {
	if !s.opts.DynamicRegistries {
		return nil
	}
	hashes, err := s.registryHashesAged(ctx, false, maxAge)
	if err != nil {
		return err
	}
	kinds := s.notifiedKinds(ss)
	if !differs(kinds, hashes, ss.state.NotifiedHashes) {
		return nil
	}
	// The cache may be older than the session's baseline (a session
	// created after our last refresh): decide on a fresh read, so that a
	// stale cache never causes a notification. A lost append means
	// another process notified the session from a read newer than ours
	// may be: re-read the session and then the registries (in that order,
	// so the hashes are at least as new as what the session records) and
	// decide again, never from hashes older than the session's; a
	// notification from them would move the session back and out again.
	for attempt := 1; ; attempt++ {
		if hashes, err = s.registryHashes(ctx, true); err != nil {
			return err
		}
		lost, err := s.appendListChanged(ctx, ss, kinds, hashes)
		if err != nil || !lost {
			return err
		}
		fresh, err := s.store.GetSession(ctx, ss.ID())
		if err != nil {
			return err
		}
		ss.state.NotifiedHashes = fresh.NotifiedHashes
		if attempt == maxNotifyAttempts {
			// Other processes keep winning: what is left is theirs, or
			// the session's next check's.
			return nil
		}
	}
}

// maxNotifyAttempts bounds the rounds of notifyChangesAged against other
// processes notifying the same session at the same time.
const maxNotifyAttempts = 3

// appendListChanged appends, for each of kinds whose hash differs from
// the one ss was last notified of, a list_changed conditional on that
// notified hash, until one append loses (lost: another process moved the
// session on; ss's notified hashes are then stale).
func (s *Server) appendListChanged(ctx context.Context, ss *ServerSession, kinds []string, hashes map[string]string) (lost bool, err error) {
	for _, kind := range kinds {
		cur, last := hashes[kind], ss.state.NotifiedHashes[kind]
		if cur == last {
			continue
		}
		msg, _ := encodeNotification(listChangedMethod[kind], struct{}{})
		_, ok, err := s.store.Append(ctx, ss.ID(), getStream, [][]byte{msg}, &notify.AppendOptions{
			NotifiedHash: &notify.HashCAS{Registry: kind, Old: last, New: cur},
		})
		if err != nil {
			return false, fmt.Errorf("notifying %s change: %w", kind, err)
		}
		if !ok {
			return true, nil
		}
		s.watcher.wake(ss.ID())
		if ss.state.NotifiedHashes == nil {
			ss.state.NotifiedHashes = map[string]string{}
		}
		ss.state.NotifiedHashes[kind] = cur
	}
	return false, nil
}

func differs(kinds []string, cur, notified map[string]string) bool {
	for _, kind := range kinds {
		if cur[kind] != notified[kind] {
			return true
		}
	}
	return false
}

// toolOverlay returns the dynamic tool items by name.
func (s *Server) toolOverlay(ctx context.Context) map[string]*notify.ToolItem {
	items, err := s.registry(ctx, notify.RegistryTools)
	if err != nil {
		s.log.WarnContext(ctx, "reading tools registry", "err", err)
		return nil
	}
	out := map[string]*notify.ToolItem{}
	for name, raw := range items {
		if s.opts.RegistryTools != nil && !slices.Contains(s.opts.RegistryTools, name) {
			continue
		}
		if dt, err := notify.DecodeToolItem(raw); err == nil {
			out[name] = dt
		}
	}
	return out
}

// effectiveTool applies an overlay item to a tool registered in code; nil
// means the tool is disabled.
func effectiveTool(t *Tool, dt *notify.ToolItem) *Tool {
	if dt == nil {
		return t
	}
	if dt.Enabled != nil && !*dt.Enabled {
		return nil
	}
	if dt.Description != "" {
		c := *t
		c.Description = dt.Description
		return &c
	}
	return t
}

func (s *Server) dynamicResources(ctx context.Context) map[string]*notify.ResourceItem {
	items, err := s.registry(ctx, notify.RegistryResources)
	if err != nil {
		s.log.WarnContext(ctx, "reading resources registry", "err", err)
		return nil
	}
	out := map[string]*notify.ResourceItem{}
	for uri, raw := range items {
		if r, err := notify.DecodeResourceItem(raw); err == nil {
			out[uri] = r
		}
	}
	return out
}

func (s *Server) dynamicPrompts(ctx context.Context) map[string]*notify.PromptItem {
	items, err := s.registry(ctx, notify.RegistryPrompts)
	if err != nil {
		s.log.WarnContext(ctx, "reading prompts registry", "err", err)
		return nil
	}
	out := map[string]*notify.PromptItem{}
	for name, raw := range items {
		if p, err := notify.DecodePromptItem(raw); err == nil {
			out[name] = p
		}
	}
	return out
}

func itemResource(r *notify.ResourceItem) *Resource {
	return &Resource{URI: r.URI, Name: r.Name, Description: r.Description, MimeType: r.MIMEType}
}

func readItem(r *notify.ResourceItem) *ReadResourceResult {
	rc := &ResourceContents{URI: r.URI, MimeType: r.MIMEType}
	if r.Blob != nil {
		rc.Blob = *r.Blob
	} else if r.Text != nil {
		rc.Text = *r.Text
	}
	return &ReadResourceResult{Contents: []*ResourceContents{rc}}
}

func itemPrompt(p *notify.PromptItem) *Prompt {
	out := &Prompt{Name: p.Name, Title: p.Title, Description: p.Description}
	for _, a := range p.Arguments {
		out.Arguments = append(out.Arguments, &PromptArgument{Name: a.Name, Description: a.Description, Required: a.Required})
	}
	return out
}
