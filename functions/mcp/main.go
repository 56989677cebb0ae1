// Command mcp serves MCP over Streamable HTTP. Outside Lambda it runs a
// local HTTP server (MCPUSH_ADDR, default 127.0.0.1:8080) at /mcp. In
// Lambda (AWS_LAMBDA_RUNTIME_API is set) it serves a Function URL or an
// HTTP API instead; see package serve and docs/lambda.md.
//
// It only wires: it reads the environment (package envconfig), opens the
// store, builds the server with the event tools and serves it. See
// docs/configuration.md for the environment variables.
package main

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/config"
	awslambda "github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/mcpush/mcpush/internal/statekeys"
	"github.com/mcpush/mcpush/internal/storecount"
	"github.com/mcpush/mcpush/pkg/admintools"
	"github.com/mcpush/mcpush/pkg/envconfig"
	"github.com/mcpush/mcpush/pkg/eventtools"
	"github.com/mcpush/mcpush/pkg/mcp"
	"github.com/mcpush/mcpush/pkg/metrics"
	"github.com/mcpush/mcpush/pkg/notify"
	"github.com/mcpush/mcpush/pkg/notify/delivery"
	"github.com/mcpush/mcpush/pkg/notify/storeconfig"
	"github.com/mcpush/mcpush/pkg/serve"
	"github.com/mcpush/mcpush/pkg/serve/initerror"
	"github.com/mcpush/mcpush/pkg/webhook"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func main() {
	runtimeAPI := envconfig.RuntimeAPI(os.Getenv)
	logOut := os.Stderr
	if runtimeAPI != "" {
		logOut = os.Stdout
	}
	logger := serve.NewLogger(logOut)
	if err := run(logger); err != nil {
		logger.Error("mcp server failed", "err", err)
		if runtimeAPI != "" {
			if rerr := initerror.Report(runtimeAPI, err); rerr != nil {
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
	register func(*mcp.Server, notify.Store) error
}

// run serves until a signal; in Lambda until the sandbox ends.
func run(logger *slog.Logger) error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()

	// The environment (package envconfig), read and checked before
	// anything starts.
	sopts, err := serve.OptionsFromEnv(os.Getenv, logger)
	if err != nil {
		return err
	}
	storeEnv, err := envconfig.ReadStore(os.Getenv)
	if err != nil {
		return err
	}
	env, err := envconfig.ReadServer(os.Getenv)
	if err != nil {
		return err
	}
	keysEnv, err := envconfig.ReadStateKeys(os.Getenv)
	if err != nil {
		return err
	}
	allow, err := envconfig.ReadWebhookAllow(os.Getenv)
	if err != nil {
		return err
	}
	deliveryEnv, err := envconfig.ReadDelivery(os.Getenv)
	if err != nil {
		return err
	}
	metricsEnv, err := envconfig.ReadMetrics(os.Getenv)
	if err != nil {
		return err
	}
	adminEnv, err := envconfig.ReadAdmin(os.Getenv)
	if err != nil {
		return err
	}
	// The metrics (package metrics): EMF lines on stdout once per
	// invocation in Lambda, /metrics on the local listener.
	metrics.Setup(metrics.Options{Exporter: metricsEnv.Exporter, Namespace: metricsEnv.Namespace,
		Function: cmp.Or(metricsEnv.Function, "mcp"), Out: os.Stdout})
	sopts.Local.Metrics = metricsEnv.Exporter == envconfig.MetricsPrometheus
	var fix *fixtures
	if env.Fixtures != "" {
		if fix, err = fixtureSet(env.Fixtures); err != nil {
			return err
		}
	}

	store, err := storecount.Open(ctx, storeEnv, "mcp", logger)
	if err != nil {
		return err
	}
	defer store.Close()
	logger.Info("store", "store", storeconfig.Describe(storeEnv.Spec))

	opts := &mcp.ServerOptions{
		Logger: logger, DynamicRegistries: true, Events: true,
		EventsErrors:       mcp.EventsErrors(env.EventsErrors),
		PollInterval:       env.PollInterval,
		RegistryRefresh:    env.RegistryRefresh,
		SessionIdleTimeout: env.SessionTTL,
		Limits:             mcp.Limits(env.Limits),
		Tasks: mcp.TaskOptions{
			Workers: env.Tasks.Workers, WorkersPerPrincipal: env.Tasks.WorkersPerPrincipal,
			Lease: env.Tasks.Lease, Timeout: env.Tasks.Timeout,
		},
	}
	// The keys shared by every process on the store (given, from Secrets
	// Manager, or through the store).
	if opts.StateKeys, err = statekeys.Resolve(ctx, keysEnv, store); err != nil {
		return err
	}
	if sopts.RuntimeAPI != "" {
		// In Lambda a task runs in an invocation of its own.
		cfg, err := config.LoadDefaultConfig(ctx)
		if err != nil {
			return fmt.Errorf("tasks: loading the AWS configuration: %w", err)
		}
		opts.Tasks.Runner = &serve.SelfInvokeRunner{API: awslambda.NewFromConfig(cfg),
			FunctionName: env.FunctionName, Qualifier: env.FunctionVersion}
	}
	// Webhook delivery (events/subscribe): only with authentication
	// (SEP-3415: an unauthenticated server offers poll and push, not
	// webhook); MCPUSH_WEBHOOK_ALLOW exempts named origins (local
	// receivers) from the https and address checks.
	if sopts.Auth() != serve.AuthNone {
		opts.Webhooks = &mcp.WebhookOptions{Sender: webhook.NewSender(webhook.Policy{Allow: allow}),
			MaxPerPrincipal: env.MaxWebhooksPerPrincipal}
	}
	if fix != nil {
		fix.options(opts)
	}
	srv := mcp.NewServer(&mcp.Implementation{Name: "mcpush", Version: version}, store, opts)
	eventtools.Add(srv, store, &eventtools.Options{PollInterval: opts.PollInterval})
	admin := &delivery.Admin{Store: store, EventTypes: delivery.RegistryEventTypes(store), CursorKeys: opts.StateKeys}
	if opts.Webhooks != nil {
		// The operator's view of webhook subscriptions: tools only an
		// admin (MCPUSH_ADMIN_SCOPE, MCPUSH_ADMIN_ARNS) sees.
		admintools.Add(srv, admin, admintools.Who{Scope: adminEnv.Scope, ARNs: adminEnv.ARNs})
	}
	if fix != nil {
		if err := fix.register(srv, store); err != nil {
			return err
		}
	}
	logger.Info("store", "spec", storeEnv.Spec)
	if sopts.RuntimeAPI == "" {
		// Locally this process also delivers webhooks, with an
		// in-process pool (in Lambda the delivery function works the
		// SQS queue).
		wait, pool, err := deliverWebhooks(ctx, store, opts, env.WebhookSweep, deliveryEnv, logger)
		if err != nil {
			return err
		}
		defer wait()
		if pool != nil {
			admin.Queue = pool // a resume or replay is delivered at once
		}
	}
	return serve.Run(ctx, srv, sopts)
}

// deliverWebhooks starts webhook delivery in this process: a
// delivery.Pool (MCPUSH_WEBHOOK_WORKERS workers) that watches the store's
// topic heads for events appended by any process (sns-ingest), retries on
// schedule and sweeps every interval (MCPUSH_WEBHOOK_SWEEP, default 15 s),
// until ctx ends. wait waits for its workers to release their claims.
// Without state keys shared with sns-ingest, or without webhook delivery
// (no auth), it does nothing (and returns no pool).
func deliverWebhooks(ctx context.Context, store storeconfig.Store, opts *mcp.ServerOptions, every time.Duration, d envconfig.Delivery, logger *slog.Logger) (wait func(), _ *delivery.Pool, err error) {
	if len(opts.StateKeys) == 0 || opts.Webhooks == nil {
		return func() {}, nil, nil
	}
	sealer, err := notify.NewSealer(opts.StateKeys, notify.WebhookSealLabel)
	if err != nil {
		return nil, nil, err
	}
	pool := delivery.NewPool(&delivery.PoolOptions{Workers: d.Workers, SweepInterval: every, Logger: logger})
	eng, err := delivery.New(delivery.Options{Store: store, Queue: pool, Sender: opts.Webhooks.Sender, Sealer: sealer, CursorKey: opts.StateKeys[0],
		EventTypes: delivery.RegistryEventTypes(store), PerOrigin: d.PerOrigin, EventsErrors: string(opts.EventsErrors), Logger: logger})
	if err != nil {
		return nil, nil, err
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		pool.Run(ctx, eng)
	}()
	return func() { <-done }, pool, nil
}
