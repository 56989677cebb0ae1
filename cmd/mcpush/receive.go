package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"

	"github.com/mcpush/mcpush/pkg/mcp"
	"github.com/mcpush/mcpush/pkg/webhook"
)

// receiveFlags are the flags of mcpush events receive.
type receiveFlags struct {
	listen  string
	secrets stringsFlag
}

// stringsFlag collects a repeatable string flag.
type stringsFlag []string

func (s *stringsFlag) String() string     { return fmt.Sprint(len(*s), " values") } // never the values: they are secrets
func (s *stringsFlag) Set(v string) error { *s = append(*s, v); return nil }

// cmdEventsReceive runs a local webhook receiver until ctx ends: it
// listens on f.listen, verifies every delivery's Standard Webhooks
// signature with one of the secrets (--secret, repeatable for a rotation,
// else $MCPUSH_WEBHOOK_SECRET, else one it generates and prints on
// stderr) and its timestamp, answers verification
// handshakes by echoing the challenge, and prints each event as one line
// (subscription, timestamp, name, eventId, data, cursor), or each
// delivery, control envelopes included, as one JSON line with asJSON.
// A delivery that does not verify is answered 401 and not printed; a line
// on stderr says so (refusals).
func cmdEventsReceive(ctx context.Context, e *env, f *receiveFlags, asJSON bool) error {
	if f.listen == "" {
		return fmt.Errorf("%w: events receive needs --listen ADDR (e.g. 127.0.0.1:9000)", errUsage)
	}
	raw := []string(f.secrets)
	if len(raw) == 0 && e.webhookSecret != "" {
		raw = []string{e.webhookSecret}
	}
	if len(raw) == 0 {
		raw = []string{mcp.NewWebhookSecret()}
		fmt.Fprintf(e.stderr, "secret: %s (generated: pass the same to 'mcpush events subscribe ... --secret', or export MCPUSH_WEBHOOK_SECRET for both)\n", raw[0])
	}
	var secrets []webhook.Secret
	for _, s := range raw {
		sec, err := webhook.ParseSecret(s)
		if err != nil {
			return fmt.Errorf("%w: --secret: %v", errUsage, err)
		}
		secrets = append(secrets, sec)
	}
	var mu sync.Mutex // one line at a time
	recv := &webhook.Receiver{
		Secrets: func(string) []webhook.Secret { return secrets },
		Handle: func(d webhook.Delivery) error {
			mu.Lock()
			defer mu.Unlock()
			return printDelivery(e, d, asJSON)
		},
	}
	ln, err := net.Listen("tcp", f.listen)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: &refusals{next: recv, e: e}, ReadHeaderTimeout: 10 * time.Second}
	fmt.Fprintf(e.stderr, "mcpush: receiving webhooks at http://%s/ (Ctrl-C to stop)\n"+
		"mcpush: set %s=http://%s where the server AND sns-ingest run (each checks the callback; without it the server refuses the subscription, and the ingest the delivery); webhooks need a server with MCPUSH_AUTH=oauth or iam\n",
		ln.Addr(), webhook.AllowEnv, ln.Addr())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	defer cancel()
	srv.Shutdown(sctx)
	if err := <-done; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return ctx.Err()
}

// printDelivery writes d to e: JSON lines with asJSON, else events on
// stdout and control envelopes on stderr.
func printDelivery(e *env, d webhook.Delivery, asJSON bool) error {
	if asJSON {
		var body bytes.Buffer
		if err := json.Compact(&body, d.Raw); err != nil {
			return err
		}
		return writeJSON(e.stdout, struct {
			SubscriptionID string          `json:"subscriptionId"`
			WebhookID      string          `json:"webhookId"`
			Body           json.RawMessage `json:"body"`
		}{d.SubscriptionID, d.WebhookID, body.Bytes()}, false)
	}
	if ev := d.Event; ev != nil {
		var data bytes.Buffer
		if err := json.Compact(&data, ev.Data); err != nil {
			data.WriteString("null")
		}
		cursor := "-"
		if ev.Cursor != nil {
			cursor = *ev.Cursor
		}
		_, err := fmt.Fprintf(e.stdout, "%s\t%s\t%s\t%s\t%s\t%s\n",
			printable(d.SubscriptionID), printable(ev.Timestamp), printable(ev.Name), printable(ev.EventID), printable(data.String()), printable(cursor))
		return err
	}
	c := d.Control
	switch c.Type {
	case webhook.ControlVerification:
		fmt.Fprintf(e.stderr, "mcpush: answered the verification of subscription %s\n", printable(d.SubscriptionID))
	case webhook.ControlGap:
		cursor := "null"
		if c.Cursor != nil {
			cursor = *c.Cursor
		}
		fmt.Fprintf(e.stderr, "mcpush: subscription %s: events were missed (gap); resume from cursor %s\n", printable(d.SubscriptionID), printable(cursor))
	case webhook.ControlTerminated:
		fmt.Fprintf(e.stderr, "mcpush: subscription %s ended by the server: %d %s\n", printable(d.SubscriptionID), c.Error.Code, printable(c.Error.Message))
	default:
		fmt.Fprintf(e.stderr, "mcpush: subscription %s: control envelope %q\n", printable(d.SubscriptionID), c.Type)
	}
	return nil
}

// printable returns s with every character that is not printable (control
// characters, terminal escapes, tabs, line breaks) escaped as in a Go
// string literal, so a delivery cannot drive the terminal or forge lines.
func printable(s string) string {
	if !strings.ContainsFunc(s, func(r rune) bool { return !unicode.IsPrint(r) }) {
		return s
	}
	q := strconv.Quote(s)
	return q[1 : len(q)-1]
}

// maxRefusalLines bounds the lines refusals prints: the first ones, then
// one every refusalEvery, so that a flood of bad requests cannot flood
// the terminal.
const (
	maxRefusalLines = 10
	refusalEvery    = 100
)

// refusals wraps the receiver: for every request it refuses with 401 (no
// signature verifies under the secrets, or a timestamp out of the
// window) it prints a line on stderr, so that a wrong --secret is seen at
// the receiver as well as at the subscriber.
type refusals struct {
	next http.Handler
	e    *env
	mu   sync.Mutex
	n    int // refusals so far
}

func (r *refusals) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	rec := &statusRecorder{ResponseWriter: w}
	r.next.ServeHTTP(rec, req)
	if rec.status != http.StatusUnauthorized {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.n++
	if r.n > maxRefusalLines && r.n%refusalEvery != 0 {
		return
	}
	what := "a delivery"
	if strings.HasPrefix(req.Header.Get(webhook.HeaderID), "msg_"+webhook.ControlVerification+"_") {
		what = "the verification"
	}
	reason := "signature did not verify (wrong --secret?)"
	if body := strings.TrimSpace(rec.body.String()); !strings.Contains(body, "no signature verifies") {
		reason = printable(body)
	}
	fmt.Fprintf(r.e.stderr, "mcpush: answered 401 to %s of subscription %s: %s (%d refused so far)\n",
		what, printable(req.Header.Get(webhook.HeaderSubscriptionID)), reason, r.n)
}

// statusRecorder records the status of a response and the start of its
// body (an error's text).
type statusRecorder struct {
	http.ResponseWriter
	status int
	body   bytes.Buffer
}

func (s *statusRecorder) WriteHeader(code int) {
	if s.status == 0 {
		s.status = code
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusRecorder) Write(b []byte) (int, error) {
	if s.status == 0 {
		s.status = http.StatusOK
	}
	if n := 256 - s.body.Len(); n > 0 {
		s.body.Write(b[:min(n, len(b))])
	}
	return s.ResponseWriter.Write(b)
}
