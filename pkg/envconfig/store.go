package envconfig

import (
	"strconv"
	"strings"
	"unicode"

	"github.com/mcpush/mcpush/pkg/notify"
	"github.com/mcpush/mcpush/pkg/webhook"
)

// DefaultStore is the store of a process outside Lambda when MCPUSH_STORE
// is not set.
const DefaultStore = "sqlite:.mcpush/mcpush.db"

// MaxFeedShards bounds MCPUSH_FEED_SHARDS (dynamostore.MaxFeedShards).
const MaxFeedShards = 512

// Store is the store a main opens (storeconfig.Open, storecount.Open).
type Store struct {
	// Spec is MCPUSH_STORE, "sqlite:PATH" or "dynamodb:TABLE"
	// (storeconfig checks it); DefaultStore when unset outside Lambda.
	Spec string
	// CreateTable is MCPUSH_CREATE_TABLE=1: create a missing DynamoDB
	// table (local use only).
	CreateTable bool
	// FeedShards is MCPUSH_FEED_SHARDS, the DynamoDB change feed's
	// shards, 1 to MaxFeedShards; 0 when unset (the default).
	FeedShards int
	// StatsDir is MCPUSH_STORE_STATS, a diagnostic: the directory the
	// process writes its store request counts to; empty when unset.
	StatsDir string
}

// ReadStore reads the store variables. In Lambda (AWS_LAMBDA_RUNTIME_API
// set) MCPUSH_STORE is required: a SQLite file would be private to one
// sandbox, so nothing would survive the next instance.
func ReadStore(getenv func(string) string) (Store, error) {
	s := Store{Spec: getenv("MCPUSH_STORE"), StatsDir: getenv("MCPUSH_STORE_STATS")}
	if s.Spec == "" {
		if RuntimeAPI(getenv) != "" {
			return Store{}, &Error{Name: "MCPUSH_STORE", Want: "dynamodb:TABLE in Lambda (template.yaml sets it)"}
		}
		s.Spec = DefaultStore
	}
	switch v := getenv("MCPUSH_CREATE_TABLE"); v {
	case "", "0":
	case "1":
		s.CreateTable = true
	default:
		return Store{}, &Error{Name: "MCPUSH_CREATE_TABLE", Value: v, Want: "1 (create a missing DynamoDB table) or 0"}
	}
	if v := getenv("MCPUSH_FEED_SHARDS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > MaxFeedShards {
			return Store{}, &Error{Name: "MCPUSH_FEED_SHARDS", Value: v,
				Want: "an integer from 1 to " + strconv.Itoa(MaxFeedShards) + " (every process on one table must use the same)"}
		}
		s.FeedShards = n
	}
	return s, nil
}

// StateKeys are the keys that sign requestState and event cursors and
// seal webhook secrets: given (MCPUSH_STATE_KEYS), or named
// (MCPUSH_STATE_KEYS_SECRET, a Secrets Manager secret the main reads), or
// neither (the key shared through the store). internal/statekeys.Resolve
// turns them into keys.
type StateKeys struct {
	Keys   [][]byte // MCPUSH_STATE_KEYS, parsed (notify.ParseStateKeys)
	Secret string   // MCPUSH_STATE_KEYS_SECRET
}

// ReadStateKeys reads MCPUSH_STATE_KEYS and MCPUSH_STATE_KEYS_SECRET, at
// most one of which may be set. Its errors never echo a key.
func ReadStateKeys(getenv func(string) string) (StateKeys, error) {
	keys, secret := getenv("MCPUSH_STATE_KEYS"), getenv("MCPUSH_STATE_KEYS_SECRET")
	switch {
	case keys != "" && secret != "":
		return StateKeys{}, &Error{Name: "MCPUSH_STATE_KEYS", Secret: true, Want: "unset when MCPUSH_STATE_KEYS_SECRET is set (set one of them, not both)"}
	case keys != "":
		k, err := notify.ParseStateKeys(keys)
		if err != nil {
			return StateKeys{}, &Error{Name: "MCPUSH_STATE_KEYS", Secret: true,
				Want: "comma-separated keys of at least 32 characters each (" + err.Error() + ")"}
		}
		return StateKeys{Keys: k}, nil
	}
	return StateKeys{Secret: secret}, nil
}

// ReadWebhookAllow reads MCPUSH_WEBHOOK_ALLOW (webhook.AllowEnv): the
// origins exempt from the webhook https and address checks
// (webhook.ParseAllow); nil when unset.
func ReadWebhookAllow(getenv func(string) string) ([]webhook.Origin, error) {
	v := getenv(webhook.AllowEnv)
	allow, err := webhook.ParseAllow(v)
	if err != nil {
		// The entry and what is wrong with it, without the variable's
		// name and value again; the entry only when there are others.
		why := strings.TrimPrefix(err.Error(), webhook.ErrInvalidAllow.Error()+": ")
		why = strings.TrimPrefix(why, strconv.Quote(strings.TrimSpace(v))+": ")
		return nil, &Error{Name: webhook.AllowEnv, Value: v, Want: "comma-separated origins such as http://127.0.0.1:9000 (" + why + ")", Err: err}
	}
	return allow, nil
}

// ReadRegistryTools reads MCPUSH_REGISTRY_TOOLS (sns-ingest): the tools a
// tools registry item may name, separated by commas or blanks; nil when
// unset (the event tools).
func ReadRegistryTools(getenv func(string) string) []string {
	tools := strings.FieldsFunc(getenv("MCPUSH_REGISTRY_TOOLS"), func(r rune) bool { return r == ',' || unicode.IsSpace(r) })
	if len(tools) == 0 {
		return nil
	}
	return tools
}
