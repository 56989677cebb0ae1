package e2e

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mcpush/mcpush/internal/moto"
	"github.com/mcpush/mcpush/internal/testenv"
	"github.com/mcpush/mcpush/pkg/notify"
	"github.com/mcpush/mcpush/pkg/notify/storeconfig"
)

// listen2026 posts subscriptions/listen (2026 era) with request id and
// filter to url. For a 200 it waits for the acknowledgement and returns
// the stream's later data lines, until ctx ends or the stream does; for
// any other status it returns the body.
func listen2026(t *testing.T, ctx context.Context, hc *http.Client, url, id, filter string) (int, string, <-chan string) {
	t.Helper()
	body := `{"jsonrpc":"2.0","id":"` + id + `","method":"subscriptions/listen","params":{"notifications":` + filter +
		`,"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", "subscriptions/listen")
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatalf("listen %s: %v", id, err)
	}
	if resp.StatusCode != http.StatusOK {
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b), nil
	}
	lines := make(chan string, 64)
	go func() {
		defer close(lines)
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if v, ok := strings.CutPrefix(sc.Text(), "data:"); ok {
				lines <- strings.TrimSpace(v)
			}
		}
	}()
	select {
	case l, ok := <-lines:
		if !ok || !strings.Contains(l, "notifications/subscriptions/acknowledged") {
			t.Fatalf("listen %s: first message %q, want the acknowledgement", id, l)
		}
	case <-time.After(15 * time.Second):
		t.Fatalf("listen %s: no acknowledgement within 15s", id)
	}
	return resp.StatusCode, "", lines
}

// openStoreEnv opens, in the test's process, the store that env (a
// Store's Env) points a cluster at.
func openStoreEnv(t *testing.T, env []string) storeconfig.Store {
	t.Helper()
	var spec, endpoint string
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "MCPUSH_STORE="); ok {
			spec = v
		}
		if v, ok := strings.CutPrefix(kv, "AWS_ENDPOINT_URL_DYNAMODB="); ok {
			endpoint = v
		}
	}
	opts := &storeconfig.Options{}
	if endpoint != "" {
		opts.DynamoDB = moto.NewClient(context.Background(), endpoint)
	}
	st, err := storeconfig.Open(context.Background(), spec, opts)
	if err != nil {
		t.Fatalf("opening %s: %v", spec, err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// TestListenCrashCleanup (issue 20, finding 6; issue 17), on both stores:
// a server process holding 15 listen streams of a principal is killed
// with SIGKILL. Right away a 2025-era initialize of the principal
// succeeds on the other process (listen streams do not count against
// MCPUSH_MAX_SESSIONS_PER_PRINCIPAL, here 2), and the principal may open
// listens up to MCPUSH_MAX_LISTENS_PER_PRINCIPAL (20) counting the
// orphans; once the dead process's liveness record expires (30 s after
// its last beat) the next listen over the bound reclaims the orphans and
// is acknowledged, within 45 s of the kill although their backing
// sessions would live 5 minutes: all 15 are gone from the store (deleted,
// not expired), the principal has its full quota again, and an event on
// the topic they subscribed reaches the live streams.
func TestListenCrashCleanup(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: skips the multi-process crash test")
	}
	for _, store := range Stores() {
		t.Run(store.Name, func(t *testing.T) { testListenCrashCleanup(t, store) })
	}
}

func testListenCrashCleanup(t *testing.T, store Store) {
	storeEnv := store.Env(t)
	st := openStoreEnv(t, storeEnv)
	ingest := &pushIngest{bin: testenv.BuildBinary(t, "./functions/sns-ingest"), env: storeEnv}
	env := append(slices.Clip(storeEnv),
		"MCPUSH_POLL_INTERVAL=100ms",
		"MCPUSH_MAX_SESSIONS_PER_PRINCIPAL=2",
		"MCPUSH_MAX_LISTENS_PER_PRINCIPAL=20")
	c := StartCluster(t, 2, &ClusterOptions{Env: env, ReadyPath: "/healthz"})
	tr := &http.Transport{Proxy: nil}
	t.Cleanup(tr.CloseIdleConnections)
	hc := &http.Client{Transport: tr}
	const filter = `{"resourceSubscriptions":["events://crash"]}`
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	// The backing sessions, by their subscription to the topic.
	streams := func() []string {
		t.Helper()
		ids, err := st.Subscribers(ctx, "events://crash")
		if err != nil {
			t.Fatal(err)
		}
		return ids
	}

	for i := range 15 {
		listen2026(t, ctx, hc, c.URL(0), fmt.Sprintf("doomed-%d", i), filter)
	}
	orphans := streams()
	if len(orphans) != 15 {
		t.Fatalf("%d backing sessions for 15 listens", len(orphans))
	}
	if err := c.Kill(0); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()

	// The orphans do not lock the principal out of 2025-era sessions.
	req, _ := http.NewRequest(http.MethodPost, c.URL(1), strings.NewReader(
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("initialize right after the kill, with 15 orphaned listens: HTTP %d %s, want 200", resp.StatusCode, b)
	}
	t.Logf("initialize %.1fs after the SIGKILL: HTTP 200", time.Since(killed).Seconds())

	// Up to the bound, orphans included; then 429 until the dead
	// process's liveness record expires and a listen reclaims them.
	var live []<-chan string
	for i := range 5 {
		_, _, lines := listen2026(t, ctx, hc, c.URL(1), fmt.Sprintf("live-%d", i), filter)
		live = append(live, lines)
	}
	refused := 0
	for {
		status, body, lines := listen2026(t, ctx, hc, c.URL(1), fmt.Sprintf("after-%d", refused), filter)
		if status == http.StatusOK {
			live = append(live, lines)
			break
		}
		if status != http.StatusTooManyRequests {
			t.Fatalf("listen while the orphans live: HTTP %d %s, want 429", status, body)
		}
		refused++
		if time.Since(killed) > 45*time.Second {
			t.Fatalf("listens still refused 45 s after the SIGKILL")
		}
		time.Sleep(500 * time.Millisecond)
	}
	recovered := time.Since(killed)
	t.Logf("a listen over the bound acknowledged %.1fs after the SIGKILL (%d refused before)", recovered.Seconds(), refused)
	if refused == 0 {
		t.Error("no listen was refused while the orphans lived: the bound did not count them")
	}
	// Reclaimed, not expired: their own expiry is minutes away.
	for _, id := range orphans {
		if _, err := st.GetSession(ctx, id); !errors.Is(err, notify.ErrNotFound) {
			t.Errorf("orphaned backing session %s after the reclaim: %v, want it gone", id, err)
		}
	}
	if now := streams(); len(now) != 6 || slices.ContainsFunc(now, func(id string) bool { return slices.Contains(orphans, id) }) {
		t.Errorf("backing sessions %q after the reclaim, want the 6 open streams' and no orphan", now)
	}
	// The full quota: 14 more listens, then 429.
	for i := range 14 {
		status, body, lines := listen2026(t, ctx, hc, c.URL(1), fmt.Sprintf("more-%d", i), filter)
		if status != http.StatusOK {
			t.Fatalf("listen %d of the quota after the reclaim: HTTP %d %s", 7+i, status, body)
		}
		live = append(live, lines)
	}
	if status, body, _ := listen2026(t, ctx, hc, c.URL(1), "over", filter); status != http.StatusTooManyRequests {
		t.Errorf("listen 21: HTTP %d %s, want 429", status, body)
	}

	// An event on the topic reaches every live stream.
	ingest.mustDeliver(t, pushSNSRecord{"crash-1", pushEventMessage("crash", map[string]any{"n": 1})})
	for i, lines := range live {
		select {
		case l := <-lines:
			if !strings.Contains(l, "notifications/resources/updated") || !strings.Contains(l, "events://crash") {
				t.Errorf("live stream %d got %q, want resources/updated of events://crash", i, l)
			}
		case <-time.After(15 * time.Second):
			t.Fatalf("live stream %d got no event within 15s", i)
		}
	}
}
