package webhook

import (
	"errors"
	"net/netip"
	"net/url"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestRoutable(t *testing.T) {
	tests := map[string]bool{
		"93.184.215.14": true, "8.8.8.8": true, "1.1.1.1": true,
		"2606:4700:4700::1111": true, "2a00:1450:4001::1": true,
		"::ffff:8.8.8.8": true, "64:ff9b::808:808": true, "2002:808:808::1": true,

		"127.0.0.1": false, "127.255.255.254": false, "0.0.0.0": false, "0.1.2.3": false,
		"10.1.2.3": false, "100.64.0.1": false, "100.127.255.254": false,
		"169.254.169.254": false, "169.254.0.1": false, "172.16.0.1": false, "172.31.255.255": false,
		"192.0.0.9": false, "192.0.2.1": false, "192.168.1.1": false, "198.18.0.1": false, "198.19.255.255": false,
		"198.51.100.7": false, "203.0.113.9": false, "224.0.0.1": false, "239.255.255.250": false,
		"240.0.0.1": false, "255.255.255.255": false,
		"::1": false, "::": false, "fc00::1": false, "fd12:3456::1": false, "fe80::1": false, "febf::1": false,
		"ff02::1": false, "ff0e::1": false, "100::1": false, "2001:db8::1": false, "2001::1": false,
		"2001:1ff::1": false, "3fff::1": false, "::ffff:127.0.0.1": false, "::ffff:169.254.169.254": false,
		"::ffff:10.0.0.1": false, "64:ff9b::7f00:1": false, "64:ff9b::a00:1": false, "64:ff9b:1::1": false,
		"2002:7f00:1::1": false, "2002:a00:1::1": false, "::127.0.0.1": false, "fec0::1": false,
	}
	for s, want := range tests {
		if got := Routable(netip.MustParseAddr(s)); got != want {
			t.Errorf("Routable(%s) = %v, want %v", s, got, want)
		}
	}
	if Routable(netip.MustParseAddr("2606:4700::1%eth0")) {
		t.Error("a zoned address is routable")
	}
	if Routable(netip.Addr{}) {
		t.Error("the zero Addr is routable")
	}
}

func TestCheckURL(t *testing.T) {
	allow, err := ParseAllow("http://127.0.0.1:9000, https://hooks.internal:8443/")
	if err != nil {
		t.Fatal(err)
	}
	p := &Policy{Allow: allow}
	ok := []string{
		"https://example.com/hooks/1",
		"https://example.com:8443/hooks?x=1",
		"https://93.184.215.14/h",
		"https://[2606:4700:4700::1111]/h",
		"http://127.0.0.1:9000/hook",
		"HTTP://127.0.0.1:9000/hook",
		"https://hooks.internal:8443/x",
		"https://Example.COM/h",
		"https://1e100.net/h", "https://example.com./h", "https://0xdead.example/h", "https://123.example/h",
	}
	for _, u := range ok {
		if err := p.CheckURL(u); err != nil {
			t.Errorf("CheckURL(%q): %v", u, err)
		}
	}
	blocked := []string{
		"https://127.0.0.1/h", "https://10.0.0.1/h", "https://192.168.0.10/h", "https://172.20.1.1/h",
		"https://169.254.169.254/latest/meta-data/", "https://[::1]/h", "https://[fe80::1]/h",
		"https://[fd00::1]/h", "https://[::ffff:127.0.0.1]/h", "https://[::ffff:a9fe:a9fe]/h",
		"https://0.0.0.0/h", "https://[::]/h", "https://localhost/h", "https://LOCALHOST./h", "https://api.localhost:8443/h",
		"https://127.0.0.1:9000/hook", // the allowed origin is http
	}
	for _, u := range blocked {
		err := p.CheckURL(u)
		if !errors.Is(err, ErrInvalidURL) || !errors.Is(err, ErrBlockedAddress) {
			t.Errorf("CheckURL(%q) = %v, want ErrInvalidURL and ErrBlockedAddress", u, err)
		}
	}
	invalid := []string{
		"http://example.com/h",       // not https
		"http://127.0.0.1:9001/hook", // allowed host, another port
		"http://127.0.0.1/hook",      // allowed host, port 80
		"https://user:pw@example.com/h",
		"https://example.com/h#frag",
		"https://example.com/h#",
		"https:///h", "https://:443/h",
		"/relative", "example.com/h", "mailto:a@example.com", "ftp://example.com/",
		"https://example.com/" + strings.Repeat("a", 2048),
		"https://example.com/a b", "https://example.com/\x00",
		"https://2130706433/h", "https://0x7f.1/h", "https://127.1/h", "https://0x7f000001/h", "https://017700000001/h",
		"https://1.2.3.4.5/h", "https://example.123/h", "https://example.0x1f./h",
		"https://[::1/h", "https://example.com:99999/h", "https://example.com:0/h",
		"",
	}
	for _, u := range invalid {
		if err := p.CheckURL(u); !errors.Is(err, ErrInvalidURL) {
			t.Errorf("CheckURL(%q) = %v, want ErrInvalidURL", u, err)
		}
	}
}

func TestParseAllow(t *testing.T) {
	got, err := ParseAllow(" http://127.0.0.1:9000 ,https://Hooks.Example/,http://[::1]:8080,,")
	if err != nil {
		t.Fatal(err)
	}
	want := []Origin{{"http", "127.0.0.1", "9000"}, {"https", "hooks.example", "443"}, {"http", "::1", "8080"}}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("ParseAllow (-want +got):\n%s", d)
	}
	if got[2].String() != "http://[::1]:8080" {
		t.Errorf("String() = %q", got[2].String())
	}
	if got, err := ParseAllow(""); err != nil || len(got) != 0 {
		t.Errorf("ParseAllow(\"\") = %v, %v", got, err)
	}
	for _, bad := range []string{
		"127.0.0.1:9000", "http://127.0.0.1:9000/hooks", "http://127.0.0.1:9000?x", "http://127.0.0.1:9000#f",
		"http://u@127.0.0.1:9000", "ftp://127.0.0.1", "http://", "http://127.0.0.1:0", "http://h:70000",
		"garbage", "http://a b", strings.Repeat("http://a,", MaxAllow+1),
	} {
		if _, err := ParseAllow(bad); !errors.Is(err, ErrInvalidAllow) {
			t.Errorf("ParseAllow(%q) = %v, want ErrInvalidAllow", bad, err)
		}
	}
}

// FuzzCheckURL: what CheckURL accepts (no allow list) is an absolute
// https URL of at most 2048 bytes with a host, no userinfo and no
// fragment, whose host, if an IP literal, is routable.
func FuzzCheckURL(f *testing.F) {
	for _, s := range []string{"https://example.com/h", "https://[::1]/", "https://127.0.0.1/", "https://u@h/", "http://h/", "https://h/#f", "https://0x7f.1/"} {
		f.Add(s)
	}
	p := &Policy{}
	f.Fuzz(func(t *testing.T, raw string) {
		if p.CheckURL(raw) != nil {
			return
		}
		u, err := url.Parse(raw)
		if err != nil || len(raw) > maxURLLen || !strings.EqualFold(u.Scheme, "https") || u.Hostname() == "" || u.User != nil || strings.Contains(raw, "#") {
			t.Fatalf("accepted %q", raw)
		}
		if a, err := netip.ParseAddr(u.Hostname()); err == nil && !Routable(a) {
			t.Fatalf("accepted %q: %s is not routable", raw, a)
		}
	})
}

// TestURLOrigin: a URL's origin has its scheme and host in lower case and
// its port explicit, whatever its path; URLs that are not absolute http
// or https are ErrInvalidURL.
func TestURLOrigin(t *testing.T) {
	for raw, want := range map[string]string{
		"https://Hooks.Example.COM/a/b?c=1": "https://hooks.example.com:443",
		"https://hooks.example.com:8443/x":  "https://hooks.example.com:8443",
		"HTTP://127.0.0.1/x":                "http://127.0.0.1:80",
		"https://[2001:db8::1]/x":           "https://[2001:db8::1]:443",
	} {
		o, err := URLOrigin(raw)
		if err != nil || o.String() != want {
			t.Errorf("URLOrigin(%q) = %v, %v; want %s", raw, o, err, want)
		}
	}
	for _, raw := range []string{"", "/relative", "ftp://h/x", "https:///nohost", "https://h:99999/x", "%zz"} {
		if _, err := URLOrigin(raw); !errors.Is(err, ErrInvalidURL) {
			t.Errorf("URLOrigin(%q) = %v, want ErrInvalidURL", raw, err)
		}
	}
}
