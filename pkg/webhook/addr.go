package webhook

import (
	"net/netip"
)

// blocked4 lists the IPv4 special-purpose blocks (IANA IPv4 Special-Purpose
// Address Registry, and multicast and the reserved 240/4) that a callback
// may not reach. The registry marks a few single addresses inside
// 192.0.0.0/24 as globally reachable (192.0.0.9, 192.0.0.10); they are
// anycast service addresses, not webhook receivers, so the whole /24 is
// refused.
var blocked4 = prefixes(
	"0.0.0.0/8",       // "this network"
	"10.0.0.0/8",      // private
	"100.64.0.0/10",   // shared address space (CGNAT)
	"127.0.0.0/8",     // loopback
	"169.254.0.0/16",  // link-local, cloud metadata (169.254.169.254)
	"172.16.0.0/12",   // private
	"192.0.0.0/24",    // IETF protocol assignments
	"192.0.2.0/24",    // TEST-NET-1
	"192.31.196.0/24", // AS112-v4
	"192.52.193.0/24", // AMT
	"192.88.99.0/24",  // deprecated 6to4 relay anycast
	"192.168.0.0/16",  // private
	"192.175.48.0/24", // direct delegation AS112
	"198.18.0.0/15",   // benchmarking
	"198.51.100.0/24", // TEST-NET-2
	"203.0.113.0/24",  // TEST-NET-3
	"224.0.0.0/4",     // multicast
	"240.0.0.0/4",     // reserved, and 255.255.255.255 broadcast
)

// blocked6 lists IPv6 blocks refused inside the global unicast range
// 2000::/3 (everything outside 2000::/3 is refused, except the two
// translation prefixes that embed an IPv4 address, checked as IPv4).
var blocked6 = prefixes(
	"2001::/23",     // IETF protocol assignments (Teredo, ORCHID, benchmarking, ...)
	"2001:db8::/32", // documentation
	"3fff::/20",     // documentation (RFC 9637)
	"5f00::/16",     // SRv6 SIDs
)

var (
	nat64     = netip.MustParsePrefix("64:ff9b::/96") // well-known NAT64: IPv4 in the last 32 bits
	sixToFour = netip.MustParsePrefix("2002::/16")    // 6to4: IPv4 in bits 16..47
	globalV6  = netip.MustParsePrefix("2000::/3")
)

func prefixes(ss ...string) []netip.Prefix {
	out := make([]netip.Prefix, len(ss))
	for i, s := range ss {
		out[i] = netip.MustParsePrefix(s)
	}
	return out
}

// Routable reports whether a is a globally routable unicast address that a
// callback may reach: not in the IANA IPv4 and IPv6 special-purpose blocks
// that are not globally reachable (loopback, private, shared, link-local,
// cloud metadata, documentation, benchmarking, multicast, reserved, ULA,
// discard-only, ...). IPv4-mapped IPv6 addresses (::ffff:a.b.c.d) and the
// IPv4 addresses embedded in NAT64 (64:ff9b::/96) and 6to4 (2002::/16)
// addresses are judged as that IPv4 address. An address with a zone is
// never routable.
func Routable(a netip.Addr) bool {
	if !a.IsValid() || a.Zone() != "" {
		return false
	}
	if a.Is4In6() {
		a = a.Unmap()
	}
	if a.Is4() {
		for _, p := range blocked4 {
			if p.Contains(a) {
				return false
			}
		}
		return true
	}
	b := a.As16()
	switch {
	case nat64.Contains(a):
		return Routable(netip.AddrFrom4([4]byte{b[12], b[13], b[14], b[15]}))
	case sixToFour.Contains(a):
		return Routable(netip.AddrFrom4([4]byte{b[2], b[3], b[4], b[5]}))
	case !globalV6.Contains(a):
		return false // ::, ::1, fc00::/7, fe80::/10, ff00::/8, 100::/64, 64:ff9b:1::/48, ...
	}
	for _, p := range blocked6 {
		if p.Contains(a) {
			return false
		}
	}
	return true
}
