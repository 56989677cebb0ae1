package main

import (
	"flag"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// recordEras wraps e's transport: it records, for each request, the
// protocol era it speaks ("2026" for a 2026-07-28 request, else "2025").
func recordEras(e *env) func() []string {
	var mu sync.Mutex
	var eras []string
	e.httpTransport = roundTripFunc(func(r *http.Request) (*http.Response, error) {
		era := "2025"
		if r.Header.Get("Mcp-Protocol-Version") == "2026-07-28" {
			era = "2026"
		}
		mu.Lock()
		eras = append(eras, era)
		mu.Unlock()
		return http.DefaultTransport.RoundTrip(r)
	})
	return func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), eras...)
	}
}

// TestFlagPositions: flags go anywhere after mcpush (before or after the
// command, after the tool name, between and after tool arguments), and
// "--" ends them.
func TestFlagPositions(t *testing.T) {
	url := newTestServer(t)
	for _, tc := range []struct {
		args []string
		era  string // the era every request must speak
		out  string
	}{
		{[]string{"--url", url, "call", "count", "steps=1"}, "2025", `"counted": 1`},
		{[]string{"call", "--url", url, "count", "steps=1"}, "2025", `"counted": 1`},
		{[]string{"call", "count", "--url", url, "steps=0"}, "2025", `"counted": 0`},
		{[]string{"call", "count", "steps=1", "--url", url}, "2025", `"counted": 1`},
		{[]string{"call", "count", "--protocol", "2026", "steps=1", "--url=" + url}, "2026", `"counted": 1`},
		{[]string{"call", "count", "--url", url, "--protocol", "2026", "label=x", "steps=1"}, "2026", `"label": "x"`},
		{[]string{"--protocol", "2026", "call", "count", "--url", url, "--", "steps=1"}, "2026", `"counted": 1`},
		{[]string{"call", "count", "-v", "--url", url, "--", "label=--url", "steps=1"}, "2025", `"label": "--url"`},
		{[]string{"tools", "--url", url, "--json"}, "2025", `"name": "count"`},
		{[]string{"tools", "--json", "--protocol", "2026", "--url", url}, "2026", `"name": "count"`},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			e, out, errb := testEnv("")
			eras := recordEras(e)
			if code := run(t.Context(), tc.args, e); code != 0 {
				t.Fatalf("exit %d: %s", code, errb)
			}
			if !strings.Contains(out.String(), tc.out) {
				t.Errorf("stdout %q lacks %q", out.String(), tc.out)
			}
			got := eras()
			if len(got) == 0 {
				t.Fatal("no request reached the server")
			}
			for _, era := range got {
				if era != tc.era {
					t.Errorf("requests spoke %v, want all %s", got, tc.era)
					break
				}
			}
		})
	}
}

// TestFlagsEndAtDoubleDash: after "--" a flag-like word is a tool
// argument (here an invalid one), not a flag.
func TestFlagsEndAtDoubleDash(t *testing.T) {
	url := newTestServer(t)
	e, _, errb := testEnv("")
	code := run(t.Context(), []string{"call", "count", "--url", url, "--", "--json"}, e)
	if code != 2 || !strings.Contains(errb.String(), `argument "--json": want key=value`) {
		t.Errorf("exit %d, stderr %q; want 2 and the argument --json refused", code, errb)
	}
}

func TestParseInterspersed(t *testing.T) {
	for _, tc := range []struct {
		args     []string
		want     []string
		url, msg string
		verbose  bool
	}{
		{[]string{"a", "--url", "U", "b"}, []string{"a", "b"}, "U", "", false},
		{[]string{"a", "-v", "b", "--msg=m"}, []string{"a", "b"}, "", "m", true},
		{[]string{"--msg", "--", "a", "--url", "U"}, []string{"a"}, "U", "--", false},
		{[]string{"a", "--", "--url", "U", "--"}, []string{"a", "--url", "U", "--"}, "", "", false},
		{[]string{"--", "-v"}, []string{"-v"}, "", "", false},
		{[]string{"-", "x=1"}, []string{"-", "x=1"}, "", "", false},
		{nil, nil, "", "", false},
	} {
		fs := flag.NewFlagSet("test", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		c := &common{}
		c.register(fs)
		msg := fs.String("msg", "", "")
		got, err := parse(fs, tc.args)
		if err != nil {
			t.Errorf("parse(%q): %v", tc.args, err)
			continue
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("parse(%q) arguments (-want +got):\n%s", tc.args, diff)
		}
		if c.url != tc.url || *msg != tc.msg || c.verbose != tc.verbose {
			t.Errorf("parse(%q): url %q msg %q -v %v; want %q %q %v", tc.args, c.url, *msg, c.verbose, tc.url, tc.msg, tc.verbose)
		}
	}
}

// TestDefaultURL: with neither --url nor MCPUSH_URL the CLI talks to the
// local server's endpoint; MCPUSH_URL overrides that and --url overrides
// both. The transport answers 404 without a network, so a server that
// happens to run on the machine's port 8080 plays no part.
func TestDefaultURL(t *testing.T) {
	for _, tc := range []struct {
		envURL string
		args   []string
		want   string
	}{
		{"", []string{"tools"}, "http://127.0.0.1:8080/mcp"},
		{"", []string{"call", "session_info"}, "http://127.0.0.1:8080/mcp"},
		{"http://env.example/mcp", []string{"tools"}, "http://env.example/mcp"},
		{"http://env.example/mcp", []string{"tools", "--url", "http://flag.example/mcp"}, "http://flag.example/mcp"},
	} {
		e, _, errb := testEnv(tc.envURL)
		var mu sync.Mutex
		var urls []string
		e.httpTransport = roundTripFunc(func(r *http.Request) (*http.Response, error) {
			mu.Lock()
			urls = append(urls, r.URL.String())
			mu.Unlock()
			return &http.Response{StatusCode: http.StatusNotFound, Header: http.Header{}, Body: io.NopCloser(strings.NewReader("not here\n")), Request: r}, nil
		})
		code := run(t.Context(), tc.args, e)
		mu.Lock()
		got := urls
		mu.Unlock()
		if len(got) == 0 || got[0] != tc.want {
			t.Errorf("MCPUSH_URL=%q %q: requests went to %q, want %s", tc.envURL, tc.args, got, tc.want)
		}
		// One layer, one context: the CLI's name, the client's request
		// and URL, the HTTP answer.
		want := "mcpush: mcp: initialize " + tc.want + ": HTTP 404 Not Found: not here\n"
		if code != 1 || errb.String() != want {
			t.Errorf("MCPUSH_URL=%q %q: exit %d, stderr %q; want 1, %q", tc.envURL, tc.args, code, errb.String(), want)
		}
	}
}

// TestErrorNotRepeated: an unreachable server is reported with each
// layer's context once: "mcpush: mcp: initialize URL: dial tcp ...", in
// both eras (server/discover in the 2026 era).
func TestErrorNotRepeated(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now: connection refused
	url := "http://" + addr + "/mcp"
	for _, tc := range []struct{ protocol, method string }{{"2025", "initialize"}, {"2026", "server/discover"}, {"auto", "server/discover"}} {
		e, _, errb := testEnv("")
		code := run(t.Context(), []string{"tools", "--url", url, "--protocol", tc.protocol}, e)
		msg := errb.String()
		prefix := "mcpush: mcp: " + tc.method + " " + url + ": "
		if code != 1 || !strings.HasPrefix(msg, prefix) || !strings.Contains(msg, "refused") {
			t.Errorf("--protocol %s: exit %d, stderr %q; want 1 and %q... connection refused", tc.protocol, code, msg, prefix)
		}
		for _, once := range []string{" mcp: ", tc.method, "http://", "Post"} {
			if n := strings.Count(msg, once); n > 1 {
				t.Errorf("--protocol %s: %q appears %d times in %q", tc.protocol, once, n, msg)
			}
		}
	}
}
