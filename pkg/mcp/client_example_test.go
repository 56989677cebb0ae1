package mcp_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"net/http/httptest"
	"os"
	"path/filepath"

	"github.com/mcpush/mcpush/pkg/mcp"
	"github.com/mcpush/mcpush/pkg/notify/sqlitestore"
)

// ExampleClient connects to an mcpush server (here one in this process,
// on a SQLite file), lists its tools and calls one with a progress
// callback.
func ExampleClient() {
	dir, _ := os.MkdirTemp("", "mcpush-example")
	defer os.RemoveAll(dir)
	store, err := sqlitestore.New(filepath.Join(dir, "mcpush.db"), nil)
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()
	srv := mcp.NewServer(&mcp.Implementation{Name: "example", Version: "1"}, store, nil)
	type in struct {
		N int `json:"n"`
	}
	type out struct {
		Sum int `json:"sum"`
	}
	mcp.AddTool(srv, &mcp.Tool{Name: "sum", Description: "adds 1..n"}, func(ctx context.Context, req *mcp.CallToolRequest, in in) (*mcp.CallToolResult, out, error) {
		sum := 0
		for i := 1; i <= in.N; i++ {
			sum += i
		}
		req.Session.NotifyProgress(ctx, float64(in.N), float64(in.N), "done")
		return nil, out{Sum: sum}, nil
	})
	h := mcp.NewStreamableHandler(srv, nil)
	defer h.Close()
	ts := httptest.NewServer(h)
	defer ts.Close()

	ctx := context.Background()
	client := mcp.NewClient(&mcp.Implementation{Name: "example-client", Version: "1"}, nil)
	cs, err := client.Connect(ctx, ts.URL)
	if err != nil {
		log.Fatal(err)
	}
	defer cs.Close(ctx)
	tools, err := cs.ListTools(ctx)
	if err != nil {
		log.Fatal(err)
	}
	for _, t := range tools {
		fmt.Println("tool:", t.Name)
	}
	res, err := cs.CallTool(ctx, "sum", map[string]int{"n": 10}, func(p *mcp.ProgressParams) {
		fmt.Printf("progress: %g/%g %s\n", p.Progress, p.Total, p.Message)
	})
	if err != nil {
		log.Fatal(err)
	}
	var got out
	json.Unmarshal(res.StructuredContent.(json.RawMessage), &got)
	fmt.Println("sum:", got.Sum)
	// Output:
	// tool: sum
	// progress: 10/10 done
	// sum: 55
}
