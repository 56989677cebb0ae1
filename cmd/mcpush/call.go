package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strings"

	"github.com/mcpush/mcpush/pkg/mcp"
	"github.com/schollz/progressbar/v3"
)

// errToolFailed reports a tool result with isError; its text went to stderr.
var errToolFailed = errors.New("the tool reported an error")

// cmdCall calls a tool: arguments key=value (typed by the tool's input
// schema: a property of type string takes the text as is, any other type
// takes it as JSON) or key:=JSON. It prints the structured content as
// JSON, or the text content when there is none. Progress goes to stderr:
// a bar on a terminal, one line per update otherwise.
//
// A call the server runs as a task (protocol 2026) is followed to its end,
// its status on stderr; with noWait the task id is printed instead (see
// mcpush task).
func cmdCall(ctx context.Context, e *env, c *common, name string, args []string, noWait bool) error {
	if noWait && (c.mode == "" || c.mode == "2025") {
		return fmt.Errorf("%w: --no-wait needs --protocol 2026 or auto: tasks are a 2026-era extension", errUsage)
	}
	return withSession(ctx, e, c, nil, func(cs *mcp.ClientSession) error {
		var schema *inputSchema
		if len(args) > 0 {
			tools, err := cs.ListTools(ctx)
			if err != nil {
				return err
			}
			for _, t := range tools {
				if t.Name == name {
					schema = schemaOf(t)
				}
			}
		}
		arguments, err := parseArgs(args, schema)
		if err != nil {
			return fmt.Errorf("%w: %v", errUsage, err)
		}
		pr := newProgressRenderer(e, name)
		res, task, err := cs.StartTool(ctx, name, arguments, pr.update)
		pr.finish()
		if err != nil {
			return err
		}
		if task == nil && noWait {
			fmt.Fprintf(e.stderr, "mcpush: --no-wait: %s ran in the request, not as a task (the tool does not support tasks); its result follows\n", name)
		}
		if task != nil {
			if noWait {
				fmt.Fprintln(e.stdout, task.TaskID)
				return nil
			}
			if res, err = cs.AwaitTask(ctx, task.TaskID, func(t *mcp.Task) { printTaskStatus(e, t) }); err != nil {
				return err
			}
		}
		return printResult(e, res)
	})
}

// printResult prints a tool's result: its structured content as JSON, or
// its text content; a result with isError goes to stderr.
func printResult(e *env, res *mcp.CallToolResult) error {
	if res.IsError {
		for _, c := range res.Content {
			if t, ok := c.(*mcp.TextContent); ok {
				fmt.Fprintln(e.stderr, t.Text)
			}
		}
		return errToolFailed
	}
	if raw, ok := res.StructuredContent.(json.RawMessage); ok {
		var v any
		if err := json.Unmarshal(raw, &v); err != nil {
			return fmt.Errorf("structured content: %w", err)
		}
		return writeJSON(e.stdout, v, true)
	}
	for _, c := range res.Content {
		switch c := c.(type) {
		case *mcp.TextContent:
			fmt.Fprintln(e.stdout, c.Text)
		default:
			if err := writeJSON(e.stdout, c, false); err != nil {
				return err
			}
		}
	}
	return nil
}

// printTaskStatus reports a task's status on stderr.
func printTaskStatus(e *env, t *mcp.Task) {
	line := "task " + t.TaskID + ": " + t.Status
	if t.StatusMessage != "" {
		line += ": " + t.StatusMessage
	}
	fmt.Fprintln(e.stderr, line)
}

// inputSchema is the part of a tool's input schema argument parsing uses.
type inputSchema struct {
	Properties map[string]struct {
		Type any `json:"type"` // a string or a list of strings
	} `json:"properties"`
}

func schemaOf(t *mcp.Tool) *inputSchema {
	b, err := json.Marshal(t.InputSchema)
	if err != nil {
		return nil
	}
	var s inputSchema
	if json.Unmarshal(b, &s) != nil {
		return nil
	}
	return &s
}

// isString reports whether the schema says key is only a string (or says
// nothing about key, when the schema is unknown).
func (s *inputSchema) isString(key string) bool {
	if s == nil {
		return false
	}
	p, ok := s.Properties[key]
	if !ok {
		return true
	}
	switch t := p.Type.(type) {
	case string:
		return t == "string"
	case []any:
		return len(t) == 1 && t[0] == "string"
	}
	return false
}

// parseArgs turns key=value and key:=JSON into an arguments object. With
// no schema, a value that parses as JSON is JSON and anything else a
// string.
func parseArgs(args []string, schema *inputSchema) (map[string]any, error) {
	out := map[string]any{}
	for _, a := range args {
		if k, v, ok := strings.Cut(a, ":="); ok && !strings.Contains(k, "=") {
			var x any
			if err := json.Unmarshal([]byte(v), &x); err != nil {
				return nil, fmt.Errorf("argument %s: %q is not JSON: %v", k, v, err)
			}
			out[k] = x
			continue
		}
		k, v, ok := strings.Cut(a, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("argument %q: want key=value or key:=JSON", a)
		}
		if _, dup := out[k]; dup {
			return nil, fmt.Errorf("argument %s given twice", k)
		}
		var x any
		if schema.isString(k) || json.Unmarshal([]byte(v), &x) != nil {
			out[k] = v
		} else {
			out[k] = x
		}
	}
	return out, nil
}

// progressRenderer shows a call's progress on stderr: a progress bar on a
// terminal; otherwise one line per update,
//
//	progress: 3/10 (30%) message
//	progress: 3 message          (no total)
type progressRenderer struct {
	w    io.Writer
	tty  bool
	name string
	bar  *progressbar.ProgressBar
}

func newProgressRenderer(e *env, name string) *progressRenderer {
	return &progressRenderer{w: e.stderr, tty: e.tty, name: name}
}

// percent is progress/total in whole percent, never above 100% (a
// server's progress may pass its total) and 100% only when it is reached
// (99.6% is 99%).
func percent(progress, total float64) string {
	pc := math.Floor(100 * progress / total)
	return fmt.Sprintf("%.0f%%", max(0, min(pc, 100)))
}

// barScale is the bar's resolution: progress/total in thousandths.
const barScale = 1000

func (p *progressRenderer) update(pp *mcp.ProgressParams) {
	if !p.tty {
		line := fmt.Sprintf("progress: %s", fmtNum(pp.Progress))
		if pp.Total > 0 {
			line += fmt.Sprintf("/%s (%s)", fmtNum(pp.Total), percent(pp.Progress, pp.Total))
		}
		if pp.Message != "" {
			line += " " + pp.Message
		}
		fmt.Fprintln(p.w, line)
		return
	}
	if p.bar == nil {
		max := int64(-1) // a spinner when the total is unknown
		if pp.Total > 0 {
			max = barScale
		}
		p.bar = progressbar.NewOptions64(max,
			progressbar.OptionSetWriter(p.w),
			progressbar.OptionSetDescription(p.name),
			progressbar.OptionSetWidth(30),
			progressbar.OptionThrottle(0),
		)
	}
	if pp.Message != "" {
		p.bar.Describe(p.name + ": " + pp.Message)
	}
	if pp.Total > 0 {
		p.bar.Set64(int64(barScale * min(pp.Progress/pp.Total, 1)))
	} else {
		p.bar.Set64(int64(pp.Progress))
	}
}

func (p *progressRenderer) finish() {
	if p.bar != nil {
		p.bar.Finish()
		fmt.Fprintln(p.w)
	}
}

func fmtNum(f float64) string {
	if f == float64(int64(f)) {
		return fmt.Sprint(int64(f))
	}
	return fmt.Sprintf("%.2f", f)
}
