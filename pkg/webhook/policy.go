package webhook

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"time"
)

// Defaults of a Policy's zero fields.
const (
	DefaultTimeout = 5 * time.Second
	DefaultMaxBody = 256 << 10 // 256 KiB, SEP-3415's delivery profile
)

// maxURLLen bounds a callback URL (and an allowed origin).
const maxURLLen = 2048

// Resolver resolves host names; net.DefaultResolver satisfies it. Tests
// inject their own to play DNS rebinding.
type Resolver interface {
	LookupIPAddr(ctx context.Context, host string) ([]net.IPAddr, error)
}

// Policy says which callback URLs may be used and how deliveries are made.
// The zero Policy is usable: https only, net.DefaultResolver, a 5 s
// timeout, 256 KiB bodies. A Policy must not be changed once in use; it is
// then safe for concurrent use.
type Policy struct {
	// Allow lists origins (MCPUSH_WEBHOOK_ALLOW, see ParseAllow) exempt
	// from the https requirement and from every address check: a URL
	// whose origin is listed may be http and may reach loopback or
	// private addresses. Nothing else is exempt.
	Allow []Origin
	// AllowAlso, if set, reports further origins exempt as those in Allow
	// are. It is asked at every check, so unlike the rest of the Policy
	// its answers may change while the Policy is in use; it must be safe
	// for concurrent use and fast. Only test builds set it (the Events
	// conformance control events_conformance_allow_callback_origin, see
	// internal/eventsconformance); production Policies leave it nil.
	AllowAlso func(Origin) bool
	// Resolver resolves callback host names at connection time; nil is
	// net.DefaultResolver.
	Resolver Resolver
	// Timeout bounds one POST, from the connection to the end of the
	// response body; 0 is DefaultTimeout.
	Timeout time.Duration
	// MaxBody bounds a delivered body in bytes; 0 is DefaultMaxBody. A
	// longer body is not sent (Outcome category body_too_large).
	MaxBody int
	// TLSConfig, if set, is cloned for the Sender's connections (tests
	// give the root CAs of an httptest.NewTLSServer). nil: the system
	// roots.
	TLSConfig *tls.Config
	// Now is the clock for webhook-timestamp; nil is time.Now.
	Now func() time.Time
}

func (p *Policy) timeout() time.Duration {
	if p.Timeout > 0 {
		return p.Timeout
	}
	return DefaultTimeout
}

func (p *Policy) maxBody() int {
	if p.MaxBody > 0 {
		return p.MaxBody
	}
	return DefaultMaxBody
}

func (p *Policy) resolver() Resolver {
	if p.Resolver != nil {
		return p.Resolver
	}
	return net.DefaultResolver
}

func (p *Policy) now() time.Time {
	if p.Now != nil {
		return p.Now()
	}
	return time.Now()
}

// allowed reports whether o is one of p.Allow.
func (p *Policy) allowed(o Origin) bool {
	return slices.Contains(p.Allow, o) || p.AllowAlso != nil && p.AllowAlso(o)
}

// parse checks raw statically and returns it parsed, with whether its
// origin is allowed. Errors wrap ErrInvalidURL.
func (p *Policy) parse(raw string) (*url.URL, bool, error) {
	if len(raw) > maxURLLen {
		return nil, false, fmt.Errorf("%w: longer than %d characters", ErrInvalidURL, maxURLLen)
	}
	if strings.ContainsFunc(raw, func(r rune) bool { return r <= ' ' || r == 0x7f }) {
		return nil, false, fmt.Errorf("%w: it contains spaces or control characters", ErrInvalidURL)
	}
	u, err := url.Parse(raw)
	if err != nil {
		return nil, false, fmt.Errorf("%w: not a URL", ErrInvalidURL)
	}
	switch {
	case !u.IsAbs() || u.Opaque != "":
		return nil, false, fmt.Errorf("%w: not an absolute https URL", ErrInvalidURL)
	case u.User != nil:
		return nil, false, fmt.Errorf("%w: userinfo (user:password@) is not allowed", ErrInvalidURL)
	case u.Fragment != "" || strings.Contains(raw, "#"):
		return nil, false, fmt.Errorf("%w: a fragment (#...) is not allowed", ErrInvalidURL)
	}
	o, err := originOf(u)
	if err != nil {
		return nil, false, fmt.Errorf("%w: %v", ErrInvalidURL, err)
	}
	if p.allowed(o) {
		return u, true, nil
	}
	if o.Scheme != "https" {
		return nil, false, fmt.Errorf("%w: callback URLs must use https (origin %s is not in %s)", ErrInvalidURL, o, AllowEnv)
	}
	a, err := netip.ParseAddr(o.Host)
	switch {
	case err == nil && !Routable(a):
		return nil, false, fmt.Errorf("%w: %w: %s", ErrInvalidURL, ErrBlockedAddress, o.Host)
	case err == nil:
	case strings.Contains(o.Host, ":"):
		return nil, false, fmt.Errorf("%w: bad IPv6 literal", ErrInvalidURL)
	case isLocalhost(o.Host):
		return nil, false, fmt.Errorf("%w: %w: %s (loopback by RFC 6761)", ErrInvalidURL, ErrBlockedAddress, o.Host)
	case endsInNumber(o.Host):
		// 2130706433, 0x7f.1, 127.1: not IP literals to netip, but IPv4
		// addresses to inet_aton-style resolvers; no DNS name's last
		// label is numeric.
		return nil, false, fmt.Errorf("%w: host %q is neither a DNS name nor a dotted-decimal IPv4 address", ErrInvalidURL, o.Host)
	}
	return u, false, nil
}

// CheckURL is the static check of a callback URL at subscribe time: an
// absolute https URL (or one whose origin is in Allow), at most 2048
// characters, with a host, no userinfo and no fragment; a host that is an
// IP literal must be globally routable (see Routable), and localhost or a
// name under it (RFC 6761) is refused, unless the origin is allowed. It
// does not resolve host names: the Sender checks resolved addresses at
// every connection (and CheckResolved can check them now). Errors wrap
// ErrInvalidURL (JSON-RPC -32602) and may quote the host, never the URL's
// path or query.
func (p *Policy) CheckURL(raw string) error {
	_, _, err := p.parse(raw)
	return err
}

// CheckResolved is CheckURL followed, for a host name whose origin is not
// allowed, by a resolution with the Policy's Resolver: it fails (wrapping
// ErrBlockedAddress) when no resolved address is globally routable. A
// subscribe handler may call it for an early, clear error; it proves
// nothing about delivery time, where the Sender checks again.
func (p *Policy) CheckResolved(ctx context.Context, raw string) error {
	u, allowed, err := p.parse(raw)
	if err != nil || allowed {
		return err
	}
	_, err = p.resolve(ctx, u.Hostname(), true)
	return err
}

// resolve returns the addresses of host (a name or a literal), in the
// resolver's order; with check only the globally routable ones, or an
// error wrapping ErrBlockedAddress when there is none.
func (p *Policy) resolve(ctx context.Context, host string, check bool) ([]netip.Addr, error) {
	if a, err := netip.ParseAddr(host); err == nil {
		if check && !Routable(a) {
			return nil, fmt.Errorf("%w: %s", ErrBlockedAddress, host)
		}
		return []netip.Addr{a.Unmap()}, nil
	}
	ips, err := p.resolver().LookupIPAddr(ctx, host)
	if err != nil {
		return nil, err
	}
	var ok []netip.Addr
	for _, ip := range ips {
		a, good := netip.AddrFromSlice(ip.IP)
		if !good {
			continue
		}
		a = a.WithZone(ip.Zone)
		if !check || Routable(a) {
			ok = append(ok, a.Unmap())
		}
	}
	if len(ok) == 0 && !check {
		return nil, fmt.Errorf("%s resolves to no address", host)
	}
	if len(ok) == 0 {
		return nil, fmt.Errorf("%w: %s resolves to %d address(es), none globally routable", ErrBlockedAddress, host, len(ips))
	}
	return ok, nil
}

// endsInNumber reports whether host's last label (ignoring one trailing
// dot) is a number (decimal, or 0x hexadecimal), as in an IPv4 address,
// canonical or not: the WHATWG URL standard's test for an IPv4 host.
func endsInNumber(host string) bool {
	host = strings.TrimSuffix(host, ".")
	last := host[strings.LastIndexByte(host, '.')+1:]
	if last == "" {
		return false
	}
	if strings.HasPrefix(last, "0x") || strings.HasPrefix(last, "0X") {
		last = last[2:]
		return !strings.ContainsFunc(last, func(r rune) bool {
			return !('0' <= r && r <= '9' || 'a' <= r && r <= 'f' || 'A' <= r && r <= 'F')
		})
	}
	return !strings.ContainsFunc(last, func(r rune) bool { return r < '0' || r > '9' })
}

// isLocalhost reports whether host is localhost or a name under it, which
// RFC 6761 reserves for loopback.
func isLocalhost(host string) bool {
	host = strings.TrimSuffix(host, ".")
	return host == "localhost" || strings.HasSuffix(host, ".localhost")
}
