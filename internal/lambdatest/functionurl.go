package lambdatest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-lambda-go/events"
)

// DefaultDomain is the Function URL domain of events built here.
const DefaultDomain = "abcdefghijklmnopqrstuvwxyz234567.lambda-url.us-east-1.on.aws"

// IAMCaller is the signer of a request to a Function URL with AuthType
// AWS_IAM, as Lambda puts it in requestContext.authorizer.iam.
type IAMCaller struct {
	AccessKey string
	AccountID string
	CallerID  string
	UserARN   string
	UserID    string
}

// URLOptions describe the Function URL that receives a request.
type URLOptions struct {
	// Domain is the URL's domain; default DefaultDomain.
	Domain string
	// IAM is the signer of the request (AuthType AWS_IAM); nil for
	// AuthType NONE.
	IAM *IAMCaller
	// SourceIP is requestContext.http.sourceIp; default 203.0.113.7.
	SourceIP string
}

// FunctionURLEvent converts an HTTP request into the event a Lambda
// Function URL delivers (payload format 2.0): header names in lower case,
// repeated headers joined with commas, cookies apart, the body as text or,
// when it is not UTF-8, base64. It reads and closes r.Body.
func FunctionURLEvent(r *http.Request, opts *URLOptions) (*events.LambdaFunctionURLRequest, error) {
	if opts == nil {
		opts = &URLOptions{}
	}
	domain := opts.Domain
	if domain == "" {
		domain = DefaultDomain
	}
	sourceIP := opts.SourceIP
	if sourceIP == "" {
		sourceIP = "203.0.113.7"
	}
	var body []byte
	if r.Body != nil {
		var err error
		body, err = io.ReadAll(r.Body)
		r.Body.Close()
		if err != nil {
			return nil, err
		}
	}
	now := time.Now()
	ev := &events.LambdaFunctionURLRequest{
		Version:        "2.0",
		RawPath:        r.URL.EscapedPath(),
		RawQueryString: r.URL.RawQuery,
		Headers:        map[string]string{},
		RequestContext: events.LambdaFunctionURLRequestContext{
			AccountID:    "anonymous",
			RequestID:    fmt.Sprintf("%x", now.UnixNano()),
			APIID:        strings.Split(domain, ".")[0],
			DomainName:   domain,
			DomainPrefix: strings.Split(domain, ".")[0],
			Time:         now.UTC().Format("02/Jan/2006:15:04:05 -0700"),
			TimeEpoch:    now.UnixMilli(),
			HTTP: events.LambdaFunctionURLRequestContextHTTPDescription{
				Method:    r.Method,
				Path:      r.URL.Path,
				Protocol:  "HTTP/1.1",
				SourceIP:  sourceIP,
				UserAgent: r.UserAgent(),
			},
		},
	}
	if ev.RawPath == "" {
		ev.RawPath = "/"
	}
	for k, vs := range r.Header {
		if strings.EqualFold(k, "Cookie") {
			for _, v := range vs {
				for _, c := range strings.Split(v, ";") {
					if c = strings.TrimSpace(c); c != "" {
						ev.Cookies = append(ev.Cookies, c)
					}
				}
			}
			continue
		}
		ev.Headers[strings.ToLower(k)] = strings.Join(vs, ",")
	}
	ev.Headers["host"] = domain
	if q := r.URL.Query(); len(q) > 0 {
		ev.QueryStringParameters = map[string]string{}
		for k, vs := range q {
			ev.QueryStringParameters[k] = strings.Join(vs, ",")
		}
	}
	if opts.IAM != nil {
		ev.RequestContext.AccountID = opts.IAM.AccountID
		ev.RequestContext.Authorizer = &events.LambdaFunctionURLRequestContextAuthorizerDescription{
			IAM: &events.LambdaFunctionURLRequestContextAuthorizerIAMDescription{
				AccessKey: opts.IAM.AccessKey,
				AccountID: opts.IAM.AccountID,
				CallerID:  opts.IAM.CallerID,
				UserARN:   opts.IAM.UserARN,
				UserID:    opts.IAM.UserID,
			},
		}
	}
	if len(body) > 0 {
		if utf8.Valid(body) {
			ev.Body = string(body)
		} else {
			ev.Body = base64.StdEncoding.EncodeToString(body)
			ev.IsBase64Encoded = true
		}
	}
	return ev, nil
}

// HTTPResponse is the HTTP response a Function URL would send for an
// invocation's result.
type HTTPResponse struct {
	StatusCode int
	Header     http.Header
	Cookies    []string
	Body       []byte
	// Chunks is the body as it arrived from the runtime: several for a
	// streamed response, one for a buffered one.
	Chunks []Chunk
}

// prelude is the JSON head of an http-integration-response stream.
type prelude struct {
	StatusCode int               `json:"statusCode"`
	Headers    map[string]string `json:"headers"`
	Cookies    []string          `json:"cookies"`
}

// preludeEnd separates the prelude from the body.
var preludeEnd = make([]byte, 8)

// HTTP decodes the response of a Function URL invocation: a streamed
// application/vnd.awslambda.http-integration-response (prelude, eight NUL
// bytes, body) or a buffered response object (statusCode, headers,
// cookies, body, isBase64Encoded). A function error is an error here.
func (r *Response) HTTP() (*HTTPResponse, error) {
	if r.Err != nil {
		return nil, r.Err
	}
	if r.TimedOut {
		return nil, errTimedOut
	}
	out := &HTTPResponse{}
	if isHTTPIntegration(r.Header) {
		// Split the prelude off the chunks, keeping arrival times.
		var head []byte
		rest := r.Chunks
		for len(rest) > 0 {
			c := rest[0]
			rest = rest[1:]
			head = append(head, c.Data...)
			if i := bytes.Index(head, preludeEnd); i >= 0 {
				if tail := head[i+len(preludeEnd):]; len(tail) > 0 {
					rest = append([]Chunk{{Data: tail, At: c.At}}, rest...)
				}
				head = head[:i]
				break
			}
			if len(rest) == 0 {
				return nil, errors.New("lambdatest: streamed response without the 8-NUL prelude separator")
			}
		}
		p, err := decodePrelude(head)
		if err != nil {
			return nil, err
		}
		out.StatusCode, out.Header, out.Cookies = p.StatusCode, toHeader(p.Headers), p.Cookies
		for _, c := range rest {
			out.Body = append(out.Body, c.Data...)
		}
		out.Chunks = rest
		return out, nil
	}
	var resp events.LambdaFunctionURLResponse
	body := r.Body()
	if err := json.Unmarshal(body, &resp); err != nil {
		return nil, fmt.Errorf("lambdatest: buffered response is not a response object: %w", err)
	}
	out.StatusCode, out.Header, out.Cookies = resp.StatusCode, toHeader(resp.Headers), resp.Cookies
	if out.StatusCode == 0 {
		out.StatusCode = http.StatusOK
	}
	out.Body = []byte(resp.Body)
	if resp.IsBase64Encoded {
		b, err := base64.StdEncoding.DecodeString(resp.Body)
		if err != nil {
			return nil, fmt.Errorf("lambdatest: response body: %w", err)
		}
		out.Body = b
	}
	if len(r.Chunks) > 0 {
		out.Chunks = []Chunk{{Data: out.Body, At: r.Chunks[len(r.Chunks)-1].At}}
	}
	return out, nil
}

func isHTTPIntegration(h http.Header) bool {
	mt, _, _ := mime.ParseMediaType(h.Get("Content-Type"))
	return mt == ContentTypeHTTPIntegration
}

func decodePrelude(b []byte) (*prelude, error) {
	var p prelude
	if err := json.Unmarshal(b, &p); err != nil {
		return nil, fmt.Errorf("lambdatest: bad response prelude %q: %w", b, err)
	}
	if p.StatusCode == 0 {
		p.StatusCode = http.StatusOK
	}
	return &p, nil
}

func toHeader(m map[string]string) http.Header {
	h := http.Header{}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		h.Set(k, m[k])
	}
	return h
}

// Transport is an http.RoundTripper that delivers each request to the
// function behind Server the way a Function URL does: it builds the event
// (FunctionURLEvent), invokes, and turns the result into an http.Response.
// Streamed responses (http-integration-response) reach the caller as they
// arrive; buffered ones when complete. The request's URL host is ignored.
// Safe for concurrent use, though the function serves one invocation at a
// time per runtime loop.
type Transport struct {
	Server *Server
	// URL describes the Function URL (domain, IAM signer).
	URL URLOptions
	// Invoke are the options of every invocation (timeout, streaming).
	Invoke InvokeOptions
}

// RoundTrip implements http.RoundTripper.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	ev, err := FunctionURLEvent(req, &t.URL)
	if err != nil {
		return nil, err
	}
	payload, err := json.Marshal(ev)
	if err != nil {
		return nil, err
	}
	opts := t.Invoke
	opts.RequestID = ""
	inv := t.Server.Invoke(payload, &opts)
	ctx := req.Context()
	h, err := inv.ResponseHeader(ctx)
	if err != nil {
		return nil, err
	}
	resp := &http.Response{
		Status:     "",
		Proto:      "HTTP/1.1",
		ProtoMajor: 1,
		ProtoMinor: 1,
		Request:    req,
	}
	if !isHTTPIntegration(h) {
		r, err := inv.Wait(ctx)
		if err != nil {
			return nil, err
		}
		hr, err := r.HTTP()
		if err != nil {
			return gatewayError(req, err), nil
		}
		resp.StatusCode, resp.Header = hr.StatusCode, hr.Header
		resp.Body = io.NopCloser(bytes.NewReader(hr.Body))
		resp.ContentLength = int64(len(hr.Body))
	} else {
		br := bufio.NewReader(inv.Body())
		head, err := readPrelude(br)
		if err != nil {
			if r, werr := inv.Wait(ctx); werr == nil && (r.Err != nil || r.TimedOut) {
				return gatewayError(req, err), nil
			}
			return nil, err
		}
		p, err := decodePrelude(head)
		if err != nil {
			return nil, err
		}
		resp.StatusCode, resp.Header = p.StatusCode, toHeader(p.Headers)
		resp.Body = io.NopCloser(br)
		resp.ContentLength = -1
	}
	resp.Status = strconv.Itoa(resp.StatusCode) + " " + http.StatusText(resp.StatusCode)
	return resp, nil
}

// readPrelude reads up to and including the 8 NUL bytes.
func readPrelude(br *bufio.Reader) ([]byte, error) {
	var head []byte
	for {
		b, err := br.ReadByte()
		if err != nil {
			return nil, fmt.Errorf("lambdatest: reading the response prelude: %w", err)
		}
		head = append(head, b)
		if bytes.HasSuffix(head, preludeEnd) {
			return head[:len(head)-len(preludeEnd)], nil
		}
	}
}

// gatewayError is the 502 a Function URL answers when the function failed
// before it sent a response.
func gatewayError(req *http.Request, err error) *http.Response {
	body := []byte(`{"Message":"Internal Server Error"}`)
	return &http.Response{
		Status:        "502 Bad Gateway",
		StatusCode:    http.StatusBadGateway,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        http.Header{"Content-Type": {"application/json"}, "X-Lambdatest-Error": {err.Error()}},
		Body:          io.NopCloser(bytes.NewReader(body)),
		ContentLength: int64(len(body)),
		Request:       req,
	}
}

// Do sends one Function URL request through Transport semantics and waits
// for the whole result; convenient for tests that want the invocation's
// full record.
func Do(ctx context.Context, s *Server, req *http.Request, url *URLOptions, opts *InvokeOptions) (*Response, *HTTPResponse, error) {
	ev, err := FunctionURLEvent(req, url)
	if err != nil {
		return nil, nil, err
	}
	payload, err := json.Marshal(ev)
	if err != nil {
		return nil, nil, err
	}
	r, err := s.Invoke(payload, opts).Wait(ctx)
	if err != nil {
		return nil, nil, err
	}
	hr, err := r.HTTP()
	return r, hr, err
}
