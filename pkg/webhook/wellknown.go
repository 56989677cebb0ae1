package webhook

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// The receiver-published well-known document (SEP-3415's fourth way to
// verify a callback, Draft of 2026-11-26): the callback URL's origin
// serves WellKnownReceiverPath, {"receivers": ["/hooks/", ...]}, the path
// prefixes under that origin that accept deliveries. A callback URL under
// one of them is verified without a challenge POST: control of the origin
// stands in for the proof of intent.

// WellKnownReceiverPath is the path of the receiver document on a
// callback's origin.
const WellKnownReceiverPath = "/.well-known/mcp-webhook-receiver.json"

// Bounds of a receiver document.
const (
	// MaxReceiverDocument bounds the bytes of the document read; a longer
	// one covers nothing.
	MaxReceiverDocument = 16 << 10
	// MaxReceiverPrefixes bounds the prefixes of a document looked at.
	MaxReceiverPrefixes = 64
)

// ReceiverDocument reports whether the receiver document of rawURL's
// origin covers rawURL: it GETs WellKnownReceiverPath on that origin
// through the same checks as a delivery (the Policy's URL checks, the
// resolved address checked at the connection, no redirect, no proxy,
// Policy.Timeout) and looks for a prefix (a string starting with "/") of
// rawURL's path among its first MaxReceiverPrefixes receivers. A path
// with dot segments or empty segments is never covered (so that
// "/hooks/../admin" is not taken for "/hooks/"). A missing, unreachable,
// oversized or malformed document covers nothing: false, with err saying
// why (for the log; nothing of it reaches a client).
func (s *Sender) ReceiverDocument(ctx context.Context, rawURL string) (bool, error) {
	u, allowed, err := s.p.parse(rawURL)
	if err != nil {
		return false, err
	}
	p := u.Path
	if p == "" || strings.Contains(p, "//") || strings.Contains(p+"/", "/./") || strings.Contains(p+"/", "/../") {
		return false, fmt.Errorf("webhook: receiver document: the path %q is not in canonical form", p)
	}
	client := s.strict
	if allowed {
		client = s.allowed
	}
	ctx, cancel := context.WithTimeout(ctx, s.p.timeout())
	defer cancel()
	doc := *u
	doc.Path, doc.RawPath, doc.RawQuery, doc.Fragment = WellKnownReceiverPath, "", "", ""
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, doc.String(), nil)
	if err != nil {
		return false, err
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", "mcpush-webhook")
	resp, err := client.Do(req)
	if err != nil {
		return false, fmt.Errorf("webhook: receiver document: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return false, fmt.Errorf("webhook: receiver document: the origin answered %d", resp.StatusCode)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, MaxReceiverDocument+1))
	switch {
	case err != nil:
		return false, fmt.Errorf("webhook: receiver document: %w", err)
	case len(body) > MaxReceiverDocument:
		return false, fmt.Errorf("webhook: receiver document: over %d bytes", MaxReceiverDocument)
	}
	var d struct {
		Receivers []string `json:"receivers"`
	}
	if err := json.Unmarshal(body, &d); err != nil {
		return false, fmt.Errorf("webhook: receiver document: %w", err)
	}
	for i, prefix := range d.Receivers {
		if i == MaxReceiverPrefixes {
			break
		}
		if strings.HasPrefix(prefix, "/") && strings.HasPrefix(p, prefix) {
			return true, nil
		}
	}
	return false, nil
}
