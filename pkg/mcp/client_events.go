package mcp

import (
	"context"
	"errors"
	"time"
)

// Client side of the Events extension (events.go): list the event types
// and poll a subscription. A client that registers a handler for
// notifications/events/list_changed declares the extension in its
// capabilities, which is what makes a 2025-era server send it.

// ListEvents lists all event types (events/list), following pagination.
func (cs *ClientSession) ListEvents(ctx context.Context) ([]*EventType, error) {
	return listAll(ctx, cs, "events/list", func(r *ListEventsResult) ([]*EventType, string) { return r.Events, r.NextCursor })
}

// PollEvents makes one events/poll. A nil p.Cursor starts from now.
func (cs *ClientSession) PollEvents(ctx context.Context, p *PollEventsParams) (*PollEventsResult, error) {
	var res PollEventsResult
	if err := cs.Call(ctx, "events/poll", p, &res); err != nil {
		return nil, err
	}
	return &res, nil
}

// PollLoopOptions configure ClientSession.PollLoop. Nil means defaults.
type PollLoopOptions struct {
	// MinInterval is the floor of the wait between two polls, whatever
	// nextPollMs the server says (SEP-3415: a misbehaving server must not
	// make the client poll in a tight loop). Default: 1 s.
	MinInterval time.Duration
}

// DefaultPollFloor is the default PollLoopOptions.MinInterval.
const DefaultPollFloor = time.Second

// ErrStopPolling, returned by a PollLoop handler, ends the loop without
// an error.
var ErrStopPolling = errors.New("mcp: stop polling")

// PollLoop polls the subscription p (its Cursor is where it starts: nil
// is now) until ctx ends or handle returns an error. handle gets every
// result in order, events or not: its Cursor is the one to persist. When
// a result says hasMore, the next poll follows at once; otherwise it
// waits the result's nextPollMs, and never less than MinInterval (nor
// when a result says hasMore but did not move the cursor). It returns
// ctx's error, handle's (nil for ErrStopPolling), or the first failed
// poll's.
func (cs *ClientSession) PollLoop(ctx context.Context, p PollEventsParams, opts *PollLoopOptions, handle func(*PollEventsResult) error) error {
	floor := DefaultPollFloor
	if opts != nil && opts.MinInterval > 0 {
		floor = opts.MinInterval
	}
	for {
		res, err := cs.PollEvents(ctx, &p)
		if err != nil {
			return err
		}
		if err := handle(res); err != nil {
			if errors.Is(err, ErrStopPolling) {
				return nil
			}
			return err
		}
		moved := res.Cursor != nil && (p.Cursor == nil || *res.Cursor != *p.Cursor)
		if res.Cursor != nil {
			p.Cursor = res.Cursor
		}
		wait := max(time.Duration(res.NextPollMs)*time.Millisecond, floor)
		if res.HasMore && moved {
			wait = 0
		}
		if wait == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
			continue
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
}
