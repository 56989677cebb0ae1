// Command mcp serves MCP over Streamable HTTP. Outside Lambda it runs a
// local HTTP server (MCPUSH_ADDR, default 127.0.0.1:8080) at /mcp. In
// Lambda (AWS_LAMBDA_RUNTIME_API is set) it serves a Function URL or an
// HTTP API instead; see package serve and docs/lambda.md.
//
// It only wires: it reads the environment, opens the store, builds the
// server with the event tools and serves it. See docs/configuration.md for the
// environment variables.
package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/config"
	awslambda "github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/mcpush/mcpush/internal/statekeys"
	"github.com/mcpush/mcpush/internal/storecount"
	"github.com/mcpush/mcpush/pkg/eventtools"
	"github.com/mcpush/mcpush/pkg/mcp"
	"github.com/mcpush/mcpush/pkg/notify"
	"github.com/mcpush/mcpush/pkg/notify/ingest"
	"github.com/mcpush/mcpush/pkg/notify/storeconfig"
	"github.com/mcpush/mcpush/pkg/serve"
	"github.com/mcpush/mcpush/pkg/webhook"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func main() {
	runtimeAPI := os.Getenv("AWS_LAMBDA_RUNTIME_API")
	logOut := os.Stderr
	if runtimeAPI != "" {
		logOut = os.Stdout
	}
	logger := serve.NewLogger(logOut)
	if err := run(logger); err != nil {
		logger.Error("mcp server failed", "err", err)
		if runtimeAPI != "" {
			if rerr := serve.ReportInitError(runtimeAPI, err); rerr != nil {
				logger.Error("reporting the init error", "err", rerr)
			}
		}
		os.Exit(1)
	}
}

// fixtures are test fixtures served beside the event tools
// (MCPUSH_FIXTURES); see fixtureSet.
type fixtures struct {
	options  func(*mcp.ServerOptions)
	register func(*mcp.Server, notify.Store)
}

// intEnv reads a positive integer from the environment; unset is 0 (the
// default).
func intEnv(name string) (int, error) {
	v := os.Getenv(name)
	if v == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("%s=%q: want a positive integer", name, v)
	}
	return n, nil
}

// run serves until a signal; in Lambda until the sandbox ends.
func run(logger *slog.Logger) error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()

	sopts, err := serve.OptionsFromEnv(os.Getenv, logger)
	if err != nil {
		return err
	}
	spec := os.Getenv("MCPUSH_STORE")
	if spec == "" {
		if sopts.RuntimeAPI != "" {
			// A SQLite file would be private to one sandbox: sessions
			// would not survive the next instance.
			return errors.New("MCPUSH_STORE is not set: in Lambda set MCPUSH_STORE=dynamodb:TABLE (template.yaml does)")
		}
		spec = storeconfig.DefaultSpec
	}
	shards, err := storeconfig.FeedShardsEnv(os.Getenv)
	if err != nil {
		return err
	}
	store, err := storecount.Open(ctx, spec, &storeconfig.Options{
		CreateTable: os.Getenv("MCPUSH_CREATE_TABLE") == "1",
		FeedShards:  shards,
	}, os.Getenv("MCPUSH_STORE_STATS"), "mcp", logger)
	if err != nil {
		return err
	}
	defer store.Close()
	logger.Info("store", "store", storeconfig.Describe(spec))

	var fix *fixtures
	if name := os.Getenv("MCPUSH_FIXTURES"); name != "" {
		if fix, err = fixtureSet(name); err != nil {
			return err
		}
	}
	opts := &mcp.ServerOptions{Logger: logger, DynamicRegistries: true, Events: true}
	for _, d := range []struct {
		name string
		dst  *time.Duration
	}{
		{"MCPUSH_POLL_INTERVAL", &opts.PollInterval},
		{"MCPUSH_REGISTRY_REFRESH", &opts.RegistryRefresh},
		{"MCPUSH_SESSION_TTL", &opts.SessionIdleTimeout},
		{"MCPUSH_TASK_TTL", &opts.Limits.TaskTTL},
		{"MCPUSH_TASK_LEASE", &opts.Tasks.Lease},
		{"MCPUSH_TASK_TIMEOUT", &opts.Tasks.Timeout},
	} {
		if *d.dst, err = serve.DurationEnv(os.Getenv, d.name); err != nil {
			return err
		}
	}
	for _, l := range []struct {
		name string
		dst  *int
	}{
		{"MCPUSH_MAX_CLIENT_INFO_BYTES", &opts.Limits.MaxClientInfoBytes},
		{"MCPUSH_MAX_PROMPT_ARGUMENT_BYTES", &opts.Limits.MaxPromptArgumentBytes},
		{"MCPUSH_MAX_PROMPT_BYTES", &opts.Limits.MaxPromptBytes},
		{"MCPUSH_MAX_SUBSCRIPTION_URI_BYTES", &opts.Limits.MaxSubscriptionURIBytes},
		{"MCPUSH_MAX_SUBSCRIPTIONS", &opts.Limits.MaxSubscriptions},
		{"MCPUSH_MAX_INFLIGHT_PER_SESSION", &opts.Limits.MaxInFlightPerSession},
		{"MCPUSH_MAX_INFLIGHT", &opts.Limits.MaxInFlight},
		{"MCPUSH_MAX_STREAMS_PER_SESSION", &opts.Limits.MaxStreamsPerSession},
		{"MCPUSH_MAX_REQUESTS_PER_MINUTE", &opts.Limits.MaxRequestsPerMinute},
		{"MCPUSH_MAX_SESSIONS_PER_HOUR", &opts.Limits.MaxSessionsPerHour},
		{"MCPUSH_MAX_SESSIONS_PER_PRINCIPAL", &opts.Limits.MaxSessionsPerPrincipal},
		{"MCPUSH_MAX_LISTENS_PER_PRINCIPAL", &opts.Limits.MaxListensPerPrincipal},
		{"MCPUSH_MAX_TASKS_PER_PRINCIPAL", &opts.Limits.MaxTasksPerPrincipal},
		{"MCPUSH_MAX_TASK_RESULT_BYTES", &opts.Limits.MaxTaskResultBytes},
		{"MCPUSH_MAX_TASK_BYTES_PER_PRINCIPAL", &opts.Limits.MaxTaskBytesPerPrincipal},
		{"MCPUSH_MAX_TASK_INPUT_ROUNDS", &opts.Limits.MaxTaskInputRounds},
		{"MCPUSH_TASK_WORKERS", &opts.Tasks.Workers},
		{"MCPUSH_TASK_WORKERS_PER_PRINCIPAL", &opts.Tasks.WorkersPerPrincipal},
	} {
		if *l.dst, err = intEnv(l.name); err != nil {
			return err
		}
	}
	if opts.Limits.BodyReadTimeout, err = serve.DurationEnv(os.Getenv, "MCPUSH_BODY_READ_TIMEOUT"); err != nil {
		return err
	}
	switch keys, secret := os.Getenv("MCPUSH_STATE_KEYS"), os.Getenv("MCPUSH_STATE_KEYS_SECRET"); {
	case keys != "" && secret != "":
		return errors.New("set MCPUSH_STATE_KEYS or MCPUSH_STATE_KEYS_SECRET, not both")
	case keys != "":
		if opts.StateKeys, err = mcp.ParseStateKeys(keys); err != nil {
			return fmt.Errorf("MCPUSH_STATE_KEYS: %w", err)
		}
	case secret != "":
		// Once per cold start: every sandbox signs with the same key.
		cfg, err := config.LoadDefaultConfig(ctx)
		if err != nil {
			return fmt.Errorf("MCPUSH_STATE_KEYS_SECRET: %w", err)
		}
		if opts.StateKeys, err = statekeys.Load(ctx, secretsmanager.NewFromConfig(cfg), secret); err != nil {
			return fmt.Errorf("MCPUSH_STATE_KEYS_SECRET: %w", err)
		}
	default:
		// Shared through the store: every process on it verifies what
		// the others sign.
		if opts.StateKeys, err = statekeys.FromStore(ctx, store); err != nil {
			return err
		}
	}
	if os.Getenv("AWS_LAMBDA_RUNTIME_API") != "" {
		// In Lambda a task runs in an invocation of its own.
		cfg, err := config.LoadDefaultConfig(ctx)
		if err != nil {
			return fmt.Errorf("tasks: loading the AWS configuration: %w", err)
		}
		opts.Tasks.Runner = &serve.SelfInvokeRunner{API: awslambda.NewFromConfig(cfg),
			FunctionName: os.Getenv("AWS_LAMBDA_FUNCTION_NAME"), Qualifier: os.Getenv("AWS_LAMBDA_FUNCTION_VERSION")}
	}
	// Webhook delivery (events/subscribe): only with authentication
	// (SEP-3415: an unauthenticated server offers poll and push, not
	// webhook); MCPUSH_WEBHOOK_ALLOW exempts named origins (local
	// receivers) from the https and address checks.
	allow, err := webhook.ParseAllow(os.Getenv(webhook.AllowEnv))
	if err != nil {
		return err
	}
	auth := sopts.Local.Auth
	if sopts.RuntimeAPI != "" {
		auth = sopts.Lambda.Auth
	}
	if auth != serve.AuthNone {
		opts.Webhooks = &mcp.WebhookOptions{Sender: webhook.NewSender(webhook.Policy{Allow: allow})}
		if opts.Webhooks.MaxPerPrincipal, err = intEnv("MCPUSH_MAX_WEBHOOKS_PER_PRINCIPAL"); err != nil {
			return err
		}
	}
	if fix != nil {
		fix.options(opts)
	}
	srv := mcp.NewServer(&mcp.Implementation{Name: "mcpush", Version: version}, store, opts)
	eventtools.Add(srv, store, &eventtools.Options{PollInterval: opts.PollInterval})
	if fix != nil {
		fix.register(srv, store)
	}
	logger.Info("store", "spec", spec)
	if os.Getenv("AWS_LAMBDA_RUNTIME_API") == "" {
		// Locally this process also retries webhook deliveries (in
		// Lambda a scheduled invocation of sns-ingest does).
		every, err := serve.DurationEnv(os.Getenv, "MCPUSH_WEBHOOK_SWEEP")
		if err != nil {
			return err
		}
		if err := sweepWebhooks(ctx, store, opts, every, logger); err != nil {
			return err
		}
	}
	return serve.Run(ctx, srv, sopts)
}

// sweepWebhooks starts a goroutine that sweeps the webhook subscriptions
// every interval (default 15 s) until ctx ends: pending retries, and
// events a crash left behind (ingest.Webhooks.Sweep). Without state keys
// shared with sns-ingest, or without webhook delivery, it does nothing.
func sweepWebhooks(ctx context.Context, store storeconfig.Store, opts *mcp.ServerOptions, every time.Duration, logger *slog.Logger) error {
	if len(opts.StateKeys) == 0 || opts.Webhooks == nil {
		return nil
	}
	if every <= 0 {
		every = 15 * time.Second
	}
	sealer, err := notify.NewSealer(opts.StateKeys, notify.WebhookSealLabel)
	if err != nil {
		return err
	}
	wh, err := ingest.NewWebhooks(ingest.WebhookOptions{Store: store, Sender: opts.Webhooks.Sender, Sealer: sealer, CursorKey: opts.StateKeys[0],
		EventTypes: ingest.RegistryEventTypes(store), Logger: logger})
	if err != nil {
		return err
	}
	go func() {
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			if c, err := wh.Sweep(ctx); err != nil || c.Claimed > 0 {
				logger.Info("webhook sweep", "claimed", c.Claimed, "delivered", c.Delivered, "abandoned", c.Abandoned, "failed", c.Failed, "err", err)
			}
		}
	}()
	return nil
}
