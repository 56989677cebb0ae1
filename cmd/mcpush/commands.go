package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"time"

	"github.com/mcpush/mcpush/pkg/mcp"
)

// invocation is the command line of one command: the command's flag set,
// with the common flags registered in it, and its words.
type invocation struct {
	e     *env
	c     *common
	fs    *flag.FlagSet
	words []string // from the command's name on: ["events", "poll", "NAME", ...]
}

// parse parses the command's flags wherever they stand and returns its
// arguments, at most maxArgs of them (-1: any number); with no --url set,
// the URL is the local server's. For --help it writes the command's help
// and returns flag.ErrHelp.
func (in *invocation) parse(maxArgs int) ([]string, error) {
	pos, err := parse(in.fs, in.words[1:])
	if errors.Is(err, flag.ErrHelp) {
		if herr := writeHelp(in.e.stdout, in.words); herr != nil {
			return nil, herr
		}
		return nil, err
	}
	if err != nil {
		return nil, err
	}
	if maxArgs >= 0 && len(pos) > maxArgs {
		return nil, fmt.Errorf("%w: %s takes no arguments, got %q", errUsage, in.words[0], pos)
	}
	if in.c.url == "" {
		in.c.url = defaultURL
	}
	return pos, nil
}

// runner returns the function that registers command name's flags,
// parses its command line and runs it; nil for a command the CLI does
// not have.
func runner(name string) func(ctx context.Context, in *invocation) error {
	switch name {
	case "tools":
		return runTools
	case "call":
		return runCall
	case "task":
		return runTask
	case "events":
		return runEvents
	case "watch":
		return runWatch
	case "publish":
		return runPublish
	case "admin":
		return runAdmin
	case "login":
		return runLogin
	}
	return nil
}

func runTools(ctx context.Context, in *invocation) error {
	asJSON := in.fs.Bool("json", false, "print the tools as JSON")
	if _, err := in.parse(0); err != nil {
		return err
	}
	return in.c.oneShot(ctx, func(ctx context.Context) error { return cmdTools(ctx, in.e, in.c, *asJSON) })
}

func runCall(ctx context.Context, in *invocation) error {
	noWait := in.fs.Bool("no-wait", false, "print the task id of a call the server runs as a task, and return")
	in.fs.Bool("json", true, "print the structured content as JSON (what call always does)")
	pos, err := in.parse(-1)
	if err != nil {
		return err
	}
	if len(pos) == 0 {
		return fmt.Errorf("%w: call needs a tool name", errUsage)
	}
	return in.c.oneShot(ctx, func(ctx context.Context) error { return cmdCall(ctx, in.e, in.c, pos[0], pos[1:], *noWait) })
}

func runTask(ctx context.Context, in *invocation) error {
	pos, err := in.parse(2)
	if err != nil {
		return err
	}
	if len(pos) != 2 || (pos[0] != "get" && pos[0] != "cancel") {
		return fmt.Errorf("%w: task takes get ID or cancel ID", errUsage)
	}
	return in.c.oneShot(ctx, func(ctx context.Context) error { return cmdTask(ctx, in.e, in.c, pos[0], pos[1]) })
}

// eventsOptions are the flags of every events subcommand, registered
// together: each subcommand reads those it takes.
type eventsOptions struct {
	asJSON    bool
	poll      eventsFlags
	stream    streamFlags
	receive   receiveFlags
	age       ageFlags
	subscribe subscribeFlags
}

func (o *eventsOptions) register(fs *flag.FlagSet) {
	fs.BoolVar(&o.asJSON, "json", false, "events list: print the event types as JSON; events stream: one JSON line per event; events receive: one JSON line per delivery")
	fs.IntVar(&o.poll.maxEvents, "max-events", 0, "events poll: at most this many events a poll")
	fs.BoolVar(&o.poll.follow, "follow", false, "events poll: poll until interrupted, one JSON line per event")
	fs.StringVar(&o.stream.cursor, "cursor", "", "events poll, events stream: the cursor to start from (default: now)")
	fs.Var(&o.stream.args, "arg", "events stream: an argument key=value (repeatable; the same as a positional key=value)")
	fs.StringVar(&o.receive.listen, "listen", "", "events receive: the address to receive webhooks on (e.g. 127.0.0.1:9000)")
	fs.Var(&o.receive.secrets, "secret", "events receive: a whsec_ secret deliveries are signed with (repeatable); events subscribe: the receiver's secret")
	fs.StringVar(&o.age.maxAge, "max-age", "", "events poll, stream, subscribe: skip the events after --cursor older than this (e.g. 10m)")
	fs.StringVar(&o.age.since, "since", "", "events poll, stream, subscribe: skip the events after --cursor before this RFC 3339 time")
	fs.StringVar(&o.subscribe.callback, "callback", "", "events subscribe, unsubscribe: the webhook URL events are POSTed to")
	fs.StringVar(&o.subscribe.ttl, "ttl", "", "events subscribe: the lifetime to ask for (e.g. 1h; none: no expiry; default: the server's)")
}

// runEvents parses the command line of an events subcommand, checks
// --max-age and --since (only poll, stream and subscribe take them), and
// runs the subcommand (runEventsSub).
func runEvents(ctx context.Context, in *invocation) error {
	o := &eventsOptions{}
	o.register(in.fs)
	pos, err := in.parse(-1)
	if err != nil {
		return err
	}
	if len(pos) >= 1 && (pos[0] == "poll" || pos[0] == "stream" || pos[0] == "subscribe") {
		if o.stream.maxAgeMs, err = o.age.maxAgeMs(o.stream.cursor, time.Now()); err != nil {
			return err
		}
	} else if o.age.maxAge != "" || o.age.since != "" {
		return fmt.Errorf("%w: --max-age and --since are for events poll, stream and subscribe", errUsage)
	}
	return runEventsSub(ctx, in, o, pos)
}

// runEventsSub runs the events subcommand pos names, with its arguments.
func runEventsSub(ctx context.Context, in *invocation, o *eventsOptions, pos []string) error {
	e, c := in.e, in.c
	switch {
	case len(pos) == 1 && pos[0] == "secret":
		_, err := fmt.Fprintln(e.stdout, mcp.NewWebhookSecret())
		return err
	case len(pos) >= 2 && pos[0] == "subscribe":
		secret := e.webhookSecret
		if len(o.receive.secrets) > 0 {
			secret = o.receive.secrets[0]
		}
		return c.oneShot(ctx, func(ctx context.Context) error {
			return cmdEventsSubscribe(ctx, e, c, pos[1], pos[2:], &o.subscribe, secret, &o.stream)
		})
	case len(pos) >= 2 && pos[0] == "unsubscribe":
		return c.oneShot(ctx, func(ctx context.Context) error {
			return cmdEventsUnsubscribe(ctx, e, c, pos[1], pos[2:], &o.subscribe, &o.stream)
		})
	case len(pos) == 1 && pos[0] == "list":
		return c.oneShot(ctx, func(ctx context.Context) error { return cmdEventsList(ctx, e, c, o.asJSON) })
	case len(pos) == 1 && pos[0] == "receive":
		return cmdEventsReceive(ctx, e, &o.receive, o.asJSON)
	case len(pos) >= 2 && pos[0] == "stream":
		return cmdEventsStream(ctx, e, c, pos[1], pos[2:], &o.stream, o.asJSON)
	case len(pos) >= 2 && pos[0] == "poll":
		f := &o.poll
		f.cursor, f.maxAgeMs = o.stream.cursor, o.stream.maxAgeMs
		if f.follow {
			return cmdEventsPoll(ctx, e, c, pos[1], pos[2:], f)
		}
		return c.oneShot(ctx, func(ctx context.Context) error { return cmdEventsPoll(ctx, e, c, pos[1], pos[2:], f) })
	}
	return fmt.Errorf("%w: events takes list, poll NAME [key=value ...], stream NAME [key=value ...], subscribe|unsubscribe NAME [key=value ...] --callback URL, receive --listen ADDR, or secret ('mcpush help events')", errUsage)
}

func runWatch(ctx context.Context, in *invocation) error {
	var topics topicsFlag
	in.fs.Var(&topics, "topic", "a topic to subscribe to (repeatable)")
	asJSON := in.fs.Bool("json", false, "one JSON object per line")
	if _, err := in.parse(0); err != nil {
		return err
	}
	return cmdWatch(ctx, in.e, in.c, topics, *asJSON)
}

func runPublish(ctx context.Context, in *invocation) error {
	p := &publishFlags{}
	in.fs.StringVar(&p.topicARN, "topic-arn", "", "the SNS topic ARN")
	in.fs.StringVar(&p.message, "message", "", "the message")
	in.fs.StringVar(&p.subject, "subject", "", "the subject (optional)")
	in.fs.StringVar(&p.endpointURL, "endpoint-url", "", "the SNS API endpoint (e.g. a local moto_server)")
	if _, err := in.parse(0); err != nil {
		return err
	}
	p.region = in.c.region
	return cmdPublish(ctx, in.e, p)
}

func runAdmin(ctx context.Context, in *invocation) error {
	f := &adminFlags{}
	in.fs.StringVar(&f.typ, "type", "", "admin webhooks list: the subscriptions of this event type")
	in.fs.StringVar(&f.principal, "principal", "", "admin webhooks list: the subscriptions of this principal")
	in.fs.IntVar(&f.limit, "limit", 0, "admin webhooks list: at most this many (default 1000)")
	in.fs.StringVar(&f.topic, "topic", "", "admin webhooks suspend, resume, delete, replay: the subscription's topic")
	in.fs.StringVar(&f.cursor, "cursor", "", "admin webhooks replay: deliver again the events after this cursor")
	in.fs.StringVar(&f.since, "since", "", "admin webhooks replay: deliver again the events from this RFC 3339 time")
	in.fs.BoolVar(&f.asJSON, "json", false, "print the server's answer as JSON")
	pos, err := in.parse(-1)
	if err != nil {
		return err
	}
	return in.c.oneShot(ctx, func(ctx context.Context) error { return cmdAdmin(ctx, in.e, in.c, pos, f) })
}

func runLogin(ctx context.Context, in *invocation) error {
	f := &loginFlags{}
	in.fs.StringVar(&f.clientID, "client-id", "", "a registered OAuth client id")
	in.fs.StringVar(&f.clientSecret, "client-secret", "", "its secret: the client-credentials grant")
	in.fs.StringVar(&f.scope, "scope", "", "scopes to ask for (default: what the server asks)")
	in.fs.IntVar(&f.port, "port", 0, "the loopback redirect's port (default: any free one)")
	in.fs.StringVar(&f.host, "redirect-host", "", "the loopback redirect's host (default 127.0.0.1)")
	if _, err := in.parse(0); err != nil {
		return err
	}
	return cmdLogin(ctx, in.e, in.c, f)
}
