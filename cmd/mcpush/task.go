package main

import (
	"context"
	"fmt"

	"github.com/mcpush/mcpush/pkg/mcp"
)

// cmdTask gets (prints as JSON) or cancels a task. Tasks are of the 2026
// era: the protocol is 2026 unless --protocol says otherwise.
func cmdTask(ctx context.Context, e *env, c *common, op, id string) error {
	if c.mode == "" {
		c.mode = "2026"
	}
	return withSession(ctx, e, c, nil, func(cs *mcp.ClientSession) error {
		if op == "cancel" {
			if err := cs.CancelTask(ctx, id); err != nil {
				return err
			}
			fmt.Fprintln(e.stderr, "task "+id+": cancel requested")
			return nil
		}
		t, err := cs.GetTask(ctx, id)
		if err != nil {
			return err
		}
		return writeJSON(e.stdout, t, true)
	})
}
