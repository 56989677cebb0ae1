package main

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"

	"github.com/aws/aws-lambda-go/events"
	"github.com/mcpush/mcpush/pkg/notify"
	"github.com/mcpush/mcpush/pkg/notify/ingest"
	"github.com/mcpush/mcpush/pkg/notify/storeconfig"
)

// Exit statuses of the CLI.
const (
	exitOK       = 0 // every record accepted or a duplicate
	exitRejected = 1 // a record was rejected as malformed (see the summary's errors)
	exitUsage    = 2 // bad flags, unreadable event, store configuration
	exitRetry    = 3 // the store failed (busy, unreachable, timed out): run the same command again
)

// localARNPrefix makes the TopicArn of an event built from -topic.
const localARNPrefix = "arn:aws:sns:us-east-1:000000000000:"

const usage = `usage:
  sns-ingest -event FILE       process an SNS event JSON as Lambda delivers it (- for stdin)
  sns-ingest -topic T -message M [-subject S] [-message-id ID]
                               publish one message to topic T (a name or an SNS topic ARN)

Prints one line of JSON: {"accepted":N,"duplicates":N,"rejected":N,"failed":N[,"errors":[...]]}.
Exit status: 0 all records stored, 1 a record was rejected as malformed, 2 usage or
configuration error, 3 the store failed (busy, unreachable, timed out; nothing is lost by
running the same command again: what went through is then a duplicate).
Environment (docs/configuration.md; a bad value is a configuration error, exit 2):
  MCPUSH_STORE (default sqlite:.mcpush/mcpush.db), MCPUSH_CREATE_TABLE=1, MCPUSH_FEED_SHARDS
  MCPUSH_DELIVERY_QUEUE_URL (the SQS queue that takes each event's webhook delivery; unset:
  the event waits in its topic's log for the local server's delivery pool)
  MCPUSH_STATE_KEYS or MCPUSH_STATE_KEYS_SECRET, MCPUSH_WEBHOOK_ALLOW,
  MCPUSH_WEBHOOK_PER_ORIGIN (webhook delivery, in Lambda)
  MCPUSH_REGISTRY_TOOLS (the tools a tools registry item may name)
  MCPUSH_STORE_STATS=DIR (diagnostic: write the store request counts to a file in DIR)

flags:
`

// run is the CLI: it parses args, builds or reads the SNS event, ingests
// it and prints the summary. It returns the exit status.
func run(ctx context.Context, args []string, e *env) int {
	fs := flag.NewFlagSet("sns-ingest", flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), usage)
		fs.PrintDefaults()
	}
	var (
		eventFile = fs.String("event", "", "read the SNS event from `FILE` (- for stdin)")
		topic     = fs.String("topic", "", "publish to `TOPIC`, a topic name or an SNS topic ARN")
		message   = fs.String("message", "", "the message `BODY` to publish with -topic")
		subject   = fs.String("subject", "", "the message `SUBJECT` (with -topic)")
		messageID = fs.String("message-id", "", "the SNS MessageId (with -topic; default: a random UUID)")
	)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	set := make(map[string]bool)
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	usageErr := func(format string, args ...any) int {
		fmt.Fprintf(e.stderr, "sns-ingest: "+format+"\n", args...)
		fmt.Fprintln(e.stderr, "run sns-ingest -h for usage")
		return exitUsage
	}

	var (
		ev  events.SNSEvent
		err error
	)
	switch {
	case fs.NArg() > 0:
		return usageErr("unexpected arguments: %s", strings.Join(fs.Args(), " "))
	case set["event"] && (set["topic"] || set["message"] || set["subject"] || set["message-id"]):
		return usageErr("-event excludes -topic, -message, -subject and -message-id")
	case set["event"]:
		if ev, err = readEvent(*eventFile, e.stdin); err != nil {
			return usageErr("%v", err)
		}
	case set["topic"]:
		if !set["message"] {
			return usageErr("-topic needs -message")
		}
		if ev, err = buildEvent(*topic, *message, *subject, *messageID, e); err != nil {
			return usageErr("%v", err)
		}
	case set["message"] || set["subject"] || set["message-id"]:
		return usageErr("-message, -subject and -message-id need -topic")
	default:
		return usageErr("want -event FILE or -topic T -message M")
	}

	// The environment, read and checked before the store is opened: a
	// bad value is a configuration error (exit 2), as it is an init
	// error in Lambda.
	c, err := readConfig(e.getenv)
	if err != nil {
		e.logger.Error("sns-ingest: configuration", "err", err)
		return exitUsage
	}
	fresh := newSQLiteFile(c.store.Spec)
	store, err := openStore(ctx, c.store, e.logger)
	if err != nil {
		e.logger.Error("sns-ingest: opening the store", "err", err)
		if errors.Is(err, notify.ErrUnavailable) || errors.Is(err, context.DeadlineExceeded) {
			return exitRetry
		}
		return exitUsage
	}
	defer store.Close()
	if fresh {
		// A typo'd path, or another working directory (a relative path
		// is relative to it), writes to a store no server reads.
		e.logger.Warn("sns-ingest: created a new, empty store: a server sees these messages only if its MCPUSH_STORE names this same file (a relative path is relative to the current directory)",
			"store", storeconfig.Describe(c.store.Spec))
	}

	// Webhook delivery is not this command's: with a queue
	// (MCPUSH_DELIVERY_QUEUE_URL) it hands each event's fan-out to it,
	// else the event waits in its topic's log, where the local server's
	// delivery pool finds it.
	opts := &ingest.Options{Logger: e.logger, Now: e.now, Tools: c.tools}
	q, err := deliveryQueue(ctx, c)
	if err != nil {
		e.logger.Error("sns-ingest: webhook delivery queue", "err", err)
		return exitUsage
	}
	if q != nil {
		opts.Delivery = q
	}
	in := ingest.New(store, opts)
	sum, _ := in.Handle(ctx, ev) // the summary reports the errors, and Handle has logged them
	enc := json.NewEncoder(e.stdout)
	enc.SetEscapeHTML(false)
	// The store, with a SQLite path made absolute: run from another
	// directory, a relative path is another store.
	out := struct {
		ingest.Summary
		Store string `json:"store"`
	}{sum, storeconfig.Describe(c.store.Spec)}
	if err := enc.Encode(out); err != nil {
		e.logger.Error("sns-ingest: writing the summary", "err", err)
		return exitUsage
	}
	switch {
	case sum.Failed > 0:
		return exitRetry
	case sum.Rejected > 0:
		return exitRejected
	}
	return exitOK
}

// readEvent reads an SNS event JSON from file, or from stdin for "-".
func readEvent(file string, stdin io.Reader) (events.SNSEvent, error) {
	var ev events.SNSEvent
	var (
		b   []byte
		err error
	)
	if file == "-" {
		b, err = io.ReadAll(stdin)
		file = "stdin"
	} else {
		b, err = os.ReadFile(file)
	}
	if err != nil {
		return ev, err
	}
	if err := json.Unmarshal(b, &ev); err != nil {
		return ev, fmt.Errorf("%s: not an SNS event: %v", file, err)
	}
	if len(ev.Records) == 0 {
		return ev, fmt.Errorf(`%s: no records (want an SNS event, {"Records":[{"EventSource":"aws:sns","Sns":{...}}]})`, file)
	}
	return ev, nil
}

// buildEvent builds the one-record SNS event that publishing message to
// topic would deliver.
func buildEvent(topic, message, subject, messageID string, e *env) (events.SNSEvent, error) {
	arn := topic
	if !strings.HasPrefix(topic, "arn:") {
		if !ingest.ValidTopic(topic) {
			return events.SNSEvent{}, fmt.Errorf("-topic %q: not a topic name (1 to %d of A-Z a-z 0-9 _ . -, not . or ..) or ARN", topic, ingest.MaxTopicLen)
		}
		arn = localARNPrefix + topic
	}
	if messageID == "" {
		messageID = newUUID()
	}
	return events.SNSEvent{Records: []events.SNSEventRecord{{
		EventVersion:         "1.0",
		EventSubscriptionArn: arn + ":" + newUUID(),
		EventSource:          "aws:sns",
		SNS: events.SNSEntity{
			Type:              "Notification",
			MessageID:         messageID,
			TopicArn:          arn,
			Subject:           subject,
			Message:           message,
			Timestamp:         e.now().UTC(),
			SignatureVersion:  "1",
			MessageAttributes: map[string]any{},
		},
	}}}, nil
}

// newUUID returns a random (version 4) UUID, the form of SNS message ids.
func newUUID() string {
	var b [16]byte
	rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// newSQLiteFile reports whether spec is a SQLite store whose file does not
// exist yet: opening it creates a new, empty store.
func newSQLiteFile(spec string) bool {
	path, ok := strings.CutPrefix(spec, "sqlite:")
	if !ok || path == "" || path == ":memory:" || strings.HasPrefix(path, "file:") {
		return false
	}
	_, err := os.Stat(path)
	return errors.Is(err, fs.ErrNotExist)
}
