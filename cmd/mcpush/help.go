package main

import (
	"fmt"
	"io"
	"strings"
)

// command is one command's entry in the help: its usage block (as the
// full help lists it) and one example.
type command struct {
	name    string // "tools", "events poll"
	usage   string // the usage block: synopsis and description, indented as in the full help
	example string // one command line
	mcp     bool   // it takes the flags of the MCP commands
}

// commands are the CLI's commands in the order of the full help. The
// full help, `mcpush help COMMAND` and `mcpush COMMAND --help` are all
// made from them.
var commands = []command{
	{name: "tools", mcp: true, example: "mcpush tools --url https://example.lambda-url.us-east-1.on.aws/mcp", usage: `
  tools [--json]              list the server's tools (--json: as the server lists them)`},
	{name: "call", mcp: true, example: "mcpush call events_recent topic=orders limit:=5", usage: `
  call NAME [key=value ...]   call a tool and print its structured content as JSON
                              (key:=JSON passes a raw JSON value); a tool the server
                              runs as a task (--protocol 2026) is waited for, its
                              status on stderr; --no-wait prints the task id instead`},
	{name: "task", mcp: true, example: "mcpush --protocol 2026 task get task_0123abcd", usage: `
  task get|cancel ID          print a task as JSON, or cancel it (protocol 2026)`},
	{name: "watch", mcp: true, example: "mcpush watch --topic orders --json", usage: `
  watch [--topic T ...]       subscribe to events://T and print events and list_changed
        [--json]              as they arrive (one JSON object per line with --json)`},
	{name: "events list", mcp: true, example: "mcpush events list --json", usage: `
  events list [--json]        list the server's event types (the Events extension)`},
	{name: "events poll", mcp: true, example: "mcpush events poll order.created region=eu --cursor ev1.… --max-age 10m", usage: `
  events poll NAME [key=value ...] [--cursor C [--max-age D | --since T]] [--max-events N] [--follow]
                              poll an event type (arguments filter on the events'
                              data) and print the result as JSON; without --cursor
                              from now; --follow polls until interrupted, one JSON
                              line per event, then prints the cursor to resume from;
                              --max-age D (e.g. 10m) or --since T (RFC 3339) skips
                              the events after the cursor older than that
                              (maxAgeMs; needs --cursor: without one, events start
                              from now)`},
	{name: "events stream", mcp: true, example: "mcpush events stream order.created region=eu", usage: `
  events stream NAME [key=value ...] [--arg key=value] [--cursor C [--max-age D | --since T]] [--json]
                              hold a push stream of an event type (events/stream)
                              and print each event as one line (timestamp, name,
                              eventId, data, cursor; --json: one JSON line) until
                              interrupted; reconnects from the last cursor when the
                              server ends the stream, then prints the cursor;
                              --max-age, --since: as for events poll`},
	{name: "events receive", example: "mcpush events receive --listen 127.0.0.1:9000", usage: `
  events receive --listen ADDR [--secret whsec_...] [--json]
                              a local webhook receiver: answers the verification
                              handshake, verifies every delivery's signature (401
                              if it does not, and says so on stderr), prints each
                              event as one line (subscription, timestamp, name,
                              eventId, data, cursor; --json: one JSON line per
                              delivery) until interrupted; --secret is repeatable
                              (a rotation), else $MCPUSH_WEBHOOK_SECRET, else one
                              is generated and printed on stderr: give the same to
                              events subscribe. Set MCPUSH_WEBHOOK_ALLOW to its
                              origin where the server AND sns-ingest run`},
	{name: "events subscribe", mcp: true, example: "mcpush events subscribe order.created region=eu --callback http://127.0.0.1:9000/hook --secret whsec_…", usage: `
  events subscribe NAME [key=value ...] --callback URL --secret whsec_... [--ttl D|none] [--cursor C]
                              subscribe a webhook to an event type (events/subscribe;
                              needs a server with MCPUSH_AUTH=oauth or iam and a
                              login) and print the result (id, refreshBefore,
                              cursor, deliveryStatus); --secret (or
                              $MCPUSH_WEBHOOK_SECRET) is the receiver's: start the
                              receiver first (events receive prints one), since the
                              server verifies the callback within this call; the
                              same command again refreshes it`},
	{name: "events unsubscribe", mcp: true, example: "mcpush events unsubscribe order.created region=eu --callback http://127.0.0.1:9000/hook", usage: `
  events unsubscribe NAME [key=value ...] --callback URL
                              end that webhook subscription (events/unsubscribe)`},
	{name: "events secret", example: "mcpush events secret", usage: `
  events secret               print a new webhook secret (whsec_ and 32 random bytes)
                              for events receive and events subscribe`},
	{name: "publish", example: "mcpush publish --topic-arn arn:aws:sns:us-east-1:123456789012:mcpush-events --message '{\"id\":42}'", usage: `
  publish --topic-arn ARN --message M [--endpoint-url URL] [--region R]
                              publish to an SNS topic`},
	{name: "login", mcp: true, example: "mcpush login --url https://example.lambda-url.us-east-1.on.aws/mcp", usage: `
  login [--client-id ID [--client-secret S]] [--scope S] [--port P] [--redirect-host H]
                              sign in to an OAuth-protected server: in the browser
                              (authorization code with PKCE), or with --client-secret
                              as a machine (client credentials); the other commands
                              then use the kept token (refreshed as it expires);
                              --redirect-host: the loopback redirect's host
                              (default 127.0.0.1; localhost where a client was
                              registered with it)`},
	{name: "admin", mcp: true, example: "mcpush admin webhooks list --type order.created", usage: `
  admin webhooks list [--type T | --principal P] [--limit N] [--json]
  admin webhooks counts | suspend|resume|delete ID --topic T
  admin webhooks replay ID --topic T (--cursor C | --since TIME)
                              the operator's view of webhook subscriptions (needs
                              an admin: a login with the server's admin scope, or
                              --sigv4 as an ARN in its MCPUSH_ADMIN_ARNS): list
                              with state and last attempts, counts per type,
                              suspend, resume, delete, or deliver again from a
                              cursor or a time. Never shows a secret`},
	{name: "help", example: "mcpush help events poll", usage: `
  help [COMMAND]              print this help, or one command's (also COMMAND --help)`},
}

const usageHeader = `usage: mcpush [flags] COMMAND [flags] [args] [-- args]

commands:`

const usageFooter = `

Flags go anywhere after mcpush: before or after the command, the tool name
and the tool arguments; -- ends the flags (what follows are arguments).
'mcpush help COMMAND' (or 'mcpush COMMAND --help') prints one command's help.

`

// commonFlags is the help of the flags every MCP command takes.
const commonFlags = `flags of the MCP commands:
  --url URL          the MCP endpoint (default $MCPUSH_URL, else the local
                     server http://127.0.0.1:8080/mcp)
  --header 'K: V'    an HTTP header for every request (repeatable), e.g.
                     --header 'Authorization: Bearer TOKEN'
  --sigv4            sign requests with AWS SigV4 (IAM-protected Function URLs),
                     credentials from the default chain
  --region R         the region for --sigv4 (default: from the AWS configuration)
  --service S        the service for --sigv4 (default lambda)
  --protocol P       2025 (initialize, sessions; the default), 2026 (2026-07-28:
                     server/discover, subscriptions/listen) or auto (2026, else 2025)
  --timeout D        tools, call: give up after D (e.g. 30s, 5m; default: none)
  --idle-timeout D   resume a stream on which nothing arrived for D (default 60s)
  -v                 log the client's warnings and reconnections to stderr
`

// usage is the full help: every command, then the common flags.
var usage = func() string {
	var b strings.Builder
	b.WriteString(usageHeader)
	for _, c := range commands {
		b.WriteString(c.usage)
	}
	b.WriteString(usageFooter)
	b.WriteString(commonFlags)
	return b.String()
}()

// findCommand returns the command that args name: "events poll" for
// ["events", "poll", ...], "tools" for ["tools"]; for "events" alone, or
// an events subcommand it does not know, the name "events" and every
// events command.
func findCommand(args []string) (string, []command) {
	if len(args) == 0 {
		return "", nil
	}
	name := args[0]
	if name == "events" {
		for _, a := range args[1:] {
			if strings.HasPrefix(a, "-") {
				continue
			}
			for _, c := range commands {
				if c.name == "events "+a {
					return c.name, []command{c}
				}
			}
			break
		}
		var all []command
		for _, c := range commands {
			if strings.HasPrefix(c.name, "events ") {
				all = append(all, c)
			}
		}
		return "events", all
	}
	for _, c := range commands {
		if c.name == name {
			return name, []command{c}
		}
	}
	return name, nil
}

// writeHelp writes the help of the commands args name (the whole help
// for none); an unknown command is a usage error.
func writeHelp(w io.Writer, args []string) error {
	name, cs := findCommand(args)
	if name == "" {
		_, err := io.WriteString(w, usage)
		return err
	}
	if len(cs) == 0 {
		return fmt.Errorf("%w: no command %q (run 'mcpush help' for the commands)", errUsage, name)
	}
	var b strings.Builder
	b.WriteString("usage:")
	mcp := false
	for _, c := range cs {
		b.WriteString(c.usage)
		mcp = mcp || c.mcp
	}
	if len(cs) == 1 {
		b.WriteString("\n\nexample:\n")
	} else {
		b.WriteString("\n\nexamples:\n")
	}
	for _, c := range cs {
		b.WriteString("  " + c.example + "\n")
	}
	if mcp {
		b.WriteString("\nand the flags of the MCP commands (--url, --header, --protocol, ...): run 'mcpush help'\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}
