// Package admintools adds the operator's view of webhook subscriptions
// ([delivery.Admin]) to an [*mcp.Server] as tools that only an admin sees
// and calls ([mcp.Server.GuardTool]): a caller whose OAuth token has the
// admin scope (MCPUSH_ADMIN_SCOPE, default mcpush:admin), or an IAM
// caller whose ARN is listed (MCPUSH_ADMIN_ARNS); [Who] says which, and
// [Add] registers the tools. To anyone else the tools do not exist:
// tools/list leaves them out and tools/call answers as for an unknown
// tool. `mcpush admin` calls them.
//
//   - admin_webhooks_list: subscriptions by event type or principal,
//     with state and last attempts;
//   - admin_webhooks_counts: subscriptions per event type and state;
//   - admin_webhook_suspend, admin_webhook_resume, admin_webhook_delete;
//   - admin_webhook_replay: from a cursor or a time.
//
// Nothing they return holds a secret ([delivery.View]).
package admintools

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/mcpush/mcpush/pkg/mcp"
	"github.com/mcpush/mcpush/pkg/notify"
	"github.com/mcpush/mcpush/pkg/notify/delivery"
)

// Tool names.
const (
	WebhooksList   = "admin_webhooks_list"
	WebhooksCounts = "admin_webhooks_counts"
	WebhookSuspend = "admin_webhook_suspend"
	WebhookResume  = "admin_webhook_resume"
	WebhookDelete  = "admin_webhook_delete"
	WebhookReplay  = "admin_webhook_replay"
)

// Names lists the tools Add registers.
var Names = []string{WebhookDelete, WebhookReplay, WebhookResume, WebhookSuspend, WebhooksCounts, WebhooksList}

// Who says which callers are admins.
type Who struct {
	// Scope: a caller whose claims have this scope ("" : none).
	Scope string
	// ARNs: a caller whose claim "arn" (an IAM caller's) is one of
	// these.
	ARNs []string
}

// Admits reports whether a caller with claims is an admin.
func (w Who) Admits(c notify.Claims) bool {
	if w.Scope != "" && slices.Contains(c.Scopes(), w.Scope) {
		return true
	}
	arn, _ := c["arn"].(string)
	return arn != "" && slices.Contains(w.ARNs, arn)
}

// Add registers the admin tools on s, working on a, guarded by who.
// Call it before serving s.
func Add(s *mcp.Server, a *delivery.Admin, who Who) {
	t := &tools{a: a}
	guard := func(_ context.Context, r *mcp.AccessRequest) bool { return who.Admits(r.Claims) }
	admin := &mcp.ToolAnnotations{}
	readOnly := &mcp.ToolAnnotations{ReadOnlyHint: true}
	mcp.AddTool(s, &mcp.Tool{Name: WebhooksList, Title: "Webhook subscriptions (admin)", Annotations: readOnly,
		Description: "Lists webhook subscriptions of an event type or a principal (or all), with state and last delivery attempts. Never shows a secret."}, t.list)
	mcp.AddTool(s, &mcp.Tool{Name: WebhooksCounts, Title: "Webhook subscriptions per type (admin)", Annotations: readOnly,
		Description: "Counts webhook subscriptions per event type and state."}, t.counts)
	mcp.AddTool(s, &mcp.Tool{Name: WebhookSuspend, Title: "Suspend a webhook subscription (admin)", Annotations: admin,
		Description: "Stops delivery to a subscription until resumed (or refreshed by its subscriber)."}, t.suspend)
	mcp.AddTool(s, &mcp.Tool{Name: WebhookResume, Title: "Resume a webhook subscription (admin)", Annotations: admin,
		Description: "Reactivates a subscription; a pending retry is due at once."}, t.resume)
	mcp.AddTool(s, &mcp.Tool{Name: WebhookDelete, Title: "Delete a webhook subscription (admin)", Annotations: admin,
		Description: "Deletes a subscription."}, t.delete)
	mcp.AddTool(s, &mcp.Tool{Name: WebhookReplay, Title: "Replay a webhook subscription (admin)", Annotations: admin,
		Description: "Delivers again the events after a cursor, or from a time (RFC 3339) on."}, t.replay)
	for _, n := range Names {
		s.GuardTool(n, guard)
	}
}

type tools struct{ a *delivery.Admin }

// ListInput is admin_webhooks_list's arguments.
type ListInput struct {
	Type      string `json:"type,omitempty" jsonschema:"an event type: its subscriptions only"`
	Principal string `json:"principal,omitempty" jsonschema:"a principal: its subscriptions only"`
	Limit     int    `json:"limit,omitempty" jsonschema:"at most this many (1 to 1000; default 1000)"`
}

func (t *tools) list(ctx context.Context, _ *mcp.CallToolRequest, in ListInput) (*mcp.CallToolResult, delivery.ListResult, error) {
	res, err := t.a.List(ctx, delivery.Filter{Type: in.Type, Principal: in.Principal, Limit: in.Limit})
	if err != nil {
		return nil, delivery.ListResult{}, answer(err)
	}
	return nil, *res, nil
}

func (t *tools) counts(ctx context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, delivery.CountsResult, error) {
	res, err := t.a.Counts(ctx)
	if err != nil {
		return nil, delivery.CountsResult{}, answer(err)
	}
	return nil, *res, nil
}

// Ref names a subscription.
type Ref struct {
	Topic string `json:"topic" jsonschema:"the subscription's topic"`
	ID    string `json:"id" jsonschema:"the subscription's id (sub_...)"`
}

// Output is the result of a change: the subscription as it is now.
type Output struct {
	Subscription *delivery.View `json:"subscription,omitempty"`
	Deleted      bool           `json:"deleted,omitempty"`
}

func (t *tools) suspend(ctx context.Context, _ *mcp.CallToolRequest, in Ref) (*mcp.CallToolResult, Output, error) {
	v, err := t.a.Suspend(ctx, in.Topic, in.ID)
	return nil, Output{Subscription: v}, answer(err)
}

func (t *tools) resume(ctx context.Context, _ *mcp.CallToolRequest, in Ref) (*mcp.CallToolResult, Output, error) {
	v, err := t.a.Resume(ctx, in.Topic, in.ID)
	return nil, Output{Subscription: v}, answer(err)
}

func (t *tools) delete(ctx context.Context, _ *mcp.CallToolRequest, in Ref) (*mcp.CallToolResult, Output, error) {
	err := t.a.Delete(ctx, in.Topic, in.ID)
	return nil, Output{Deleted: err == nil}, answer(err)
}

// ReplayInput is admin_webhook_replay's arguments.
type ReplayInput struct {
	Topic  string `json:"topic" jsonschema:"the subscription's topic"`
	ID     string `json:"id" jsonschema:"the subscription's id (sub_...)"`
	Cursor string `json:"cursor,omitempty" jsonschema:"replay the events after this cursor (one of the subscription's deliveries)"`
	Since  string `json:"since,omitempty" jsonschema:"replay the events received at or after this time (RFC 3339)"`
}

func (t *tools) replay(ctx context.Context, _ *mcp.CallToolRequest, in ReplayInput) (*mcp.CallToolResult, Output, error) {
	from := delivery.ReplayFrom{Cursor: in.Cursor}
	if in.Since != "" {
		at, err := time.Parse(time.RFC3339Nano, in.Since)
		if err != nil {
			return nil, Output{}, fmt.Errorf("since %q is not an RFC 3339 time (2026-12-02T09:00:00Z)", clip(in.Since))
		}
		from.Since = at
	}
	v, err := t.a.Replay(ctx, in.Topic, in.ID, from)
	return nil, Output{Subscription: v}, answer(err)
}

// answer returns err as the tool's answer: an operator's mistake or a
// busy subscription as a tool error that says what to do, anything else
// (a store failure) as an internal error, whose detail stays in the log.
func answer(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, notify.ErrNotFound):
		return errors.New("no such webhook subscription (check its topic and id)")
	case errors.Is(err, delivery.ErrAdminInput), errors.Is(err, delivery.ErrBusy):
		return err
	}
	return mcp.InternalError(err)
}

func clip(s string) string {
	if len(s) > 64 {
		return s[:64] + "..."
	}
	return s
}
