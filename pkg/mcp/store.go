package mcp

import "github.com/mcpush/mcpush/pkg/notify"

// Store is what a Server needs of its store: the notify.Store contract
// and every capability the server uses, all required, so that a store
// that cannot count sessions, park listen streams or keep tasks is
// refused when the program is compiled, not found wanting at run time.
// Both stores of mcpush (pkg/notify/sqlitestore, pkg/notify/dynamostore)
// implement it; a wrapper (a counter, a fault injector in a test) embeds
// a Store and so keeps every capability.
//
// Each embedded interface is small and documented where its semantics
// live (pkg/notify).
type Store interface {
	notify.Store
	notify.TaskStore        // tasks: tasks/get, tasks/cancel, the quota
	notify.RateCounter      // per-principal rate limits
	notify.SessionCounter   // session and listen-stream quotas, process liveness
	notify.SessionReclaimer // reclaiming idle sessions at the quota
	notify.ProfileLister    // finding parked listen streams
	notify.SharedKeys       // the requestState key shared by all processes
	notify.TopicHeads       // events/poll from now
	notify.WebhookStore     // events/subscribe, events/unsubscribe
}

// WebhookStore is the store's webhook subscriptions, now declared once in
// pkg/notify (it also lists TopicWebhooks, which the delivery reads).
//
// Deprecated: use [notify.WebhookStore].
type WebhookStore = notify.WebhookStore
