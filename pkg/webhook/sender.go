package webhook

import (
	"bytes"
	"context"
	"crypto/subtle"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"syscall"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
)

// Delivery failure categories. The first six are SEP-3415's lastError
// (and CallbackEndpointError data.reason) values; the last four are
// internal, more precise, and go on the wire only through WireCategory.
const (
	CategoryConnectionRefused = "connection_refused" // no connection: refused, reset, unresolvable host
	CategoryTimeout           = "timeout"            // no complete response within Policy.Timeout
	CategoryTLS               = "tls_error"          // the TLS handshake failed (certificate, protocol)
	CategoryHTTP4xx           = "http_4xx"           // a 4xx answer
	CategoryHTTP5xx           = "http_5xx"           // a 5xx answer (or a status above 599)
	CategoryChallengeFailed   = "challenge_failed"   // verification: a 2xx without the challenge echoed

	// CategoryRedirect: a 3xx answer. Redirects are never followed (a
	// redirect could lead to an internal address); on the wire http_4xx,
	// as the endpoint's configuration is at fault.
	CategoryRedirect = "http_3xx"
	// CategoryBlockedAddress: the host is, or resolved only to, addresses
	// that are not globally routable; no connection was made. Not
	// retried. On the wire connection_refused: the server refused to
	// connect, and saying more would describe the receiver's DNS.
	CategoryBlockedAddress = "blocked_address"
	// CategoryBodyTooLarge: the body is over Policy.MaxBody and was not
	// sent. Not retried. On the wire http_4xx, as a 413 would be.
	CategoryBodyTooLarge = "body_too_large"
	// CategoryInvalidMessage: a Message or URL that cannot be sent (no
	// id, no secret, a URL the Policy refuses). Not retried. On the wire
	// http_4xx.
	CategoryInvalidMessage = "invalid_message"
)

// WireCategory maps an Outcome category to the SEP-3415 lastError value
// that may be shown to a client: the six SEP categories are themselves,
// the internal ones map as their constants document, and "" stays "".
func WireCategory(category string) string {
	switch category {
	case CategoryBlockedAddress:
		return CategoryConnectionRefused
	case CategoryRedirect, CategoryBodyTooLarge, CategoryInvalidMessage:
		return CategoryHTTP4xx
	}
	return category
}

// Header names of a delivery. The Standard Webhooks names are in lower
// case as the specification writes them; HTTP headers are
// case-insensitive.
const (
	HeaderID             = standardwebhooks.HeaderWebhookID
	HeaderTimestamp      = standardwebhooks.HeaderWebhookTimestamp
	HeaderSignature      = standardwebhooks.HeaderWebhookSignature
	HeaderSubscriptionID = "X-MCP-Subscription-Id"
)

// Bounds of what a Sender reads and sends.
const (
	maxResponseRead  = 64 << 10 // a delivery's response body is drained up to this and dropped
	maxChallengeRead = 4 << 10  // a verification response body is read up to this
	maxHeaderValue   = 512      // webhook-id and X-MCP-Subscription-Id
	maxAddrsTried    = 4        // resolved addresses tried per connection
)

// Message is one signed POST: an event (webhook-id = its eventId) or a
// control envelope (webhook-id = ControlID(type)).
type Message struct {
	ID             string // webhook-id
	SubscriptionID string // X-MCP-Subscription-Id
	URL            string
	Body           []byte
	// Secrets sign the message, the current one first; during a rotation
	// grace window the older ones follow, and webhook-signature carries
	// one space-separated v1 signature per secret, so the receiver
	// verifies under either.
	Secrets []Secret
}

// Outcome is the result of one POST.
type Outcome struct {
	Status   int    // the HTTP status; 0 when there was no response
	Category string // "" on a 2xx, else a Category* constant (see WireCategory)
	// Retry says whether the message may be retried: false on a 2xx, a
	// 410, a 413, a blocked address, a body too large, an invalid
	// message and a failed challenge.
	Retry bool
	// Err is the internal detail, for logs only: it may describe the
	// receiver's network and must never be put on the wire.
	Err error
}

// OK reports whether the receiver accepted the message (a 2xx, and for
// Verify the challenge echoed).
func (o Outcome) OK() bool { return o.Category == "" && o.Err == nil }

// Sender POSTs signed messages under a Policy. Its HTTP client follows no
// redirects, uses no proxy, and connects only to addresses it has checked:
// for a URL whose origin is not in Policy.Allow it resolves the host with
// the Policy's Resolver at every new connection, keeps the globally
// routable addresses (Routable), and dials those (the Host header and TLS
// SNI keep the URL's name), so a host name that resolved to a public
// address at subscribe time and to a private one now is refused now.
// A Sender is safe for concurrent use.
type Sender struct {
	p       Policy
	strict  *http.Client // URLs whose origin is not allowed: checked dials
	allowed *http.Client // URLs whose origin is in Policy.Allow
}

// NewSender returns a Sender under p (zero fields take their defaults).
func NewSender(p Policy) *Sender {
	p.Allow = append([]Origin(nil), p.Allow...)
	s := &Sender{p: p}
	checked := &net.Dialer{
		Timeout: p.timeout(),
		// The last word: whatever resolved it, the address connected to
		// must be routable.
		Control: func(_, address string, _ syscall.RawConn) error {
			ap, err := netip.ParseAddrPort(address)
			if err != nil || !Routable(ap.Addr()) {
				return fmt.Errorf("%w: %s", ErrBlockedAddress, address)
			}
			return nil
		},
	}
	plain := &net.Dialer{Timeout: p.timeout()}
	s.strict = s.client(s.dialer(checked, true))
	s.allowed = s.client(s.dialer(plain, false))
	return s
}

// dialer returns a DialContext that resolves the host with the Policy's
// Resolver and dials the addresses found, at most maxAddrsTried of them in
// order; with check, only the routable ones (none: ErrBlockedAddress).
func (s *Sender) dialer(d *net.Dialer, check bool) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		host, port, err := net.SplitHostPort(addr)
		if err != nil {
			return nil, err
		}
		addrs, err := s.p.resolve(ctx, host, check)
		if err != nil {
			return nil, err
		}
		var first error
		for i, a := range addrs {
			if i == maxAddrsTried {
				break
			}
			c, err := d.DialContext(ctx, network, net.JoinHostPort(a.String(), port))
			if err == nil {
				return c, nil
			}
			if first == nil {
				first = err
			}
		}
		return nil, first
	}
}

func (s *Sender) client(dial func(ctx context.Context, network, addr string) (net.Conn, error)) *http.Client {
	var tc *tls.Config
	if s.p.TLSConfig != nil {
		tc = s.p.TLSConfig.Clone()
	}
	return &http.Client{
		Transport: &http.Transport{
			Proxy:             nil, // a proxy would dial for us, unchecked
			DialContext:       dial,
			TLSClientConfig:   tc,
			ForceAttemptHTTP2: true,
			// Enough idle connections for a fan-out of up to 128
			// concurrent deliveries to one receiver to reuse them (at
			// 32, 10,000 deliveries by 64 workers closed 2,031
			// connections; at 128, 164).
			MaxIdleConnsPerHost: 128,
			IdleConnTimeout:     30 * time.Second,
		},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// CloseIdleConnections closes the Sender's idle keep-alive connections.
func (s *Sender) CloseIdleConnections() {
	s.strict.CloseIdleConnections()
	s.allowed.CloseIdleConnections()
}

// Policy returns the Sender's Policy (shared: do not modify its Allow).
func (s *Sender) Policy() *Policy { return &s.p }

// Send POSTs m once: Content-Type application/json, webhook-id,
// webhook-timestamp (now) and webhook-signature (fresh on every call, so a
// retry is never stale), and X-MCP-Subscription-Id. A body over
// Policy.MaxBody is not sent (CategoryBodyTooLarge). The response body is
// drained up to 64 KiB and dropped. ctx bounds the call, as does
// Policy.Timeout.
func (s *Sender) Send(ctx context.Context, m Message) Outcome {
	if len(m.Body) > s.p.maxBody() {
		return Outcome{Category: CategoryBodyTooLarge, Err: fmt.Errorf("%w: %d bytes, at most %d", ErrBodyTooLarge, len(m.Body), s.p.maxBody())}
	}
	o, _ := s.post(ctx, m, maxResponseRead, false)
	return o
}

// Verify runs the verification handshake with the endpoint at rawURL: it
// POSTs {"type":"verification","challenge":"<nonce>"} (webhook-id
// msg_verification_<random>, signed with secrets like any delivery) and
// succeeds on a 2xx whose body is {"challenge":"<nonce>"}, compared in
// constant time. A 2xx without the echo is CategoryChallengeFailed; other
// failures have their usual categories. A failed verification is not
// retried (Retry false): the subscribe that asked for it fails.
func (s *Sender) Verify(ctx context.Context, rawURL, subscriptionID string, secrets []Secret) Outcome {
	nonce := randomToken(24)
	body, err := json.Marshal(Control{Type: ControlVerification, Challenge: nonce})
	if err != nil {
		return Outcome{Category: CategoryInvalidMessage, Err: err}
	}
	m := Message{ID: ControlID(ControlVerification), SubscriptionID: subscriptionID, URL: rawURL, Body: body, Secrets: secrets}
	o, resp := s.post(ctx, m, maxChallengeRead+1, true)
	o.Retry = false
	if o.Category != "" {
		return o
	}
	var echo struct {
		Challenge string `json:"challenge"`
	}
	switch {
	case len(resp) > maxChallengeRead:
		o.Err = fmt.Errorf("verification: the response body is over %d bytes", maxChallengeRead)
	case json.Unmarshal(resp, &echo) != nil:
		o.Err = errors.New("verification: the response body is not a JSON object with a challenge")
	case subtle.ConstantTimeCompare([]byte(echo.Challenge), []byte(nonce)) != 1:
		o.Err = errors.New("verification: the challenge echoed is not the one sent")
	default:
		return o
	}
	o.Category = CategoryChallengeFailed
	return o
}

// post sends m and reads up to limit bytes of the response body; with
// needBody, a 2xx whose body could not be read is a failure.
func (s *Sender) post(ctx context.Context, m Message, limit int64, needBody bool) (Outcome, []byte) {
	invalid := func(format string, args ...any) (Outcome, []byte) {
		return Outcome{Category: CategoryInvalidMessage, Err: fmt.Errorf("%w: "+format, append([]any{ErrInvalidMessage}, args...)...)}, nil
	}
	if err := headerValue(m.ID); err != nil {
		return invalid("webhook-id %v", err)
	}
	if err := headerValue(m.SubscriptionID); err != nil {
		return invalid("subscription id %v", err)
	}
	if len(m.Secrets) == 0 {
		return invalid("no secret to sign with")
	}
	sigs := make([]string, 0, len(m.Secrets))
	ts := s.p.now()
	for _, sec := range m.Secrets {
		if sec.IsZero() {
			return invalid("a zero Secret")
		}
		sig, err := sec.webhook().Sign(m.ID, ts, m.Body)
		if err != nil {
			return invalid("signing: %v", err)
		}
		sigs = append(sigs, sig)
	}
	u, allowed, err := s.p.parse(m.URL)
	if errors.Is(err, ErrBlockedAddress) {
		return Outcome{Category: CategoryBlockedAddress, Err: err}, nil
	} else if err != nil {
		return Outcome{Category: CategoryInvalidMessage, Err: err}, nil
	}
	client := s.strict
	if allowed {
		client = s.allowed
	}

	ctx, cancel := context.WithTimeout(ctx, s.p.timeout())
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.String(), bytes.NewReader(m.Body))
	if err != nil {
		return Outcome{Category: CategoryInvalidMessage, Err: err}, nil
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "mcpush-webhook")
	req.Header[HeaderID] = []string{m.ID}
	req.Header[HeaderTimestamp] = []string{strconv.FormatInt(ts.Unix(), 10)}
	req.Header[HeaderSignature] = []string{strings.Join(sigs, " ")}
	req.Header.Set(HeaderSubscriptionID, m.SubscriptionID)
	// Replayable: a message is idempotent by its webhook-id (receivers
	// deduplicate on it), so when a kept-alive connection turns out to
	// have been closed by the receiver as the message went out (a
	// receiver's idle timeout, Node's 5 s), the Transport sends it again
	// on a new connection instead of failing the attempt. An empty value
	// marks the request without sending the header (net/http).
	req.Header["Idempotency-Key"] = nil

	resp, err := client.Do(req)
	if err != nil {
		return failure(ctx, err), nil
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, limit))
	o := Outcome{Status: resp.StatusCode}
	switch c := resp.StatusCode; {
	case c >= 200 && c < 300:
		if err != nil && needBody {
			f := failure(ctx, err)
			f.Status = c
			return f, nil
		}
		// A 2xx accepts the message (SEP-3415), even if the rest of
		// its body then failed to arrive.
		return o, body
	case c >= 300 && c < 400:
		o.Category, o.Retry = CategoryRedirect, true
	case c >= 400 && c < 500:
		o.Category = CategoryHTTP4xx
		o.Retry = c != http.StatusGone && c != http.StatusRequestEntityTooLarge
	default:
		o.Category, o.Retry = CategoryHTTP5xx, true
	}
	o.Err = fmt.Errorf("webhook: the endpoint answered %d", resp.StatusCode)
	return o, nil
}

// failure categorises a failed request.
func failure(ctx context.Context, err error) Outcome {
	o := Outcome{Err: err, Retry: true}
	var (
		netErr  net.Error
		verify  *tls.CertificateVerificationError
		unknown x509.UnknownAuthorityError
		host    x509.HostnameError
		invalid x509.CertificateInvalidError
		record  tls.RecordHeaderError
		alert   tls.AlertError
	)
	switch {
	case errors.Is(err, ErrBlockedAddress):
		o.Category, o.Retry = CategoryBlockedAddress, false
	case errors.As(err, &verify), errors.As(err, &unknown), errors.As(err, &host),
		errors.As(err, &invalid), errors.As(err, &record), errors.As(err, &alert):
		o.Category = CategoryTLS
	case errors.Is(err, context.DeadlineExceeded), ctx.Err() != nil,
		errors.As(err, &netErr) && netErr.Timeout():
		o.Category = CategoryTimeout
	default:
		o.Category = CategoryConnectionRefused
	}
	return o
}

// headerValue checks a header value we set from a caller's string:
// printable ASCII, 1 to maxHeaderValue bytes.
func headerValue(v string) error {
	switch {
	case v == "":
		return errors.New("is empty")
	case len(v) > maxHeaderValue:
		return fmt.Errorf("is longer than %d bytes", maxHeaderValue)
	case strings.ContainsFunc(v, func(r rune) bool { return r < ' ' || r > '~' }):
		// Not only control characters: receivers decode header bytes
		// beyond ASCII differently (Node reads them as Latin-1), so a
		// non-ASCII webhook-id would verify under one and not another.
		return errors.New("contains characters other than printable ASCII")
	}
	return nil
}
