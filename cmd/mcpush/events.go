package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/mcpush/mcpush/pkg/mcp"
)

// eventsFlags are the flags of mcpush events poll.
type eventsFlags struct {
	cursor    string
	maxAgeMs  *int64 // --max-age or --since (ageFlags)
	maxEvents int
	follow    bool
}

// ageFlags are --max-age and --since of events poll, stream and
// subscribe: SEP-3415's maxAgeMs, which bounds the replay from a cursor.
type ageFlags struct {
	maxAge string // a duration
	since  string // an RFC 3339 time
}

// maxAgeMs returns the maxAgeMs that the flags ask for at now (nil for
// neither), or a usage error: both flags, no cursor (without one, events
// start from now and SEP-3415 ignores maxAgeMs), a duration that is not
// positive, a time that does not parse or is in the future.
func (a *ageFlags) maxAgeMs(cursor string, now time.Time) (*int64, error) {
	var d time.Duration
	switch {
	case a.maxAge == "" && a.since == "":
		return nil, nil
	case a.maxAge != "" && a.since != "":
		return nil, fmt.Errorf("%w: --max-age and --since exclude each other", errUsage)
	case cursor == "":
		flag := "--max-age"
		if a.since != "" {
			flag = "--since"
		}
		return nil, fmt.Errorf("%w: %s needs --cursor: without a cursor, events start from now (SEP-3415 ignores maxAgeMs then); use the cursor a poll or stream printed", errUsage, flag)
	case a.maxAge != "":
		var err error
		if d, err = time.ParseDuration(a.maxAge); err != nil || d <= 0 {
			return nil, fmt.Errorf("%w: --max-age %q: want a positive duration such as 10m or 24h", errUsage, a.maxAge)
		}
	default:
		t, err := time.Parse(time.RFC3339, a.since)
		if err != nil {
			return nil, fmt.Errorf("%w: --since %q: want an RFC 3339 time such as 2026-12-02T08:00:00Z", errUsage, a.since)
		}
		if d = now.Sub(t); d < 0 {
			return nil, fmt.Errorf("%w: --since %q is in the future", errUsage, a.since)
		}
	}
	ms := d.Milliseconds()
	return &ms, nil
}

// cmdEventsList prints the server's event types (events/list): one line
// each (name, delivery modes, description), or JSON with asJSON.
func cmdEventsList(ctx context.Context, e *env, c *common, asJSON bool) error {
	return withSession(ctx, e, c, nil, func(cs *mcp.ClientSession) error {
		types, err := cs.ListEvents(ctx)
		if err != nil {
			return err
		}
		if asJSON {
			return writeJSON(e.stdout, types, true)
		}
		for _, t := range types {
			fmt.Fprintf(e.stdout, "%s\t%s\t%s\n", t.Name, strings.Join(t.Delivery, ","), t.Description)
		}
		return nil
	})
}

// cmdEventsPoll polls event type name with arguments args (key=value,
// key:=JSON, typed by the event type's inputSchema). One poll prints its
// result as JSON; with --follow it polls until interrupted (the server's
// nextPollMs, at least 1 s apart; a backlog at once), printing each event
// as one JSON line, and says on stderr the cursor to resume from
// (--cursor). Without --cursor it starts from now; --max-age or --since
// skip the events after the cursor older than that (maxAgeMs).
func cmdEventsPoll(ctx context.Context, e *env, c *common, name string, args []string, f *eventsFlags) error {
	return withSession(ctx, e, c, nil, func(cs *mcp.ClientSession) error {
		p := mcp.PollEventsParams{Name: name}
		var err error
		if p.Arguments, err = eventArguments(ctx, cs, name, args); err != nil {
			return err
		}
		if f.cursor != "" {
			p.Cursor = &f.cursor
		}
		if f.maxEvents > 0 {
			p.MaxEvents = &f.maxEvents
		}
		p.MaxAgeMs = f.maxAgeMs
		if !f.follow {
			res, err := cs.PollEvents(ctx, &p)
			if err != nil {
				return err
			}
			return writeJSON(e.stdout, res, true)
		}
		var last *string
		handle := func(res *mcp.PollEventsResult) error {
			if res.Truncated {
				fmt.Fprintln(e.stderr, "mcpush: events were skipped (truncated): the cursor was older than what the server keeps, or the events older than --max-age/--since")
			}
			for _, ev := range res.Events {
				if err := writeJSON(e.stdout, ev, false); err != nil {
					return err
				}
			}
			last = res.Cursor
			return nil
		}
		if p.MaxAgeMs != nil {
			// maxAgeMs bounds where the replay starts, not what follows: a
			// floor kept on every poll would skip the events that arrive
			// between two polls once they are older than it.
			res, err := cs.PollEvents(ctx, &p)
			if err != nil {
				return err
			}
			if err := handle(res); err != nil {
				return err
			}
			p.Cursor, p.MaxAgeMs = res.Cursor, nil
		}
		err = cs.PollLoop(ctx, p, nil, handle)
		if last != nil {
			fmt.Fprintln(e.stderr, "cursor: "+*last)
		}
		return err
	})
}

// eventArguments returns the arguments of a subscription to event type
// name from key=value and key:=JSON args, typed by its inputSchema (nil
// for none).
func eventArguments(ctx context.Context, cs *mcp.ClientSession, name string, args []string) (json.RawMessage, error) {
	if len(args) == 0 {
		return nil, nil
	}
	types, err := cs.ListEvents(ctx)
	if err != nil {
		return nil, err
	}
	var schema *inputSchema
	for _, t := range types {
		if t.Name == name {
			schema = &inputSchema{}
			if json.Unmarshal(t.InputSchema, schema) != nil {
				schema = nil
			}
		}
	}
	arguments, err := parseArgs(args, schema)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errUsage, err)
	}
	return json.Marshal(arguments)
}

// subscribeFlags are the flags of events subscribe and unsubscribe.
type subscribeFlags struct {
	callback string // the webhook URL
	ttl      string // a duration, or "none" for no expiry; "" the server's default
}

// cmdEventsSubscribe subscribes the webhook --callback to event type name
// (events/subscribe) and prints the result as JSON. The secret (--secret,
// else $MCPUSH_WEBHOOK_SECRET) is required: the server verifies the
// callback within this call, with a POST signed with it, so the receiver
// must hold it already (mcpush events receive prints the one it made). A
// refusal the newcomer can fix comes with a hint (webhookHint).
func cmdEventsSubscribe(ctx context.Context, e *env, c *common, name string, args []string, f *subscribeFlags, secret string, sf *streamFlags) error {
	if f.callback == "" {
		return fmt.Errorf("%w: events subscribe needs --callback URL (the webhook receiver)", errUsage)
	}
	if secret == "" {
		return &hinted{
			err:  fmt.Errorf("%w: events subscribe needs --secret whsec_... (or $MCPUSH_WEBHOOK_SECRET): the receiver's secret", errUsage),
			hint: "the server verifies the callback within this call, so the receiver must know the secret first: start 'mcpush events receive --listen ADDR' (it prints one) and pass that, or make one with 'mcpush events secret' and give it to both",
		}
	}
	p := mcp.SubscribeEventsParams{Name: name, Delivery: &mcp.WebhookDelivery{Mode: "webhook", URL: f.callback, Secret: secret}}
	switch f.ttl {
	case "":
	case "none":
		p.TTLMs = json.RawMessage("null")
	default:
		d, err := time.ParseDuration(f.ttl)
		if err != nil || d <= 0 {
			return fmt.Errorf("%w: --ttl %q: want a duration such as 1h, or none", errUsage, f.ttl)
		}
		p.TTLMs = json.RawMessage(strconv.FormatInt(d.Milliseconds(), 10))
	}
	if sf.cursor != "" {
		p.Cursor = &sf.cursor
	}
	p.MaxAgeMs = sf.maxAgeMs
	return withSession(ctx, e, c, nil, func(cs *mcp.ClientSession) error {
		var err error
		if p.Arguments, err = eventArguments(ctx, cs, name, append(args, sf.args...)); err != nil {
			return err
		}
		res, err := cs.SubscribeEvents(ctx, &p)
		if err != nil {
			return webhookHint(err, f.callback)
		}
		return writeJSON(e.stdout, res, true)
	})
}

// cmdEventsUnsubscribe ends the webhook subscription of name, arguments
// and --callback (events/unsubscribe).
func cmdEventsUnsubscribe(ctx context.Context, e *env, c *common, name string, args []string, f *subscribeFlags, sf *streamFlags) error {
	if f.callback == "" {
		return fmt.Errorf("%w: events unsubscribe needs --callback URL", errUsage)
	}
	return withSession(ctx, e, c, nil, func(cs *mcp.ClientSession) error {
		p := mcp.UnsubscribeEventsParams{Name: name, Delivery: &mcp.WebhookDelivery{URL: f.callback}}
		var err error
		if p.Arguments, err = eventArguments(ctx, cs, name, append(args, sf.args...)); err != nil {
			return err
		}
		if err := cs.UnsubscribeEvents(ctx, &p); err != nil {
			return webhookHint(err, f.callback)
		}
		fmt.Fprintln(e.stdout, "unsubscribed")
		return nil
	})
}

// webhookHint returns err with a hint when it is a refusal of
// events/subscribe or unsubscribe that the user can fix: a server without
// webhooks (no authentication: -32601 today, Forbidden or Unsupported
// naming MCPUSH_AUTH), no principal (Forbidden), or a callback that did
// not pass verification (CallbackEndpointError, by its data.reason). The
// error is matched on its code and on its message's leading name, so
// that either dialect of the Events error codes is understood.
func webhookHint(err error, callback string) error {
	var re *mcp.Error
	if !errors.As(err, &re) {
		return err
	}
	is := func(code int, name string) bool { return re.Code == code || strings.HasPrefix(re.Message, name) }
	const noAuth = "webhooks need a server with authentication (MCPUSH_AUTH=oauth or iam where the server runs; docs/auth.md)"
	var h string
	switch {
	case strings.Contains(re.Message, "MCPUSH_AUTH"), re.Code == mcp.CodeMethodNotFound:
		h = noAuth + " and a login: 'mcpush login --url URL', or --header 'Authorization: Bearer TOKEN'; without it, poll and stream work ('mcpush events poll', 'mcpush events stream')"
	case is(mcp.CodeForbidden, "Forbidden"):
		h = "webhook subscriptions belong to an authenticated principal: sign in with 'mcpush login --url URL' (or pass --header 'Authorization: Bearer TOKEN'); " + noAuth
	case is(mcp.CodeUnsupported, "Unsupported"):
		h = "'mcpush events list' shows the delivery modes of each event type; a server without authentication offers no webhook: " + noAuth
	case is(mcp.CodeCallbackEndpointError, "CallbackEndpointError"):
		var data struct {
			Reason string `json:"reason"`
		}
		json.Unmarshal(re.Data, &data)
		h = callbackHint(data.Reason, callback)
	default:
		return err
	}
	return &hinted{err: err, hint: h}
}

// callbackHint says what a verification failure of reason (SEP-3415's
// lastError categories) means for the receiver at url.
func callbackHint(reason, url string) string {
	switch reason {
	case "http_4xx":
		return "the receiver at " + url + " refused the server's signed verification POST (a 4xx): 'mcpush events receive' answers 401 when it holds another secret (its stderr says 'signature did not verify'): pass the receiver's secret with --secret"
	case "connection_refused":
		return "the server could not reach " + url + ": is the receiver running, and is its origin in MCPUSH_WEBHOOK_ALLOW where the server runs (an http or loopback URL is refused without it)?"
	case "timeout":
		return "the receiver at " + url + " did not answer the verification POST in time (5 s)"
	case "challenge_failed":
		return "the receiver at " + url + " answered without echoing the challenge: it must answer the verification envelope with {\"challenge\": ...} (mcpush events receive does)"
	case "http_5xx":
		return "the receiver at " + url + " failed (a 5xx) on the verification POST: see its logs"
	case "tls_error":
		return "the TLS handshake with " + url + " failed: check its certificate"
	}
	return "the callback " + url + " did not pass the server's verification: is the receiver running with the same --secret?"
}
