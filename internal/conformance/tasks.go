package conformance

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/mcpush/mcpush/pkg/mcp"
)

// The fixtures of the tasks scenarios (io.modelcontextprotocol/tasks,
// SEP-2663): a tool that never runs as a task (greet), tools that run as
// one when the client declares the extension (slow_compute,
// protocol_error_job, confirm_delete, multi_input) and tools that run
// only as one (failing_job, test_tool_with_task).

func props(p map[string]any, required ...string) map[string]any {
	s := map[string]any{"type": "object", "properties": p}
	if len(required) > 0 {
		s["required"] = required
	}
	return s
}

func registerTasks(s *mcp.Server) {
	str := map[string]any{"type": "string"}
	s.AddTool(&mcp.Tool{Name: "greet", Description: "Greets someone, at once (never a task)", InputSchema: props(map[string]any{"name": str}, "name")},
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			var a struct{ Name string }
			_ = json.Unmarshal(req.Params.Arguments, &a)
			return text("Hello, " + a.Name + "!"), nil
		})
	s.AddTaskTool(&mcp.Tool{Name: "slow_compute", Description: "Computes for `seconds` seconds (a task when the client supports tasks)",
		InputSchema: props(map[string]any{"seconds": map[string]any{"type": "number"}, "label": str})},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			var a struct {
				Seconds float64
				Label   string
			}
			_ = json.Unmarshal(req.Params.Arguments, &a)
			d := time.Duration(min(max(a.Seconds, 0), 600) * float64(time.Second))
			_ = mcp.SetTaskStatus(ctx, fmt.Sprintf("computing %s for %v", a.Label, d))
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-time.After(d):
			}
			return text(fmt.Sprintf("Computed %s in %v", a.Label, d)), nil
		}, nil)
	s.AddTaskTool(&mcp.Tool{Name: "failing_job", Description: "Fails with a tool error after a second (only as a task)", InputSchema: noArguments()},
		func(ctx context.Context, _ *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-time.After(time.Second):
			}
			r := text("failing_job failed: the job's input was rejected")
			r.IsError = true
			return r, nil
		}, &mcp.TaskToolOptions{Support: mcp.TaskRequired})
	s.AddTaskTool(&mcp.Tool{Name: "protocol_error_job", Description: "Panics, which is a protocol error (a failed task)", InputSchema: noArguments()},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			panic("protocol_error_job: deliberate failure")
		}, nil)
	confirm := props(map[string]any{"confirm": map[string]any{"type": "boolean"}}, "confirm")
	s.AddTaskTool(&mcp.Tool{Name: "confirm_delete", Description: "Asks to confirm, then deletes a file (pretend)", InputSchema: props(map[string]any{"filename": str}, "filename")},
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			if r := only2026(req); r != nil {
				return r, nil
			}
			var a struct{ Filename string }
			_ = json.Unmarshal(req.Params.Arguments, &a)
			reqs := map[string]*mcp.InputRequest{"confirm_delete": elicitRequest("Delete "+a.Filename+"?", confirm)}
			if missing := need(req.InputResponses, reqs); missing != nil {
				return nil, &mcp.InputRequired{Requests: missing}
			}
			var r mcp.ElicitResult
			_ = json.Unmarshal(req.InputResponses["confirm_delete"], &r)
			if r.Action != "accept" {
				return text("Kept " + a.Filename), nil
			}
			return text("Deleted " + a.Filename), nil
		}, nil)
	both := props(map[string]any{"name": str, "confirm": map[string]any{"type": "boolean"}})
	s.AddTaskTool(&mcp.Tool{Name: "multi_input", Description: "Asks two questions at once", InputSchema: noArguments()},
		mrtrTool(map[string]*mcp.InputRequest{
			"first":  elicitRequest("First question", both),
			"second": elicitRequest("Second question", both),
		}, nil, func(req *mcp.CallToolRequest) *mcp.CallToolResult {
			return text("Answers: " + elicited(req.InputResponses["first"], "name") + ", " + elicited(req.InputResponses["second"], "name"))
		}), nil)
	userName := map[string]*mcp.InputRequest{"user_name": elicitRequest("What is your name?", nameSchema("name"))}
	s.AddTaskTool(&mcp.Tool{Name: "test_tool_with_task", Description: "Asks for a name in the request, then greets in a task", InputSchema: noArguments()},
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return text("Hello, " + elicited(req.InputResponses["user_name"], "name") + "!"), nil
		}, &mcp.TaskToolOptions{Support: mcp.TaskRequired, Prepare: func(_ context.Context, req *mcp.CallToolRequest) error {
			if missing := need(req.InputResponses, userName); missing != nil {
				return &mcp.InputRequired{Requests: missing}
			}
			return nil
		}})
}

// registerCustomHeaders adds the tool of the custom-header scenario
// (SEP-2243): parameters mirrored in Mcp-Param-* headers.
func registerCustomHeaders(s *mcp.Server) {
	s.AddTool(&mcp.Tool{Name: "test_custom_headers", Description: "Echoes parameters that clients mirror in Mcp-Param headers",
		InputSchema: props(map[string]any{
			"region":   map[string]any{"type": "string", "x-mcp-header": "Region"},
			"priority": map[string]any{"type": "integer", "x-mcp-header": "Priority"},
			"verbose":  map[string]any{"type": "boolean", "x-mcp-header": "Verbose"},
			"query":    map[string]any{"type": "string"},
		}, "region")},
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return text("arguments: " + string(req.Params.Arguments)), nil
		})
}
