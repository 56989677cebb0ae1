package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/mcpush/mcpush/pkg/admintools"
	"github.com/mcpush/mcpush/pkg/mcp"
	"github.com/mcpush/mcpush/pkg/notify/delivery"
)

// adminFlags are the flags of mcpush admin.
type adminFlags struct {
	typ, principal, topic, cursor, since string
	limit                                int
	asJSON                               bool
}

// cmdAdmin runs `mcpush admin webhooks OP`: the operator's view of
// webhook subscriptions, through the server's admin tools (package
// admintools), which only an admin's credentials see.
func cmdAdmin(ctx context.Context, e *env, c *common, pos []string, f *adminFlags) error {
	if len(pos) < 2 || pos[0] != "webhooks" {
		return fmt.Errorf("%w: admin takes webhooks list|counts|suspend|resume|delete|replay ('mcpush help admin')", errUsage)
	}
	op, rest := pos[1], pos[2:]
	var tool string
	args := map[string]any{}
	needID := func() error {
		if len(rest) != 1 || f.topic == "" {
			return fmt.Errorf("%w: admin webhooks %s takes a subscription id and --topic T", errUsage, op)
		}
		args["id"], args["topic"] = rest[0], f.topic
		return nil
	}
	switch op {
	case "list":
		if len(rest) != 0 {
			return fmt.Errorf("%w: admin webhooks list takes no arguments (--type T, --principal P)", errUsage)
		}
		tool = admintools.WebhooksList
		if f.typ != "" {
			args["type"] = f.typ
		}
		if f.principal != "" {
			args["principal"] = f.principal
		}
		if f.limit != 0 {
			args["limit"] = f.limit
		}
	case "counts":
		if len(rest) != 0 {
			return fmt.Errorf("%w: admin webhooks counts takes no arguments", errUsage)
		}
		tool = admintools.WebhooksCounts
	case "suspend", "resume", "delete":
		if err := needID(); err != nil {
			return err
		}
		tool = map[string]string{"suspend": admintools.WebhookSuspend, "resume": admintools.WebhookResume, "delete": admintools.WebhookDelete}[op]
	case "replay":
		if err := needID(); err != nil {
			return err
		}
		if (f.cursor == "") == (f.since == "") {
			return fmt.Errorf("%w: admin webhooks replay takes --cursor C or --since TIME (RFC 3339)", errUsage)
		}
		tool = admintools.WebhookReplay
		if f.cursor != "" {
			args["cursor"] = f.cursor
		} else {
			if _, err := time.Parse(time.RFC3339Nano, f.since); err != nil {
				return fmt.Errorf("%w: --since %q: want an RFC 3339 time such as 2026-12-02T09:00:00Z", errUsage, f.since)
			}
			args["since"] = f.since
		}
	default:
		return fmt.Errorf("%w: admin webhooks takes list, counts, suspend, resume, delete or replay, not %q", errUsage, op)
	}
	return withSession(ctx, e, c, nil, func(cs *mcp.ClientSession) error {
		res, err := cs.CallTool(ctx, tool, args, nil)
		if err != nil {
			var re *mcp.Error
			if errors.As(err, &re) && re.Code == mcp.CodeInvalidParams && strings.Contains(re.Message, "unknown tool") {
				return &hinted{err: errors.New("not an admin: the server offers its admin tools only to an admin"),
					hint: "log in with a token that has the admin scope (the server's MCPUSH_ADMIN_SCOPE, default mcpush:admin), or sign with --sigv4 as an IAM ARN listed in its MCPUSH_ADMIN_ARNS (docs/operations.md)"}
			}
			return err
		}
		if res.IsError || f.asJSON || (op != "list" && op != "counts") {
			return printResult(e, res)
		}
		raw, _ := res.StructuredContent.(json.RawMessage)
		if op == "counts" {
			var out delivery.CountsResult
			if err := json.Unmarshal(raw, &out); err != nil {
				return fmt.Errorf("the server's answer: %w", err)
			}
			fmt.Fprintf(e.stdout, "%-40s %6s %6s %8s %9s\n", "TYPE", "TOTAL", "ACTIVE", "RETRYING", "SUSPENDED")
			names := slices.Sorted(maps.Keys(out.Types))
			for _, name := range names {
				n := out.Types[name]
				fmt.Fprintf(e.stdout, "%-40s %6d %6d %8d %9d\n", name, n.Total, n.Active, n.Retrying, n.Suspended)
			}
			if out.Partial {
				fmt.Fprintf(e.stdout, "(partial: stopped after %d subscriptions)\n", out.Scanned)
			}
			return nil
		}
		var out delivery.ListResult
		if err := json.Unmarshal(raw, &out); err != nil {
			return fmt.Errorf("the server's answer: %w", err)
		}
		for _, v := range out.Subscriptions {
			fmt.Fprintf(e.stdout, "%s  topic=%s type=%s principal=%s state=%s watermark=%d url=%s\n", v.ID, v.Topic, v.Type, v.Principal, v.State, v.Watermark, v.URL)
			for _, a := range v.Attempts {
				fmt.Fprintf(e.stdout, "    %s seq=%d status=%d %s %.1fms\n", a.At.UTC().Format(time.RFC3339), a.Seq, a.Status, a.Category, a.LatencyMS)
			}
		}
		if out.Partial {
			fmt.Fprintf(e.stdout, "(partial: %d shown of %d scanned; narrow with --type or --principal)\n", len(out.Subscriptions), out.Scanned)
		}
		return nil
	})
}
