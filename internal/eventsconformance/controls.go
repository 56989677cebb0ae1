package eventsconformance

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/mcpush/mcpush/pkg/mcp"
	"github.com/mcpush/mcpush/pkg/notify"
	"github.com/mcpush/mcpush/pkg/notify/delivery"
	"github.com/mcpush/mcpush/pkg/notify/eventcursor"
	"github.com/mcpush/mcpush/pkg/webhook"
)

// The names of the controls, as the suite looks for them (its helpers.ts).
const (
	ToolYieldError          = "events_conformance_yield_error"
	ToolYieldGap            = "events_conformance_yield_gap"
	ToolTerminate           = "events_conformance_terminate"
	ToolSubscribeAs         = "events_conformance_subscribe_as"
	ToolAllowCallbackOrigin = "events_conformance_allow_callback_origin"
	ToolQuota               = "events_conformance_quota"
	ToolWebhookGap          = "events_conformance_webhook_gap"
	ToolWebhookTerminate    = "events_conformance_webhook_terminate"
	ToolSubscriptionExists  = "events_conformance_subscription_exists"
	ToolSubscriptionState   = "events_conformance_subscription_state"
	ToolRestart             = "events_conformance_restart"
	ToolGeneration          = "events_conformance_generation"
)

// Bounds of the controls' arguments.
const (
	maxArgumentsBytes = 16 << 10 // a control's arguments
	maxPrincipal      = 256      // subscribe_as's and subscription_exists's principal
	maxID             = 64       // a subscription id (sub_ and 32 hex digits)
)

// The subscription states of events_conformance_subscription_state.
const (
	StateActive    = "active"
	StateSuspended = "suspended"
	StateAbsent    = "absent"
)

// Register adds the controls to s, whose store st is. The webhook
// controls are added only when the server delivers webhooks (Configure
// saw webhook options).
func (c *Controls) Register(s *mcp.Server, st Store) {
	name := schema(map[string]any{"name": prop("string", "The event type.")}, "name")
	for tool, fault := range map[string]mcp.EventFault{ToolYieldError: mcp.FaultUpstreamError, ToolYieldGap: mcp.FaultGap, ToolTerminate: mcp.FaultTerminate} {
		s.AddTool(&mcp.Tool{Name: tool, Description: faultDescriptions[fault], InputSchema: name}, c.faultTool(st, fault))
	}
	s.AddTool(&mcp.Tool{Name: ToolQuota, Description: `Answers one per-event-type subscription cap this server enforces, as JSON text {"name", "max"}: the open events/stream streams of one principal (MCPUSH_MAX_LISTENS_PER_PRINCIPAL), which count every event type.`,
		InputSchema: schema(nil)}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		b, _ := json.Marshal(map[string]any{"name": EventsType, "max": c.maxListen})
		return text(string(b)), nil
	})
	s.AddTool(&mcp.Tool{Name: ToolGeneration, Description: "Answers this process's restart generation (from 1).", InputSchema: schema(nil)},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return text(strconv.FormatInt(c.gen.Load(), 10)), nil
		})
	s.AddTool(&mcp.Tool{Name: ToolRestart, Description: "A restart of this process, as far as subscriptions go, and answers the new generation. mcpush keeps every subscription in the store and none in the process, so a restarted process serves exactly what the store holds: this bumps the generation and keeps the store as it is.",
		InputSchema: schema(nil)}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return text(strconv.FormatInt(c.gen.Add(1), 10)), nil
	})
	if c.sender == nil {
		return
	}
	s.AddTool(&mcp.Tool{Name: ToolAllowCallbackOrigin, Description: "Lets callback URLs of exactly this origin (scheme://host:port) past the https and address checks of this process's verifications and deliveries, from now on; every other callback stays checked.",
		InputSchema: schema(map[string]any{"origin": prop("string", "An origin such as http://127.0.0.1:9000.")}, "origin")}, c.allowTool)
	id := schema(map[string]any{"id": prop("string", "A webhook subscription id (the id events/subscribe answered).")}, "id")
	s.AddTool(&mcp.Tool{Name: ToolWebhookGap, Description: `Posts a signed {"type":"gap","cursor"} envelope to that webhook subscription and answers the cursor it carried (the subscription's watermark).`, InputSchema: id}, c.webhookGapTool(st))
	s.AddTool(&mcp.Tool{Name: ToolWebhookTerminate, Description: `Ends that webhook subscription: posts a signed {"type":"terminated","error"} envelope to it and removes it.`, InputSchema: id}, c.webhookTerminateTool(st))
	s.AddTool(&mcp.Tool{Name: ToolSubscriptionState, Description: "Answers active, suspended or absent for that webhook subscription.", InputSchema: id}, c.stateTool(st))
	s.AddTool(&mcp.Tool{Name: ToolSubscriptionExists, Description: "Answers true when that principal's webhook subscription of that id is registered, else false.",
		InputSchema: schema(map[string]any{"principal": prop("string", "The principal."), "id": prop("string", "The subscription id.")}, "principal", "id")}, c.existsTool(st))
	s.AddTool(&mcp.Tool{Name: ToolSubscribeAs, Description: "Registers a webhook subscription on behalf of another principal, as events/subscribe would for it (without the verification handshake), and answers its id.",
		InputSchema: schema(map[string]any{
			"principal": prop("string", "The principal to subscribe as."),
			"name":      prop("string", "The event type."),
			"arguments": map[string]any{"type": "object"},
			"delivery": schema(map[string]any{
				"mode": prop("string", "webhook"), "url": prop("string", "The callback URL."), "secret": prop("string", "whsec_ and base64 of 24 to 64 bytes."),
			}, "url", "secret"),
			"ttlMs": map[string]any{"description": "Milliseconds, or null for no expiry; absent: the default (1 h)."},
		}, "principal", "name", "delivery")}, c.subscribeAsTool(st))
}

var faultDescriptions = map[mcp.EventFault]string{
	mcp.FaultUpstreamError: "Makes this process's live events/stream streams of that event type see a recoverable upstream error (notifications/events/error); they stay open.",
	mcp.FaultGap:           "Makes this process's live events/stream streams of that event type see a retention gap: each sends notifications/events/active again, with truncated.",
	mcp.FaultTerminate:     "Ends every live events/stream stream of that event type on this process (notifications/events/terminated), and every one opened later: terminal for the type until the process ends.",
}

// schema is an object schema with properties (none: {}) and required.
func schema(props map[string]any, required ...string) map[string]any {
	if props == nil {
		props = map[string]any{}
	}
	s := map[string]any{"type": "object", "properties": props}
	if len(required) > 0 {
		s["required"] = required
	}
	return s
}

func prop(typ, desc string) map[string]any { return map[string]any{"type": typ, "description": desc} }

func text(s string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
}

// refuse is a tool error: the suite counts the control as absent.
func refuse(format string, args ...any) (*mcp.CallToolResult, error) {
	return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf(format, args...)}}}, nil
}

// decode decodes a control's arguments into v (unknown members refused).
func decode(req *mcp.CallToolRequest, v any) error {
	raw := req.Params.Arguments
	if len(raw) > maxArgumentsBytes {
		return fmt.Errorf("the arguments are %d bytes, more than %d", len(raw), maxArgumentsBytes)
	}
	if len(bytes.TrimSpace(raw)) == 0 {
		raw = json.RawMessage("{}")
	}
	d := json.NewDecoder(bytes.NewReader(raw))
	d.DisallowUnknownFields()
	if err := d.Decode(v); err != nil {
		return fmt.Errorf("bad arguments: %v", err)
	}
	return nil
}

// eventType returns the event type name of st's events registry.
func eventType(ctx context.Context, st Store, name string) (*notify.EventItem, error) {
	types, err := delivery.RegistryEventTypes(st)(ctx)
	if err != nil {
		return nil, err
	}
	e, ok := types[name]
	if !ok {
		return nil, fmt.Errorf("no event type %q", clip(name))
	}
	d := e.WithDefaults()
	return &d, nil
}

func clip(s string) string {
	if len(s) > 64 {
		return s[:64] + "..."
	}
	return s
}

func (c *Controls) faultTool(st Store, fault mcp.EventFault) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		var a struct {
			Name string `json:"name"`
		}
		if err := decode(req, &a); err != nil {
			return refuse("%v", err)
		}
		e, err := eventType(ctx, st, a.Name)
		if err != nil {
			return refuse("%v", err)
		}
		if !e.Supports(notify.DeliveryPush) {
			return refuse("event type %s offers no push delivery", e.Name)
		}
		if err := c.faults.Inject(e.Name, fault); err != nil {
			return refuse("%v", err)
		}
		return text("injected into the live streams of " + e.Name), nil
	}
}

func (c *Controls) allowTool(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	var a struct {
		Origin string `json:"origin"`
	}
	if err := decode(req, &a); err != nil {
		return refuse("%v", err)
	}
	if strings.Contains(a.Origin, ",") {
		return refuse("one origin, not a list")
	}
	os, err := webhook.ParseAllow(a.Origin)
	if err != nil || len(os) != 1 {
		return refuse("origin: %v", err)
	}
	if err := c.AllowCallbackOrigin(os[0]); err != nil {
		return refuse("%v", err)
	}
	return text(os[0].String()), nil
}

// findWebhook returns the webhook subscription of id, looked up (one
// read each) on the topic of every event type offering webhook; nil when
// there is none.
func findWebhook(ctx context.Context, st Store, id string) (*notify.WebhookSubscription, error) {
	if id == "" || len(id) > maxID {
		return nil, fmt.Errorf("id must be 1 to %d characters", maxID)
	}
	types, err := delivery.RegistryEventTypes(st)(ctx)
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	for _, e := range types {
		d := e.WithDefaults()
		topic := d.Topic
		if seen[topic] || !d.Supports(notify.DeliveryWebhook) {
			continue
		}
		seen[topic] = true
		w, err := st.GetWebhook(ctx, topic, id)
		if errors.Is(err, notify.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		return w, nil
	}
	return nil, nil
}

// secrets opens w's signing secrets: the current one, and the previous
// one in its grace window.
func (c *Controls) secrets(w *notify.WebhookSubscription) ([]webhook.Secret, error) {
	sealer, err := notify.NewSealer(c.keys, notify.WebhookSealLabel)
	if err != nil {
		return nil, err
	}
	sec, err := w.OpenSecrets(sealer)
	if err != nil {
		return nil, err
	}
	cur, err := webhook.ParseSecret(sec.Current)
	if err != nil {
		return nil, err
	}
	out := []webhook.Secret{cur}
	if sec.Previous != "" && sec.PreviousUntil.After(time.Now()) {
		if prev, err := webhook.ParseSecret(sec.Previous); err == nil {
			out = append(out, prev)
		}
	}
	return out, nil
}

// post sends body, a control envelope of type kind, to w.
func (c *Controls) post(ctx context.Context, w *notify.WebhookSubscription, kind string, body []byte) error {
	secrets, err := c.secrets(w)
	if err != nil {
		return err
	}
	out := c.sender.Send(ctx, webhook.Message{ID: webhook.ControlID(kind), SubscriptionID: w.ID, URL: w.URL, Body: body, Secrets: secrets})
	if !out.OK() {
		c.logger.InfoContext(ctx, "conformance control: posting an envelope", "type", kind, "subscription", w.ID, "category", out.Category, "err", out.Err)
		return fmt.Errorf("the callback did not accept the %s envelope (%s)", kind, webhook.WireCategory(out.Category))
	}
	return nil
}

func (c *Controls) idArg(ctx context.Context, st Store, req *mcp.CallToolRequest) (*notify.WebhookSubscription, string, error) {
	var a struct {
		ID string `json:"id"`
	}
	if err := decode(req, &a); err != nil {
		return nil, "", err
	}
	w, err := findWebhook(ctx, st, a.ID)
	return w, a.ID, err
}

func (c *Controls) webhookGapTool(st Store) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		w, id, err := c.idArg(ctx, st, req)
		if err != nil {
			return refuse("%v", err)
		}
		if w == nil {
			return refuse("no webhook subscription %s", clip(id))
		}
		cursor := eventcursor.Sign(c.keys[0], eventcursor.Cursor{Name: w.Name, Topic: w.Topic, Seq: w.Watermark})
		body, err := webhook.GapBody(cursor)
		if err != nil {
			return refuse("%v", err)
		}
		if err := c.post(ctx, w, webhook.ControlGap, body); err != nil {
			return refuse("%v", err)
		}
		return text(cursor), nil
	}
}

func (c *Controls) webhookTerminateTool(st Store) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		w, id, err := c.idArg(ctx, st, req)
		if err != nil {
			return refuse("%v", err)
		}
		if w == nil {
			return refuse("no webhook subscription %s", clip(id))
		}
		body, err := webhook.TerminatedBody(mcp.CodeForbidden, "Forbidden: the subscription was ended (events_conformance_webhook_terminate)", map[string]string{"reason": "terminated"})
		if err != nil {
			return refuse("%v", err)
		}
		// Removed first: a receiver told of the end finds it ended.
		if err := st.DeleteWebhook(ctx, w); err != nil && !errors.Is(err, notify.ErrNotFound) {
			return refuse("removing the subscription: %v", err)
		}
		if err := c.post(ctx, w, webhook.ControlTerminated, body); err != nil {
			return refuse("%v (the subscription is removed)", err)
		}
		return text("terminated " + w.ID), nil
	}
}

func (c *Controls) stateTool(st Store) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		w, _, err := c.idArg(ctx, st, req)
		switch {
		case err != nil:
			return refuse("%v", err)
		case w == nil || !w.Live(time.Now()):
			return text(StateAbsent), nil
		case w.Status.Suspended:
			return text(StateSuspended), nil
		}
		return text(StateActive), nil
	}
}

func (c *Controls) existsTool(st Store) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		var a struct {
			Principal string `json:"principal"`
			ID        string `json:"id"`
		}
		if err := decode(req, &a); err != nil {
			return refuse("%v", err)
		}
		if a.Principal == "" || len(a.Principal) > maxPrincipal {
			return refuse("principal must be 1 to %d characters", maxPrincipal)
		}
		w, err := findWebhook(ctx, st, a.ID)
		if err != nil {
			return refuse("%v", err)
		}
		return text(strconv.FormatBool(w != nil && w.Live(time.Now()) && w.Principal == a.Principal)), nil
	}
}

// subscribeAsArgs are the arguments of events_conformance_subscribe_as:
// events/subscribe's params and the principal.
type subscribeAsArgs struct {
	Principal string              `json:"principal"`
	Name      string              `json:"name"`
	Arguments json.RawMessage     `json:"arguments,omitempty"`
	Delivery  mcp.WebhookDelivery `json:"delivery"`
	Cursor    *string             `json:"cursor,omitempty"`
	TTLMs     json.RawMessage     `json:"ttlMs,omitempty"`
}

func (c *Controls) subscribeAsTool(st Store) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		var a subscribeAsArgs
		if err := decode(req, &a); err != nil {
			return refuse("%v", err)
		}
		if a.Principal == "" || len(a.Principal) > maxPrincipal {
			return refuse("principal must be 1 to %d characters", maxPrincipal)
		}
		e, err := eventType(ctx, st, a.Name)
		if err != nil {
			return refuse("%v", err)
		}
		if !e.Supports(notify.DeliveryWebhook) {
			return refuse("event type %s offers no webhook delivery", e.Name)
		}
		if a.Delivery.Mode != "" && a.Delivery.Mode != notify.DeliveryWebhook {
			return refuse("delivery.mode must be webhook")
		}
		if err := c.sender.Policy().CheckURL(a.Delivery.URL); err != nil {
			return refuse("delivery.url: %v", err)
		}
		secret, err := webhook.ParseSecret(a.Delivery.Secret)
		if err != nil {
			return refuse("delivery.secret: %v", err)
		}
		canon, err := mcp.CanonicalArguments(a.Arguments)
		if err != nil {
			return refuse("arguments: %v", err)
		}
		now := time.Now()
		expires := now.Add(mcp.DefaultWebhookTTL)
		switch t := bytes.TrimSpace(a.TTLMs); {
		case bytes.Equal(t, []byte("null")):
			expires = time.Time{}
		case len(t) > 0:
			var ms float64
			if err := json.Unmarshal(t, &ms); err != nil {
				return refuse("ttlMs must be a number or null")
			}
			expires = now.Add(min(max(time.Duration(ms)*time.Millisecond, mcp.MinWebhookTTL), mcp.MaxWebhookTTL))
		}
		head, err := st.TopicHead(ctx, e.Topic)
		if err != nil {
			return refuse("%v", err)
		}
		sealer, err := notify.NewSealer(c.keys, notify.WebhookSealLabel)
		if err != nil {
			return refuse("%v", err)
		}
		id := mcp.WebhookSubscriptionID(a.Principal, a.Delivery.URL, e.Name, canon)
		w := &notify.WebhookSubscription{Topic: e.Topic, ID: id, Principal: a.Principal, Name: e.Name, URL: a.Delivery.URL,
			CreatedAt: now, UpdatedAt: now, ExpiresAt: expires, Verified: true, Watermark: head}
		if !bytes.Equal(canon, []byte("{}")) {
			w.Arguments = canon
		}
		w.SealSecrets(sealer, notify.WebhookSecrets{Current: secret.Reveal()})
		switch err := st.CreateWebhook(ctx, w, notify.MaxWebhooksPerPrincipal); {
		case errors.Is(err, notify.ErrExists):
			old, gerr := st.GetWebhook(ctx, e.Topic, id)
			if gerr != nil {
				return refuse("%v", gerr)
			}
			// A refresh, as events/subscribe's: the secret replaced, the
			// previous one signing on for the grace window.
			sec, err := old.OpenSecrets(sealer)
			if err != nil {
				return refuse("%v", err)
			}
			if cur := secret.Reveal(); sec.Current != cur {
				sec = notify.WebhookSecrets{Current: cur, Previous: sec.Current, PreviousUntil: now.Add(mcp.DefaultSecretGrace)}
			}
			old.SealSecrets(sealer, sec)
			old.ExpiresAt, old.UpdatedAt = w.ExpiresAt, now
			old.Status.Suspended = false
			if err := st.UpdateWebhook(ctx, old); err != nil {
				return refuse("refreshing: %v", err)
			}
		case err != nil:
			return refuse("%v", err)
		}
		return text(id), nil
	}
}
