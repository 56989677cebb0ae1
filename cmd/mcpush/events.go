package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/mcpush/mcpush/pkg/mcp"
)

// eventsFlags are the flags of mcpush events poll.
type eventsFlags struct {
	cursor    string
	maxEvents int
	follow    bool
}

// cmdEventsList prints the server's event types (events/list): one line
// each (name, delivery modes, description), or JSON with asJSON.
func cmdEventsList(ctx context.Context, e *env, c *common, asJSON bool) error {
	cs, err := connectOneShot(ctx, e, c)
	if err != nil {
		return err
	}
	defer closeSession(ctx, cs)
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
}

// cmdEventsPoll polls event type name with arguments args (key=value,
// key:=JSON, typed by the event type's inputSchema). One poll prints its
// result as JSON; with --follow it polls until interrupted (the server's
// nextPollMs, at least 1 s apart; a backlog at once), printing each event
// as one JSON line, and says on stderr the cursor to resume from
// (--cursor). Without --cursor it starts from now.
func cmdEventsPoll(ctx context.Context, e *env, c *common, name string, args []string, f *eventsFlags) error {
	cs, err := connectOneShot(ctx, e, c)
	if err != nil {
		return err
	}
	defer closeSession(ctx, cs)
	p := mcp.PollEventsParams{Name: name}
	if p.Arguments, err = eventArguments(ctx, cs, name, args); err != nil {
		return err
	}
	if f.cursor != "" {
		p.Cursor = &f.cursor
	}
	if f.maxEvents > 0 {
		p.MaxEvents = &f.maxEvents
	}
	if !f.follow {
		res, err := cs.PollEvents(ctx, &p)
		if err != nil {
			return err
		}
		return writeJSON(e.stdout, res, true)
	}
	var last *string
	err = cs.PollLoop(ctx, p, nil, func(res *mcp.PollEventsResult) error {
		if res.Truncated {
			fmt.Fprintln(e.stderr, "mcpush: events were skipped (truncated): the cursor was older than what the server keeps")
		}
		for _, ev := range res.Events {
			if err := writeJSON(e.stdout, ev, false); err != nil {
				return err
			}
		}
		last = res.Cursor
		return nil
	})
	if last != nil {
		fmt.Fprintln(e.stderr, "cursor: "+*last)
	}
	return err
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

// connectOneShot connects a client without a standalone stream.
func connectOneShot(ctx context.Context, e *env, c *common) (*mcp.ClientSession, error) {
	client, err := newClient(ctx, e, c, &mcp.ClientOptions{NoStandaloneStream: true})
	if err != nil {
		return nil, err
	}
	return client.Connect(ctx, c.url)
}

// subscribeFlags are the flags of events subscribe and unsubscribe.
type subscribeFlags struct {
	callback string // the webhook URL
	ttl      string // a duration, or "none" for no expiry; "" the server's default
}

// cmdEventsSubscribe subscribes the webhook --callback to event type name
// (events/subscribe) and prints the result as JSON. Without a secret
// (--secret, else $MCPUSH_WEBHOOK_SECRET) it generates one and prints it
// on stderr, to give to the receiver (mcpush events receive --secret).
func cmdEventsSubscribe(ctx context.Context, e *env, c *common, name string, args []string, f *subscribeFlags, secret string, sf *streamFlags) error {
	if f.callback == "" {
		return fmt.Errorf("%w: events subscribe needs --callback URL (the webhook receiver)", errUsage)
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
	cs, err := connectOneShot(ctx, e, c)
	if err != nil {
		return err
	}
	defer closeSession(ctx, cs)
	if p.Arguments, err = eventArguments(ctx, cs, name, append(args, sf.args...)); err != nil {
		return err
	}
	if p.Delivery.Secret == "" {
		p.Delivery.Secret = mcp.NewWebhookSecret()
		fmt.Fprintln(e.stderr, "secret: "+p.Delivery.Secret+" (generated: give it to the receiver, and pass it with --secret to refresh)")
	}
	res, err := cs.SubscribeEvents(ctx, &p)
	if err != nil {
		return err
	}
	return writeJSON(e.stdout, res, true)
}

// cmdEventsUnsubscribe ends the webhook subscription of name, arguments
// and --callback (events/unsubscribe).
func cmdEventsUnsubscribe(ctx context.Context, e *env, c *common, name string, args []string, f *subscribeFlags, sf *streamFlags) error {
	if f.callback == "" {
		return fmt.Errorf("%w: events unsubscribe needs --callback URL", errUsage)
	}
	cs, err := connectOneShot(ctx, e, c)
	if err != nil {
		return err
	}
	defer closeSession(ctx, cs)
	p := mcp.UnsubscribeEventsParams{Name: name, Delivery: &mcp.WebhookDelivery{URL: f.callback}}
	if p.Arguments, err = eventArguments(ctx, cs, name, append(args, sf.args...)); err != nil {
		return err
	}
	if err := cs.UnsubscribeEvents(ctx, &p); err != nil {
		return err
	}
	fmt.Fprintln(e.stdout, "unsubscribed")
	return nil
}
