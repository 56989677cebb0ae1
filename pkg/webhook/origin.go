package webhook

import (
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
)

// AllowEnv names the environment variable that main packages read for
// ParseAllow. Tests outside the project set it: keep the name.
const AllowEnv = "MCPUSH_WEBHOOK_ALLOW"

// MaxAllow bounds the origins ParseAllow accepts.
const MaxAllow = 64

// Origin is a URL's scheme, host and port ("http://127.0.0.1:9000"), the
// port always explicit (443 and 80 for https and http without one) and the
// host in lower case. Two URLs have the same origin when their Origins are
// equal (==).
type Origin struct {
	Scheme string // "http" or "https"
	Host   string // a name in lower case, or an IP literal without brackets
	Port   string
}

// String returns the origin as scheme://host:port.
func (o Origin) String() string {
	return o.Scheme + "://" + net.JoinHostPort(o.Host, o.Port)
}

// URLOrigin returns the origin of raw, an absolute http or https URL
// (the destination a rate limit per receiver counts under).
func URLOrigin(raw string) (Origin, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return Origin{}, fmt.Errorf("%w: %v", ErrInvalidURL, err)
	}
	o, err := originOf(u)
	if err != nil {
		return Origin{}, fmt.Errorf("%w: %v", ErrInvalidURL, err)
	}
	return o, nil
}

// originOf returns the origin of an absolute http or https URL.
func originOf(u *url.URL) (Origin, error) {
	scheme := strings.ToLower(u.Scheme)
	port := u.Port()
	switch scheme {
	case "https":
		if port == "" {
			port = "443"
		}
	case "http":
		if port == "" {
			port = "80"
		}
	default:
		return Origin{}, fmt.Errorf("scheme %q is not http or https", u.Scheme)
	}
	host := strings.ToLower(u.Hostname())
	if host == "" {
		return Origin{}, fmt.Errorf("no host")
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return Origin{}, fmt.Errorf("port %q is not 1 to 65535", port)
	}
	return Origin{Scheme: scheme, Host: host, Port: port}, nil
}

// ParseAllow parses the MCPUSH_WEBHOOK_ALLOW value: comma-separated
// origins such as "http://127.0.0.1:9000,https://hooks.internal:8443".
// Spaces around an origin are ignored, as is an empty value (nothing
// allowed). Each origin is a scheme (http or https), a host and an
// optional port, with at most a trailing "/": no path, query, fragment or
// userinfo. An allowed origin is exempt from the https requirement and
// from the address checks, and nothing else is. Errors wrap
// ErrInvalidAllow and name the offending entry.
func ParseAllow(env string) ([]Origin, error) {
	var out []Origin
	for item := range strings.SplitSeq(env, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		if len(out) == MaxAllow {
			return nil, fmt.Errorf("%w: more than %d origins", ErrInvalidAllow, MaxAllow)
		}
		o, err := parseOrigin(item)
		if err != nil {
			return nil, fmt.Errorf("%w: %q: %v", ErrInvalidAllow, item, err)
		}
		out = append(out, o)
	}
	return out, nil
}

func parseOrigin(s string) (Origin, error) {
	if len(s) > maxURLLen {
		return Origin{}, fmt.Errorf("longer than %d characters", maxURLLen)
	}
	u, err := url.Parse(s)
	if err != nil {
		return Origin{}, fmt.Errorf("not a URL")
	}
	switch {
	case !u.IsAbs() || u.Opaque != "":
		return Origin{}, fmt.Errorf("not an origin such as http://127.0.0.1:9000")
	case u.User != nil:
		return Origin{}, fmt.Errorf("userinfo is not allowed")
	case u.Path != "" && u.Path != "/", u.RawQuery != "", u.ForceQuery, u.Fragment != "":
		return Origin{}, fmt.Errorf("an origin has no path, query or fragment")
	}
	return originOf(u)
}
