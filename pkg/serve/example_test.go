package serve_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambdaurl"

	"github.com/mcpush/mcpush/pkg/mcp"
	"github.com/mcpush/mcpush/pkg/notify/sqlitestore"
	"github.com/mcpush/mcpush/pkg/serve"
)

// The Lambda adapter serving one Function URL invocation. In a program,
// h.Start() (or serve.Run) serves the invocations of the Lambda Runtime
// API; here the invocation is handed to the handler the way lambdaurl
// does, with the IAM signer that Lambda puts in the event.
func ExampleNewLambdaHandler() {
	dir, err := os.MkdirTemp("", "serve-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	store, err := sqlitestore.New(filepath.Join(dir, "mcpush.db"), nil)
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()
	srv := mcp.NewServer(&mcp.Implementation{Name: "demo", Version: "1"}, store, nil)

	h, err := serve.NewLambdaHandler(srv, &serve.LambdaOptions{
		Mode:   serve.ModeStream, // a RESPONSE_STREAM Function URL
		Auth:   serve.AuthIAM,    // the signer's IAM ARN owns its sessions
		Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		log.Fatal(err)
	}
	defer h.Close()

	ev := &events.LambdaFunctionURLRequest{
		RawPath: "/mcp",
		Headers: map[string]string{"content-type": "application/json", "accept": "application/json, text/event-stream"},
		Body:    `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"example","version":"1"}}}`,
		RequestContext: events.LambdaFunctionURLRequestContext{
			HTTP: events.LambdaFunctionURLRequestContextHTTPDescription{Method: "POST", Path: "/mcp"},
			Authorizer: &events.LambdaFunctionURLRequestContextAuthorizerDescription{
				IAM: &events.LambdaFunctionURLRequestContextAuthorizerIAMDescription{UserARN: "arn:aws:iam::123456789012:user/alice"},
			},
		},
	}
	resp, err := lambdaurl.Wrap(h)(context.Background(), ev)
	if err != nil {
		log.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	var m struct {
		Result struct{ ServerInfo mcp.Implementation }
	}
	json.Unmarshal(body, &m)
	fmt.Println(resp.StatusCode, m.Result.ServerInfo.Name, resp.Headers["Mcp-Session-Id"] != "")
	// Output:
	// 200 demo true
}

// The end of a main: serve srv in Lambda when AWS_LAMBDA_RUNTIME_API is
// set, and on http://127.0.0.1:8080/mcp (MCPUSH_ADDR) otherwise, until
// SIGTERM.
func ExampleRun() {
	var srv *mcp.Server // mcp.NewServer(...), with its tools
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	opts, err := serve.OptionsFromEnv(os.Getenv, serve.NewLogger(os.Stderr))
	if err != nil {
		log.Fatal(err)
	}
	if err := serve.Run(ctx, srv, opts); err != nil {
		log.Fatal(err)
	}
}
