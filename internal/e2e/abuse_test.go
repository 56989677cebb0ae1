package e2e

import (
	"bufio"
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpush/mcpush/internal/testenv"
	"github.com/mcpush/mcpush/pkg/notify/sqlitestore"
	_ "modernc.org/sqlite"
)

// Bounds of the abuse test: what three processes may use while and after
// they serve issue 12's abusive inputs. RSS is generous for binaries
// built with -race (make test builds them so); the landed build reached
// 1.5 GB on one prompt.
const (
	abuseMaxRSS         = 200 << 20 // per process, at the end
	abuseMaxStoreGrowth = 16 << 20  // the SQLite file and its WAL
	abuseMaxIdleCPU     = 0.3       // CPU seconds per process per second, once the abuse stopped
	abuseEvents         = 30        // events the well-behaved session must get exactly once
	workers             = 8         // abusive requests at once
)

// TestAbuse runs the inputs of issue 12's findings against three server
// processes on one SQLite store behind the round-robin proxy, with fixed
// counts and in bounded time, while a well-behaved session subscribed to
// a topic receives events. Every abusive input must get its bounded
// answer (an error, 404, 408 or 429); afterwards the processes' RSS, the
// store's growth and the processes' CPU use once the abuse stopped must
// stay under the bounds above, and the well-behaved session must have
// received every event exactly once.
func TestAbuse(t *testing.T) {
	if runtime.GOOS != "linux" {
		testenv.RequireComponent(t, "/proc (RSS and CPU of the server processes)", fmt.Errorf("GOOS=%s has no /proc", runtime.GOOS))
	}
	if testing.Short() {
		t.Skip("-short: skips the multi-process abuse test")
	}
	store := SQLiteStore()
	storeEnv := store.Env(t)
	dbPath := strings.TrimPrefix(storeEnv[0], "MCPUSH_STORE=sqlite:")
	ingest := &pushIngest{bin: testenv.BuildBinary(t, "./functions/sns-ingest"), env: storeEnv}
	env := append(slices.Clip(storeEnv),
		"MCPUSH_POLL_INTERVAL=100ms",
		"MCPUSH_REGISTRY_REFRESH=200ms",
		"MCPUSH_MAX_SESSIONS_PER_HOUR=40",
		"MCPUSH_MAX_SESSIONS_PER_PRINCIPAL=20",
		"MCPUSH_BODY_READ_TIMEOUT=1s")
	c := StartCluster(t, 3, &ClusterOptions{Env: env, ReadyPath: "/healthz"})
	p := NewProxy(t, c.BaseURLs()...)
	tr := &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 64}
	t.Cleanup(tr.CloseIdleConnections)
	e := &pushEnv{cluster: c, proxy: p, ingest: ingest, hc: &http.Client{Transport: tr, Timeout: 30 * time.Second}}

	// A prompt whose 200 placeholders multiply an argument.
	ingest.mustDeliver(t, pushSNSRecord{"abuse-prompt", pushRegistryMessage("prompts", "put",
		map[string]any{"name": "many", "arguments": []any{map[string]any{"name": "a"}}, "messages": []any{map[string]any{"text": strings.Repeat("{{a}}", 200)}}})})

	good := e.connect(t, "good")
	good.subscribe("good")
	stream := good.openStream()
	bad := e.connect(t, "bad")
	storeBefore := fileSizes(dbPath, dbPath+"-wal")

	// The abuse: fixed counts, workers at a time.
	type attempt struct {
		name string
		do   func() (int, string) // status, body
		want func(status int, body string) bool
	}
	url := p.URL + "/mcp"
	post := func(session, body string) (int, string) {
		req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if session != "" {
			req.Header.Set("Mcp-Session-Id", session)
		}
		resp, err := e.hc.Do(req)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		var b bytes.Buffer
		b.ReadFrom(resp.Body)
		return resp.StatusCode, b.String()
	}
	rpcError := func(code int) func(int, string) bool {
		return func(status int, body string) bool {
			return strings.Contains(body, `"code":`+strconv.Itoa(code)) && len(body) < 2048
		}
	}
	status := func(want int) func(int, string) bool {
		return func(s int, _ string) bool { return s == want }
	}
	initialize := func(caps string) string {
		return `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":` + caps + `,"clientInfo":{"name":"x","version":"1"}}}`
	}
	var attempts []attempt
	add := func(n int, name string, do func(i int) (int, string), want func(int, string) bool) {
		for i := range n {
			attempts = append(attempts, attempt{name, func() (int, string) { return do(i) }, want})
		}
	}
	bigCaps := `{"x":"` + strings.Repeat("c", 300<<10) + `"}`
	add(10, "initialize with 300 KB capabilities", func(int) (int, string) { return post("", initialize(bigCaps)) }, rpcError(-32602))
	var created, refused sync.Map
	add(60, "initialize flood", func(i int) (int, string) {
		s, b := post("", initialize(`{}`))
		if s == 200 {
			created.Store(i, true)
		} else if s == http.StatusTooManyRequests {
			refused.Store(i, true)
		}
		return s, b
	}, func(s int, _ string) bool { return s == 200 || s == http.StatusTooManyRequests })
	var subscribed sync.Map
	add(110, "subscriptions", func(i int) (int, string) {
		s, b := post(bad.session, fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"resources/subscribe","params":{"uri":"events://t%d"}}`, i))
		if !strings.Contains(b, `"error"`) {
			subscribed.Store(i, true)
		}
		return s, b
	}, status(200))
	add(10, "long subscription URI", func(int) (int, string) {
		return post(bad.session, `{"jsonrpc":"2.0","id":1,"method":"resources/subscribe","params":{"uri":"events://`+strings.Repeat("u", 3<<10)+`"}}`)
	}, rpcError(-32602))
	add(10, "200 KB progressToken", func(int) (int, string) {
		return post(bad.session, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"session_info","arguments":{},"_meta":{"progressToken":"`+strings.Repeat("p", 200<<10)+`"}}}`)
	}, rpcError(-32602))
	add(3, "1 MB tool name", func(int) (int, string) {
		return post(bad.session, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"`+strings.Repeat("n", 1<<20)+`","arguments":{}}}`)
	}, rpcError(-32602))
	add(10, "prompt rendering 200 x 60 KB", func(int) (int, string) {
		return post(bad.session, `{"jsonrpc":"2.0","id":1,"method":"prompts/get","params":{"name":"many","arguments":{"a":"`+strings.Repeat("a", 60<<10)+`"}}}`)
	}, rpcError(-32602))
	add(10, "stray 300 KB responses", func(i int) (int, string) {
		return post(bad.session, fmt.Sprintf(`{"jsonrpc":"2.0","id":"mcpush-stray-%d","result":{"x":"%s"}}`, i, strings.Repeat("r", 300<<10)))
	}, status(http.StatusAccepted))
	add(30, "cancellations of unknown requests", func(i int) (int, string) {
		return post(bad.session, fmt.Sprintf(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"nobody-%d"}}`, i))
	}, status(http.StatusAccepted))
	add(30, "resume of an unknown stream", func(int) (int, string) {
		req, _ := http.NewRequest(http.MethodGet, url, nil)
		req.Header.Set("Accept", "text/event-stream")
		req.Header.Set("Mcp-Session-Id", bad.session)
		req.Header.Set("Last-Event-ID", "fake.0")
		resp, err := e.hc.Do(req)
		if err != nil {
			return 0, err.Error()
		}
		resp.Body.Close()
		return resp.StatusCode, ""
	}, status(http.StatusNotFound))
	add(16, "events_wait abandoned by its client", func(i int) (int, string) {
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer cancel()
		body := fmt.Sprintf(`{"jsonrpc":"2.0","id":"w%d","method":"tools/call","params":{"name":"events_wait","arguments":{"topic":"quiet","timeoutSeconds":3},"_meta":{"progressToken":%d}}}`, i, i)
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Session-Id", bad.session)
		resp, err := e.hc.Do(req)
		if err != nil {
			return 0, "" // the client left first
		}
		resp.Body.Close()
		return resp.StatusCode, ""
	}, func(s int, _ string) bool { return s == 0 || s == 200 || s == http.StatusTooManyRequests })
	add(5, "trickled body", func(i int) (int, string) {
		conn, err := net.Dial("tcp", c.Addr(i%c.Len()))
		if err != nil {
			return 0, err.Error()
		}
		defer conn.Close()
		fmt.Fprintf(conn, "POST /mcp HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: 100\r\n\r\n", c.Addr(i%c.Len()))
		got := make(chan string, 1)
		go func() {
			line, _ := bufio.NewReader(conn).ReadString('\n')
			got <- line
		}()
		for range 100 {
			select {
			case line := <-got:
				if f := strings.Fields(line); len(f) > 1 {
					n, _ := strconv.Atoi(f[1])
					return n, line
				}
				return 0, line
			case <-time.After(100 * time.Millisecond):
				conn.Write([]byte(" "))
			}
		}
		return 0, "no answer"
	}, status(http.StatusRequestTimeout))

	abuseStart := time.Now()
	jobs := make(chan attempt)
	var mu sync.Mutex
	var failures []string
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for a := range jobs {
				s, b := a.do()
				if !a.want(s, b) {
					mu.Lock()
					failures = append(failures, fmt.Sprintf("%s: status %d %.200s", a.name, s, b))
					mu.Unlock()
				}
			}
		})
	}
	// Events for the good session, in three batches during the abuse.
	published := make(chan error, 1)
	go func() {
		for b := range 3 {
			var recs []pushSNSRecord
			for i := range abuseEvents / 3 {
				n := b*abuseEvents/3 + i + 1
				recs = append(recs, pushSNSRecord{fmt.Sprintf("good-%d", n), pushEventMessage("good", map[string]any{"n": n})})
			}
			if _, _, err := ingest.deliver(recs...); err != nil {
				published <- err
				return
			}
		}
		published <- nil
	}()
	for _, a := range attempts {
		jobs <- a
	}
	close(jobs)
	wg.Wait()
	if err := <-published; err != nil {
		t.Fatal(err)
	}
	t.Logf("abuse: %d requests in %v", len(attempts), time.Since(abuseStart).Round(time.Millisecond))
	if len(failures) > 0 {
		t.Errorf("%d abusive requests got an unexpected answer, e.g.:\n%s", len(failures), strings.Join(pushLastN(failures, 10), "\n"))
	}
	count := func(m *sync.Map) (n int) {
		m.Range(func(any, any) bool { n++; return true })
		return n
	}
	// 20 live sessions of the (anonymous) principal, counted in the
	// store: initialize requests racing at the limit may each pass, so
	// the workers may overshoot it by workers-1. The flood's sessions
	// hold nothing, so at the limit the least recently extended of them
	// make room for new ones (reclaimed); 40 sessions per hour (counted
	// in batches of 2 per process) refuse the rest.
	if n := liveSessions(t, dbPath, "addr:127.0.0.1"); n > 20+workers-1 || count(&refused) == 0 {
		t.Errorf("after the initialize flood (%d created, %d refused) the principal has %d live sessions; want at most %d, and some 429", count(&created), count(&refused), n, 20+workers-1)
	}
	// The count is checked against the session as each request loaded
	// it: requests running at once on several processes may each add one.
	if n := count(&subscribed); n > 100+workers {
		t.Errorf("one session holds %d subscriptions, want at most 100 (+%d racing)", n, workers)
	}

	// The well-behaved session got every event exactly once.
	if !stream.waitUntil(30*time.Second, func(msgs []pushMessage) bool {
		return pushCountUpdated(msgs, "good") >= abuseEvents && pushCountMethod(msgs, "notifications/message") >= abuseEvents
	}) {
		t.Errorf("the well-behaved session did not get its %d events: %s", abuseEvents, stream.report())
	}
	seen := map[int64]int{}
	for _, m := range stream.messages() {
		if m.Method == "notifications/message" {
			_, _, d := m.logMessage()
			seen[d.Sequence]++
		}
	}
	for n := int64(1); n <= abuseEvents; n++ {
		if seen[n] != 1 {
			t.Errorf("event %d reached the well-behaved session %d times, want once", n, seen[n])
		}
	}
	if got := pushCountUpdated(stream.messages(), "good"); got != abuseEvents {
		t.Errorf("the well-behaved session got %d resources/updated, want %d", got, abuseEvents)
	}
	if probs := stream.problemList(); len(probs) > 0 {
		t.Errorf("stream problems: %q", probs)
	}

	// Once the abandoned waits are over, the processes idle.
	time.Sleep(4 * time.Second)
	cpu0 := make([]float64, c.Len())
	for i := range c.Len() {
		cpu0[i] = cpuSeconds(t, c.PID(i))
	}
	const idle = 3 * time.Second
	time.Sleep(idle)
	for i := range c.Len() {
		used := cpuSeconds(t, c.PID(i)) - cpu0[i]
		rss := rssBytes(t, c.PID(i))
		t.Logf("process %d: RSS %.1f MB, CPU %.2fs over %v idle", i, float64(rss)/(1<<20), used, idle)
		if used > abuseMaxIdleCPU*idle.Seconds() {
			t.Errorf("process %d used %.2fs CPU in %v after the abuse, want at most %.2fs", i, used, idle, abuseMaxIdleCPU*idle.Seconds())
		}
		if rss > abuseMaxRSS {
			t.Errorf("process %d RSS %d MB, want at most %d MB", i, rss>>20, abuseMaxRSS>>20)
		}
	}
	// What the abuse stored, row by row: no stray response or
	// cancellation, bounded sessions and subscriptions.
	db, err := sql.Open("sqlite", "file:"+dbPath+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows := func(query string) int {
		var n int
		if err := db.QueryRow(query).Scan(&n); err != nil {
			t.Fatalf("%s: %v", query, err)
		}
		return n
	}
	// The events_wait calls that ran 200 ms announced themselves
	// (running/<id>, one tiny row each); nothing else may be there.
	if n := rows(`SELECT count(*) FROM messages WHERE key NOT LIKE 'running/%'`); n != 0 {
		t.Errorf("%d mailbox messages stored, want none (stray responses and unknown cancellations store nothing)", n)
	}
	if n := rows(`SELECT coalesce(sum(length(data)), 0) FROM messages`); n > 16*8 {
		t.Errorf("the mailbox holds %d bytes, want at most a marker per abandoned call", n)
	}
	if n := rows(`SELECT count(*) FROM sessions`); n > 2+40+3*2 {
		t.Errorf("%d sessions stored, want at most %d", n, 2+40+3*2)
	}
	if n := rows(`SELECT count(*) FROM subscriptions`); n > 1+100+workers {
		t.Errorf("%d subscriptions stored, want at most %d", n, 1+100+workers)
	}
	if n := rows(`SELECT coalesce(sum(length(client_capabilities)), 0) FROM sessions`); n > 64<<10 {
		t.Errorf("%d bytes of client capabilities stored, want little (big ones are refused)", n)
	}
	grown := fileSizes(dbPath, dbPath+"-wal") - storeBefore
	t.Logf("store grew %.1f MB", float64(grown)/(1<<20))
	if grown > abuseMaxStoreGrowth {
		t.Errorf("the store grew %d MB, want at most %d MB", grown>>20, abuseMaxStoreGrowth>>20)
	}
}

func fileSizes(paths ...string) int64 {
	var n int64
	for _, p := range paths {
		if fi, err := os.Stat(p); err == nil {
			n += fi.Size()
		}
	}
	return n
}

// procStat returns the fields of /proc/PID/stat after the command name.
func procStat(t *testing.T, pid int) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	return strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
}

// cpuSeconds is the user and system CPU time of process pid (clock ticks
// of 1/100 s, as on every Linux the tests run on).
func cpuSeconds(t *testing.T, pid int) float64 {
	f := procStat(t, pid)
	utime, _ := strconv.ParseFloat(f[11], 64)
	stime, _ := strconv.ParseFloat(f[12], 64)
	return (utime + stime) / 100
}

// rssBytes is the resident set size of process pid.
func rssBytes(t *testing.T, pid int) int64 {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "status"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10
		}
	}
	t.Fatalf("no VmRSS for process %d", pid)
	return 0
}

// liveSessions counts the live sessions of principal in the SQLite store
// at dbPath.
func liveSessions(t *testing.T, dbPath, principal string) int {
	t.Helper()
	st, err := sqlitestore.New(dbPath, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	n, err := st.CountSessions(t.Context(), principal, 1000)
	if err != nil {
		t.Fatal(err)
	}
	return n
}
