package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"

	"github.com/mcpush/mcpush/pkg/mcp"
)

// streamFlags are the flags of mcpush events stream.
type streamFlags struct {
	cursor   string
	maxAgeMs *int64      // --max-age or --since (ageFlags)
	args     stringsFlag // --arg key=value, as a positional key=value
}

// cmdEventsStream holds a push subscription to event type name
// (events/stream) until interrupted: from --cursor (past the events older
// than --max-age or --since, if given), else from now, with
// the arguments args (key=value, key:=JSON, typed by the event type's
// inputSchema). It prints each event as one line (timestamp, name,
// eventId, data, cursor; escaped as events receive does) or, with
// asJSON, as one JSON line (the notification's params); a stream the
// server ends (its deadline, on Lambda) is reopened from the last cursor
// without a lost or repeated event (mcp.ClientSession.StreamEvents). On
// the way out it says on stderr the cursor to resume from.
func cmdEventsStream(ctx context.Context, e *env, c *common, name string, args []string, f *streamFlags, asJSON bool) error {
	return withSession(ctx, e, c, nil, func(cs *mcp.ClientSession) error {
		p := mcp.StreamEventsParams{Name: name}
		var err error
		if p.Arguments, err = eventArguments(ctx, cs, name, append(f.args, args...)); err != nil {
			return err
		}
		if f.cursor != "" {
			p.Cursor = &f.cursor
		}
		p.MaxAgeMs = f.maxAgeMs
		var last *string
		err = cs.StreamEvents(ctx, p, nil, func(m *mcp.EventStreamMessage) error {
			if m.Cursor != nil {
				last = m.Cursor
			}
			switch {
			case m.Kind == "active" && m.Truncated:
				fmt.Fprintln(e.stderr, "mcpush: events were skipped (truncated): the cursor was older than what the server keeps, or the events older than --max-age/--since")
			case m.Kind == "event" && asJSON:
				return writeJSON(e.stdout, m.Event, false)
			case m.Kind == "event":
				ev := m.Event
				var data bytes.Buffer
				if json.Compact(&data, ev.Data) != nil {
					data.WriteString("null")
				}
				cursor := "-"
				if ev.Cursor != nil {
					cursor = *ev.Cursor
				}
				_, err := fmt.Fprintf(e.stdout, "%s\t%s\t%s\t%s\t%s\n",
					printable(ev.Timestamp), printable(ev.Name), printable(ev.EventID), printable(data.String()), printable(cursor))
				return err
			}
			return nil
		})
		if last != nil {
			fmt.Fprintln(e.stderr, "cursor: "+printable(*last))
		}
		return err
	})
}
