// Command counter is a complete MCP server built on mcpush: a typed tool of
// its own (count, which reports progress), mcpush's event tools and the
// events://{topic} resource, sessions that live in DynamoDB (SQLite when
// run locally), served by AWS Lambda behind a Function URL or, outside
// Lambda, at http://127.0.0.1:8090/mcp (localAddr; MCPUSH_ADDR moves it).
//
// See README.md for the deployment (sam build && sam deploy) and
// template.yaml for the environment it reads.
package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/mcpush/mcpush/pkg/envconfig"
	"github.com/mcpush/mcpush/pkg/eventtools"
	"github.com/mcpush/mcpush/pkg/mcp"
	"github.com/mcpush/mcpush/pkg/notify/storeconfig"
	"github.com/mcpush/mcpush/pkg/serve"
)

// CountInput are the arguments of count.
type CountInput struct {
	To      int `json:"to" jsonschema:"count from 1 up to this number, at most 100"`
	DelayMS int `json:"delayMs,omitempty" jsonschema:"milliseconds between two numbers, at most 1000 (default 100)"`
}

// CountOutput is the result of count.
type CountOutput struct {
	Counted []int `json:"counted"`
}

// count counts from 1 to in.To, one number every DelayMS milliseconds,
// and reports each number as progress: a client that sent a
// progressToken sees the count go up while the call runs.
func count(ctx context.Context, req *mcp.CallToolRequest, in CountInput) (*mcp.CallToolResult, CountOutput, error) {
	if in.To < 1 || in.To > 100 {
		return nil, CountOutput{}, fmt.Errorf("to must be between 1 and 100, not %d", in.To)
	}
	if in.DelayMS < 0 || in.DelayMS > 1000 {
		return nil, CountOutput{}, fmt.Errorf("delayMs must be between 0 and 1000, not %d", in.DelayMS)
	}
	delay := 100 * time.Millisecond
	if in.DelayMS > 0 {
		delay = time.Duration(in.DelayMS) * time.Millisecond
	}
	out := CountOutput{Counted: []int{}}
	for i := 1; i <= in.To; i++ {
		select {
		case <-ctx.Done():
			return nil, CountOutput{}, ctx.Err()
		case <-time.After(delay):
		}
		out.Counted = append(out.Counted, i)
		req.Session.NotifyProgress(ctx, float64(i), float64(in.To), fmt.Sprintf("counted to %d", i))
	}
	return nil, out, nil
}

func main() {
	logger := serve.NewLogger(os.Stderr)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if err := run(ctx, logger); err != nil {
		logger.Error("counter failed", "err", err)
		if api := envconfig.RuntimeAPI(os.Getenv); api != "" {
			serve.ReportInitError(api, err) // the invoker sees why
		}
		os.Exit(1)
	}
}

// localAddr is where counter listens outside Lambda unless MCPUSH_ADDR
// says otherwise: not mcpush's own 127.0.0.1:8080, so both run side by side.
const localAddr = "127.0.0.1:8090"

// run builds the server and serves it: in Lambda until the sandbox ends,
// locally until SIGTERM.
func run(ctx context.Context, logger *slog.Logger) error {
	opts, err := serve.OptionsFromEnv(os.Getenv, logger)
	if err != nil {
		return err
	}
	if opts.Local.Addr == "" {
		opts.Local.Addr = localAddr
	}
	// The store variables, read as mcpush's own functions read them
	// (envconfig.ReadStore): MCPUSH_STORE (dynamodb:TABLE in Lambda),
	// MCPUSH_CREATE_TABLE (1 or 0) and MCPUSH_FEED_SHARDS, which must be
	// the same as for the sns-ingest beside it. Locally the store is
	// counter's own file unless MCPUSH_STORE says otherwise.
	getenv := os.Getenv
	if opts.RuntimeAPI == "" && os.Getenv("MCPUSH_STORE") == "" {
		getenv = func(k string) string {
			if k == "MCPUSH_STORE" {
				return "sqlite:.mcpush/counter.db" // .mcpush/ is ignored by git
			}
			return os.Getenv(k)
		}
	}
	sc, err := envconfig.ReadStore(getenv)
	if err != nil {
		return err
	}
	store, err := storeconfig.Open(ctx, sc.Spec, &storeconfig.Options{CreateTable: sc.CreateTable, FeedShards: sc.FeedShards})
	if err != nil {
		return err
	}
	defer store.Close()

	srv := mcp.NewServer(&mcp.Implementation{Name: "counter", Version: "1.0.0"}, store,
		&mcp.ServerOptions{Logger: logger, DynamicRegistries: true})
	mcp.AddTool(srv, &mcp.Tool{Name: "count", Title: "Count",
		Description: "Counts from 1 up to a number, reporting progress at each step."}, count)
	eventtools.Add(srv, store, nil)
	return serve.Run(ctx, srv, opts)
}
