package mcp

import (
	"context"

	"github.com/mcpush/mcpush/pkg/metrics"
	"github.com/mcpush/mcpush/pkg/webhook"
)

// This file holds what pkg/mcp counts in the process's metrics (package
// metrics) beyond single calls: the kind of a held stream, and webhook
// verifications. Refusals are counted by writeError (errors.go), held
// streams by heldStream.run (held.go).

// kind is the metrics kind of the held stream: a 2025-era GET stream, a
// resumed POST response stream, or a listen stream: a 2026-era
// subscriptions/listen, or an events/stream of either era.
func (hs *heldStream) kind() metrics.StreamKind {
	switch src := hs.src.(type) {
	case *listenSource, *eventStream:
		return metrics.StreamListen
	case *getSource:
		if src.stream != getStream {
			return metrics.StreamResume
		}
	}
	return metrics.StreamGet
}

// countVerification counts the verification of a webhook endpoint that
// ended with out, and returns out.
func countVerification(ctx context.Context, out webhook.Outcome) webhook.Outcome {
	category := out.Category
	if category == "" && out.Err != nil {
		category = metrics.OutcomeOther
	}
	metrics.WebhookVerification(ctx, category)
	return out
}
