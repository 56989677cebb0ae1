package serve

import (
	"context"
	"io"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambdacontext"
	"github.com/aws/aws-lambda-go/lambdaurl"
	"github.com/awslabs/aws-lambda-go-api-proxy/httpadapter"
	"github.com/mcpush/mcpush/pkg/mcp"
	"github.com/mcpush/mcpush/pkg/notify/sqlitestore"
)

// TestAnonymousQuotaPerSourceIP: with AuthType NONE the live-session bound
// counts per caller address, the request's source IP, in both modes: a
// second session from one IP is refused at a bound of 1, one from another
// IP is not; and an anonymous session is usable from another IP.
func TestAnonymousQuotaPerSourceIP(t *testing.T) {
	for _, mode := range modes {
		t.Run(string(mode), func(t *testing.T) {
			store, err := sqlitestore.New(filepath.Join(t.TempDir(), "mcpush.db"), nil)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { store.Close() })
			srv := mcp.NewServer(&mcp.Implementation{Name: "mcpush", Version: "test"}, store,
				&mcp.ServerOptions{Limits: mcp.Limits{MaxSessionsPerPrincipal: 1}})
			h, err := NewLambdaHandler(srv, &LambdaOptions{Mode: mode, Auth: AuthNone})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(h.Close)
			post := func(ip, session, body string) (int, map[string]string) {
				t.Helper()
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				ctx = lambdacontext.NewContext(ctx, &lambdacontext.LambdaContext{AwsRequestID: "req-1"})
				hdr := map[string]string{"accept": "application/json, text/event-stream", "content-type": "application/json"}
				if session != "" {
					hdr["mcp-session-id"] = session
				}
				if mode == ModeStream {
					resp, err := lambdaurl.Wrap(h)(ctx, &events.LambdaFunctionURLRequest{
						RawPath: "/mcp", Headers: hdr, Body: body,
						RequestContext: events.LambdaFunctionURLRequestContext{
							DomainName: "x.lambda-url.us-east-1.on.aws",
							HTTP:       events.LambdaFunctionURLRequestContextHTTPDescription{Method: "POST", Path: "/mcp", SourceIP: ip},
						},
					})
					if err != nil {
						t.Fatal(err)
					}
					if _, err := io.ReadAll(resp.Body); err != nil { // the handler writes it as it runs
						t.Fatal(err)
					}
					return resp.StatusCode, resp.Headers
				}
				resp, err := httpadapter.NewV2(h).ProxyWithContext(ctx, events.APIGatewayV2HTTPRequest{
					RawPath: "/mcp", Headers: hdr, Body: body,
					RequestContext: events.APIGatewayV2HTTPRequestContext{
						DomainName: "x.execute-api.us-east-1.amazonaws.com",
						HTTP:       events.APIGatewayV2HTTPRequestContextHTTPDescription{Method: "POST", Path: "/mcp", SourceIP: ip},
					},
				})
				if err != nil {
					t.Fatal(err)
				}
				return resp.StatusCode, resp.Headers
			}
			const init = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`
			code, hdr := post("198.51.100.1", "", init)
			session := hdr["Mcp-Session-Id"]
			if code != http.StatusOK || session == "" {
				t.Fatalf("first initialize from 198.51.100.1: %d %v", code, hdr)
			}
			if code, _ := post("198.51.100.1", "", init); code != http.StatusTooManyRequests {
				t.Errorf("second initialize from 198.51.100.1: %d, want 429 (its bound is 1)", code)
			}
			if code, _ := post("198.51.100.2", "", init); code != http.StatusOK {
				t.Errorf("initialize from 198.51.100.2: %d, want 200 (a bound of its own)", code)
			}
			if code, _ := post("198.51.100.2", session, `{"jsonrpc":"2.0","id":2,"method":"ping"}`); code != http.StatusOK {
				t.Errorf("198.51.100.1's session used from 198.51.100.2: %d, want 200", code)
			}
			if n, err := store.CountSessions(t.Context(), "addr:198.51.100.1", 10); err != nil || n != 1 {
				t.Errorf("sessions counted for addr:198.51.100.1: %d, %v; want 1", n, err)
			}
		})
	}
}
