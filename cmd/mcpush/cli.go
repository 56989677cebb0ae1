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
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/mcpush/mcpush/pkg/mcp"
)

// version is the CLI's version in clientInfo.
const version = "0.1.0"

// env is everything the CLI takes from its process; main builds it.
type env struct {
	stdout, stderr io.Writer
	url            string // MCPUSH_URL
	webhookSecret  string // MCPUSH_WEBHOOK_SECRET: events receive's secret without --secret
	tty            bool   // stderr is a terminal
	width          func() int
	// awsConfig loads the AWS configuration (the default credential
	// chain), in region if not empty.
	awsConfig func(ctx context.Context, region string) (aws.Config, error)
	// httpTransport, if set, is the base transport of the MCP client
	// (tests); default http.DefaultTransport.
	httpTransport http.RoundTripper
	// loginsPath is the file of the logins of mcpush login
	// ($MCPUSH_LOGINS, else the user config directory's
	// mcpush/logins.json); openBrowser shows a URL to the user.
	loginsPath  string
	openBrowser func(url string) error
}

// defaultURL is the endpoint of the local server (`make run`, the mcp
// main's default MCPUSH_ADDR) when neither --url nor MCPUSH_URL is set.
const defaultURL = "http://127.0.0.1:8080/mcp"

// common are the flags every MCP command takes.
type common struct {
	url     string
	headers headerFlag
	sigv4   bool
	region  string
	service string
	verbose bool
	mode    string
	timeout time.Duration // one-shot commands; 0: none
	idle    time.Duration // the client's IdleTimeout; 0: its default
	noLogin bool          // do not use a kept login (mcpush login itself)
}

func (c *common) register(fs *flag.FlagSet) {
	fs.StringVar(&c.url, "url", c.url, "the MCP endpoint")
	fs.Var(&c.headers, "header", "an HTTP header 'Name: value' (repeatable)")
	fs.BoolVar(&c.sigv4, "sigv4", c.sigv4, "sign requests with AWS SigV4")
	fs.StringVar(&c.region, "region", c.region, "AWS region (--sigv4, publish)")
	fs.StringVar(&c.service, "service", c.service, "SigV4 service name")
	fs.BoolVar(&c.verbose, "v", c.verbose, "verbose logging to stderr")
	fs.StringVar(&c.mode, "protocol", c.mode, "protocol era: 2025, 2026 or auto")
	fs.DurationVar(&c.timeout, "timeout", c.timeout, "give up a one-shot command after this long")
	fs.DurationVar(&c.idle, "idle-timeout", c.idle, "resume a stream silent for this long")
}

// oneShot bounds a one-shot command by --timeout, and names the flag in
// the error when it ran out.
func (c *common) oneShot(ctx context.Context, f func(ctx context.Context) error) error {
	if c.timeout <= 0 {
		return f(ctx)
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	err := f(ctx)
	if err != nil && errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return fmt.Errorf("gave up after --timeout %v: %w", c.timeout, err)
	}
	return err
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
		fmt.Fprintf(e.stderr, "mcpush: %v\n", err)
		if h := hint(err); h != "" {
			fmt.Fprintf(e.stderr, "hint: %s\n", h)
		} else {
			fmt.Fprintln(e.stderr, "run 'mcpush help' for usage")
		}
		return 2
	case ctx.Err() != nil:
		// Interrupted (ctx is cancelled by SIGINT or SIGTERM only),
		// whatever the error the interruption caused: a 2026 call's
		// stream, cut, ends "before the response".
		return 130
	default:
		fmt.Fprintf(e.stderr, "mcpush: %v\n", err)
		if h := hint(err); h != "" {
			fmt.Fprintf(e.stderr, "hint: %s\n", h)
		}
		return 1
	}
}

// hint is what to do about err, for the errors a newcomer meets: a server
// that wants a login, a capability the server needs, an unknown tool, and
// the hints a command attached (hinted).
func hint(err error) string {
	var h *hinted
	if errors.As(err, &h) {
		return h.hint
	}
	var he *mcp.HTTPError
	if errors.As(err, &he) && he.Status == http.StatusUnauthorized {
		return "the server wants a login: run 'mcpush login --url URL' (docs/auth.md), or pass --header 'Authorization: Bearer TOKEN'"
	}
	var re *mcp.Error
	if errors.As(err, &re) {
		switch {
		case re.Code == mcp.CodeMissingRequiredClientCapability:
			return "the server needs a client capability this command did not declare (tasks: --protocol 2026)"
		case re.Code == mcp.CodeInvalidParams && strings.Contains(re.Message, "unknown tool"):
			return "'mcpush tools' lists the server's tools"
		}
	}
	return ""
}

// hinted is an error with what to do about it, which run prints after it
// as "hint: ...".
type hinted struct {
	err  error
	hint string
}

func (h *hinted) Error() string { return h.err.Error() }
func (h *hinted) Unwrap() error { return h.err }

// runErr runs the command line args: the common flags, then a command
// (runner) with its own flags and arguments.
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
	name := global.Arg(0)
	if name == "help" {
		return writeHelp(e.stdout, global.Args()[1:])
	}
	fs := flag.NewFlagSet("mcpush "+name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	c.register(fs)
	r := runner(name)
	if r == nil {
		return fmt.Errorf("%w: unknown command %q", errUsage, name)
	}
	return r(ctx, &invocation{e: e, c: c, fs: fs, words: global.Args()})
}

// parse parses the flags of fs wherever they stand in args and returns the
// other arguments in order: "call NAME --url U k=v" is "call --url U NAME
// k=v". A "--" that is not a flag's value ends the flags; everything after
// it is an argument ("call NAME -- -k=v"). Every flag registered on fs,
// the common ones included, is accepted in every position.
func parse(fs *flag.FlagSet, args []string) ([]string, error) {
	end := len(args) // index of the "--" that ends the flags
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			end = i
			break
		}
		if takesValue(fs, a) {
			i++ // its value, even if it is "--"
		}
	}
	var out []string
	flags := args[:end]
	for {
		if err := fs.Parse(flags); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, err // the caller prints the command's help
			}
			return nil, fmt.Errorf("%w: %v", errUsage, err)
		}
		rest := fs.Args()
		if len(rest) == 0 {
			break
		}
		out = append(out, rest[0])
		flags = rest[1:]
	}
	if end < len(args) {
		out = append(out, args[end+1:]...)
	}
	return out, nil
}

// takesValue reports whether a is a flag of fs that takes the next
// argument as its value: "-name" or "--name" of a flag that is not
// boolean, without "=value".
func takesValue(fs *flag.FlagSet, a string) bool {
	name, ok := strings.CutPrefix(a, "-")
	if !ok || name == "" {
		return false
	}
	name = strings.TrimPrefix(name, "-")
	if name == "" || strings.Contains(name, "=") {
		return false
	}
	f := fs.Lookup(name)
	if f == nil {
		return false
	}
	b, isBool := f.Value.(interface{ IsBoolFlag() bool })
	return !isBool || !b.IsBoolFlag()
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
	if c.idle < 0 {
		return nil, fmt.Errorf("%w: --idle-timeout %v: want a positive duration", errUsage, c.idle)
	}
	o.IdleTimeout = c.idle
	if err := useLogin(ctx, e, c, &o); err != nil {
		return nil, err
	}
	level := slog.LevelError
	if c.verbose {
		level = slog.LevelDebug
	}
	o.Logger = slog.New(slog.NewTextHandler(e.stderr, &slog.HandlerOptions{Level: level}))
	return mcp.NewClient(&mcp.Implementation{Name: "mcpush-cli", Version: version}, &o), nil
}

// withSession runs f in a session with the server at --url: it builds
// the client the common flags describe with opts (newClient; nil opts: a
// one-shot client, without a standalone stream), connects, and ends the
// session when f returns (runSession).
func withSession(ctx context.Context, e *env, c *common, opts *mcp.ClientOptions, f func(cs *mcp.ClientSession) error) error {
	if opts == nil {
		opts = &mcp.ClientOptions{NoStandaloneStream: true}
	}
	client, err := newClient(ctx, e, c, opts)
	if err != nil {
		return err
	}
	return runSession(ctx, c, client, f)
}

// runSession connects client to --url, runs f in the session, and ends
// the session when f returns (closeSession).
func runSession(ctx context.Context, c *common, client *mcp.Client, f func(cs *mcp.ClientSession) error) error {
	cs, err := client.Connect(ctx, c.url)
	if err != nil {
		return err
	}
	defer closeSession(ctx, cs)
	return f(cs)
}

// cmdTools prints the server's tools sorted by name: one line each (name,
// the first line of its description), or JSON with asJSON.
func cmdTools(ctx context.Context, e *env, c *common, asJSON bool) error {
	return withSession(ctx, e, c, nil, func(cs *mcp.ClientSession) error {
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
	})
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

// How long the CLI waits for the server to answer the DELETE that ends its
// session: closeTimeout normally, interruptedClose after Ctrl-C (or
// SIGTERM), so that an interrupt exits promptly even when the server is
// slow to answer (a Lambda cold start, a server going away). A session
// whose DELETE went unanswered expires on the server (MCPUSH_SESSION_TTL).
const (
	closeTimeout     = 5 * time.Second
	interruptedClose = 300 * time.Millisecond
)

// closeSession ends cs when a command is done; ctx is the command's
// context, done after an interrupt.
func closeSession(ctx context.Context, cs *mcp.ClientSession) {
	d := closeTimeout
	if ctx.Err() != nil {
		d = interruptedClose
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), d)
	defer cancel()
	cs.Close(cctx)
}
