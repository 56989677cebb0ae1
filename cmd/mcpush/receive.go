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
// else $MCPUSH_WEBHOOK_SECRET) and its timestamp, answers verification
// handshakes by echoing the challenge, and prints each event as one line
// (subscription, timestamp, name, eventId, data, cursor), or each
// delivery, control envelopes included, as one JSON line with asJSON.
// A delivery that does not verify is answered 401 and not printed.
func cmdEventsReceive(ctx context.Context, e *env, f *receiveFlags, asJSON bool) error {
	if f.listen == "" {
		return fmt.Errorf("%w: events receive needs --listen ADDR (e.g. 127.0.0.1:9000)", errUsage)
	}
	raw := []string(f.secrets)
	if len(raw) == 0 && e.webhookSecret != "" {
		raw = []string{e.webhookSecret}
	}
	if len(raw) == 0 {
		return fmt.Errorf("%w: events receive needs --secret whsec_... (or $MCPUSH_WEBHOOK_SECRET)", errUsage)
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
	srv := &http.Server{Handler: recv, ReadHeaderTimeout: 10 * time.Second}
	fmt.Fprintf(e.stderr, "mcpush: receiving webhooks at http://%s/ (Ctrl-C to stop); the server must allow it: %s=http://%s\n", ln.Addr(), webhook.AllowEnv, ln.Addr())
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
