package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sort"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/mcpush/mcpush/pkg/mcp"
)

// version is the CLI's version in clientInfo.
const version = "0.1.0"

// env is everything the CLI takes from its process; main builds it.
type env struct {
	stdout, stderr io.Writer
	url            string // MCPUSH_URL
	tty            bool   // stderr is a terminal
	width          func() int
	// awsConfig loads the AWS configuration (the default credential
	// chain), in region if not empty.
	awsConfig func(ctx context.Context, region string) (aws.Config, error)
	// httpTransport, if set, is the base transport of the MCP client
	// (tests); default http.DefaultTransport.
	httpTransport http.RoundTripper
}

const usage = `usage: mcpush [flags] COMMAND [flags] [args]

commands:
  tools                       list the server's tools
  call NAME [key=value ...]   call a tool and print its structured content as JSON
                              (key:=JSON passes a raw JSON value); a tool the server
                              runs as a task (--protocol 2026) is waited for, its
                              status on stderr; --no-wait prints the task id instead
  task get|cancel ID          print a task as JSON, or cancel it (protocol 2026)
  watch [--topic T ...]       subscribe to events://T and print events and list_changed
        [--json]              as they arrive (one JSON object per line with --json)
  publish --topic-arn ARN --message M [--endpoint-url URL] [--region R]
                              publish to an SNS topic

flags of the MCP commands (before or after the command):
  --url URL          the MCP endpoint (default $MCPUSH_URL)
  --header 'K: V'    an HTTP header for every request (repeatable), e.g.
                     --header 'Authorization: Bearer TOKEN'
  --sigv4            sign requests with AWS SigV4 (IAM-protected Function URLs),
                     credentials from the default chain
  --region R         the region for --sigv4 (default: from the AWS configuration)
  --service S        the service for --sigv4 (default lambda)
  --protocol P       2025 (initialize, sessions; the default), 2026 (2026-07-28:
                     server/discover, subscriptions/listen) or auto (2026, else 2025)
  -v                 log the client's warnings and reconnections to stderr
`

// common are the flags every MCP command takes.
type common struct {
	url     string
	headers headerFlag
	sigv4   bool
	region  string
	service string
	verbose bool
	mode    string
}

func (c *common) register(fs *flag.FlagSet) {
	fs.StringVar(&c.url, "url", c.url, "the MCP endpoint")
	fs.Var(&c.headers, "header", "an HTTP header 'Name: value' (repeatable)")
	fs.BoolVar(&c.sigv4, "sigv4", c.sigv4, "sign requests with AWS SigV4")
	fs.StringVar(&c.region, "region", c.region, "AWS region (--sigv4, publish)")
	fs.StringVar(&c.service, "service", c.service, "SigV4 service name")
	fs.BoolVar(&c.verbose, "v", c.verbose, "verbose logging to stderr")
	fs.StringVar(&c.mode, "protocol", c.mode, "protocol era: 2025, 2026 or auto")
}

// headerFlag collects --header values.
type headerFlag []string

func (h *headerFlag) String() string { return strings.Join(*h, ", ") }
func (h *headerFlag) Set(v string) error {
	name, _, ok := strings.Cut(v, ":")
	if !ok || strings.TrimSpace(name) == "" {
		return fmt.Errorf("header %q: want 'Name: value'", v)
	}
	*h = append(*h, v)
	return nil
}

// errUsage reports a command line the CLI cannot run; it exits 2.
var errUsage = errors.New("usage")

// run runs the CLI and returns the exit status.
func run(ctx context.Context, args []string, e *env) int {
	err := runErr(ctx, args, e)
	switch {
	case err == nil:
		return 0
	case errors.Is(err, flag.ErrHelp):
		return 0
	case errors.Is(err, errUsage):
		fmt.Fprintf(e.stderr, "mcpush: %v\n\n%s", err, usage)
		return 2
	case ctx.Err() != nil && errors.Is(err, context.Canceled):
		return 130 // interrupted
	default:
		fmt.Fprintf(e.stderr, "mcpush: %v\n", err)
		return 1
	}
}

func runErr(ctx context.Context, args []string, e *env) error {
	c := &common{url: e.url, service: "lambda"}
	global := flag.NewFlagSet("mcpush", flag.ContinueOnError)
	global.SetOutput(io.Discard)
	c.register(global)
	if err := global.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(e.stdout, usage)
			return err
		}
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	if global.NArg() == 0 {
		return fmt.Errorf("%w: no command", errUsage)
	}
	cmd, rest := global.Arg(0), global.Args()[1:]
	fs := flag.NewFlagSet("mcpush "+cmd, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	c.register(fs)
	switch cmd {
	case "tools":
		asJSON := fs.Bool("json", false, "print the tools as JSON")
		if err := parse(fs, rest, e); err != nil {
			return err
		}
		return cmdTools(ctx, e, c, *asJSON)
	case "call":
		noWait := fs.Bool("no-wait", false, "print the task id of a call the server runs as a task, and return")
		if err := parse(fs, rest, e); err != nil {
			return err
		}
		if fs.NArg() == 0 {
			return fmt.Errorf("%w: call needs a tool name", errUsage)
		}
		return cmdCall(ctx, e, c, fs.Arg(0), fs.Args()[1:], *noWait)
	case "task":
		if err := parse(fs, rest, e); err != nil {
			return err
		}
		if fs.NArg() != 2 || (fs.Arg(0) != "get" && fs.Arg(0) != "cancel") {
			return fmt.Errorf("%w: task takes get ID or cancel ID", errUsage)
		}
		return cmdTask(ctx, e, c, fs.Arg(0), fs.Arg(1))
	case "watch":
		var topics topicsFlag
		fs.Var(&topics, "topic", "a topic to subscribe to (repeatable)")
		asJSON := fs.Bool("json", false, "one JSON object per line")
		if err := parse(fs, rest, e); err != nil {
			return err
		}
		if fs.NArg() > 0 {
			return fmt.Errorf("%w: watch takes no arguments, got %q", errUsage, fs.Args())
		}
		return cmdWatch(ctx, e, c, topics, *asJSON)
	case "publish":
		p := &publishFlags{}
		fs.StringVar(&p.topicARN, "topic-arn", "", "the SNS topic ARN")
		fs.StringVar(&p.message, "message", "", "the message")
		fs.StringVar(&p.subject, "subject", "", "the subject (optional)")
		fs.StringVar(&p.endpointURL, "endpoint-url", "", "the SNS API endpoint (e.g. a local moto_server)")
		if err := parse(fs, rest, e); err != nil {
			return err
		}
		p.region = c.region
		return cmdPublish(ctx, e, p)
	default:
		return fmt.Errorf("%w: unknown command %q", errUsage, cmd)
	}
}

func parse(fs *flag.FlagSet, args []string, e *env) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(e.stdout, usage)
			return err
		}
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	return nil
}

// topicsFlag collects --topic values.
type topicsFlag []string

func (t *topicsFlag) String() string { return strings.Join(*t, ",") }
func (t *topicsFlag) Set(v string) error {
	if v == "" {
		return errors.New("empty topic")
	}
	*t = append(*t, v)
	return nil
}

// newClient builds the MCP client the common flags describe.
func newClient(ctx context.Context, e *env, c *common, opts *mcp.ClientOptions) (*mcp.Client, error) {
	if c.url == "" {
		return nil, fmt.Errorf("%w: no server URL: set --url or MCPUSH_URL", errUsage)
	}
	o := *opts
	switch c.mode {
	case "", "2025":
		o.Mode = mcp.ClientMode2025
	case "2026":
		o.Mode = mcp.ClientMode2026
	case "auto":
		o.Mode = mcp.ClientModeAuto
	default:
		return nil, fmt.Errorf("%w: --protocol %q: want 2025, 2026 or auto", errUsage, c.mode)
	}
	o.Header = http.Header{}
	for _, h := range c.headers {
		name, value, _ := strings.Cut(h, ":")
		o.Header.Add(strings.TrimSpace(name), strings.TrimSpace(value))
	}
	base := e.httpTransport
	if base == nil {
		base = http.DefaultTransport
	}
	if c.sigv4 {
		cfg, err := e.awsConfig(ctx, c.region)
		if err != nil {
			return nil, fmt.Errorf("loading AWS configuration for --sigv4: %w", err)
		}
		if cfg.Region == "" {
			return nil, fmt.Errorf("%w: --sigv4 needs a region: --region or the AWS configuration", errUsage)
		}
		base = newSigV4Transport(base, cfg.Credentials, cfg.Region, c.service)
	}
	o.HTTPClient = &http.Client{Transport: base}
	level := slog.LevelError
	if c.verbose {
		level = slog.LevelDebug
	}
	o.Logger = slog.New(slog.NewTextHandler(e.stderr, &slog.HandlerOptions{Level: level}))
	return mcp.NewClient(&mcp.Implementation{Name: "mcpush-cli", Version: version}, &o), nil
}

func cmdTools(ctx context.Context, e *env, c *common, asJSON bool) error {
	client, err := newClient(ctx, e, c, &mcp.ClientOptions{NoStandaloneStream: true})
	if err != nil {
		return err
	}
	cs, err := client.Connect(ctx, c.url)
	if err != nil {
		return err
	}
	defer cs.Close(context.WithoutCancel(ctx))
	tools, err := cs.ListTools(ctx)
	if err != nil {
		return err
	}
	sort.Slice(tools, func(i, j int) bool { return tools[i].Name < tools[j].Name })
	if asJSON {
		return writeJSON(e.stdout, tools, true)
	}
	for _, t := range tools {
		desc, _, _ := strings.Cut(t.Description, "\n")
		fmt.Fprintf(e.stdout, "%s\t%s\n", t.Name, desc)
	}
	return nil
}

func writeJSON(w io.Writer, v any, indent bool) error {
	var b []byte
	var err error
	if indent {
		b, err = json.MarshalIndent(v, "", "  ")
	} else {
		b, err = json.Marshal(v)
	}
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}
