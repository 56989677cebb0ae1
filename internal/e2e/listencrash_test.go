package e2e

import (
	"bufio"
	"context"
	"database/sql"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mcpush/mcpush/internal/testenv"
	_ "modernc.org/sqlite"
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

// TestListenCrashCleanup (issue 20, finding 6): a server process holding
// 15 listen streams of a principal is killed with SIGKILL. Right away a
// 2025-era initialize of the principal succeeds on the other process
// (listen streams do not count against MCPUSH_MAX_SESSIONS_PER_PRINCIPAL,
// here 2), and the principal may open listens up to
// MCPUSH_MAX_LISTENS_PER_PRINCIPAL (20) counting the orphans; as the
// orphans' backing sessions expire one more listen is acknowledged, all
// of them expire within a minute of the kill, and an event on
// the topic they subscribed reaches the live streams but writes nothing
// to the orphans' logs.
func TestListenCrashCleanup(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: skips the multi-process crash test")
	}
	storeEnv := SQLiteStore().Env(t)
	dbPath := strings.TrimPrefix(storeEnv[0], "MCPUSH_STORE=sqlite:")
	ingest := &pushIngest{bin: testenv.BuildBinary(t, "./functions/sns-ingest"), env: storeEnv}
	env := append(slices.Clip(storeEnv),
		"MCPUSH_POLL_INTERVAL=100ms",
		"MCPUSH_MAX_SESSIONS_PER_PRINCIPAL=2",
		"MCPUSH_MAX_LISTENS_PER_PRINCIPAL=20")
	c := StartCluster(t, 2, &ClusterOptions{Env: env, ReadyPath: "/healthz"})
	tr := &http.Transport{Proxy: nil}
	t.Cleanup(tr.CloseIdleConnections)
	hc := &http.Client{Transport: tr}
	db, err := sql.Open("sqlite", dbPath)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	liveListens := func(ids ...string) int {
		t.Helper()
		q, args := `SELECT count(*) FROM sessions WHERE id LIKE 'listen-%' AND expires_at > ?`, []any{time.Now().UnixNano()}
		if len(ids) > 0 {
			q += ` AND id IN (?` + strings.Repeat(",?", len(ids)-1) + `)`
			for _, id := range ids {
				args = append(args, id)
			}
		}
		var n int
		if err := db.QueryRow(q, args...).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	const filter = `{"resourceSubscriptions":["events://crash"]}`
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()

	for i := range 15 {
		listen2026(t, ctx, hc, c.URL(0), fmt.Sprintf("doomed-%d", i), filter)
	}
	var orphans []string
	rows, err := db.Query(`SELECT id FROM sessions WHERE id LIKE 'listen-%'`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id string
		rows.Scan(&id)
		orphans = append(orphans, id)
	}
	rows.Close()
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

	// Up to the bound, orphans included; then 429 until they expire.
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
		if time.Since(killed) > time.Minute {
			t.Fatalf("listens still refused a minute after the SIGKILL (%d orphans live)", liveListens(orphans...))
		}
		time.Sleep(500 * time.Millisecond)
	}
	recovered := time.Since(killed)
	t.Logf("a listen over the bound acknowledged %.1fs after the SIGKILL (%d refused before)", recovered.Seconds(), refused)
	if refused == 0 {
		t.Error("no listen was refused while the orphans lived: the bound did not count them")
	}
	// The orphans expire one by one, as they were opened: all within a
	// minute of the kill.
	for liveListens(orphans...) > 0 {
		if time.Since(killed) > time.Minute {
			t.Fatalf("%d orphaned backing sessions still live a minute after the SIGKILL", liveListens(orphans...))
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Logf("all %d orphaned backing sessions expired %.1fs after the SIGKILL", len(orphans), time.Since(killed).Seconds())
	if n := liveListens(); n != 6 {
		t.Errorf("%d live backing sessions, want the 6 open streams", n)
	}

	// An event on the topic: to the live streams, not to the orphans.
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
	var logged int
	args := []any{}
	for _, id := range orphans {
		args = append(args, id)
	}
	if err := db.QueryRow(`SELECT count(*) FROM events WHERE session_id IN (?`+strings.Repeat(",?", len(orphans)-1)+`)`, args...).Scan(&logged); err != nil {
		t.Fatal(err)
	}
	if logged != 0 {
		t.Errorf("the event wrote %d log rows to orphaned backing sessions, want 0", logged)
	}
}
