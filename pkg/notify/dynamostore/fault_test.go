package dynamostore_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/mcpush/mcpush/internal/moto"
	"github.com/mcpush/mcpush/pkg/notify"
	"github.com/mcpush/mcpush/pkg/notify/dynamostore"
)

// Faults the faultProxy injects.
const (
	faultThrottle   = "throttle"   // 400 ThrottlingException, request not forwarded
	fault500        = "500"        // 500 InternalServerError, not forwarded
	faultDrop       = "drop"       // connection closed, not forwarded
	faultDropAfter  = "drop-after" // forwarded (and applied), then connection closed
	fault500After   = "500-after"  // forwarded (and applied), then 500
	faultSlow       = "slow"       // forwarded after 50 to 300 ms
	faultForwarding = "forwarded"  // no fault
)

var faultKinds = []string{faultThrottle, fault500, faultDrop, faultDropAfter, fault500After, faultSlow}

// faultProxy sits between the SDK and DynamoDB (moto) and injects a fault
// into a fraction rate of requests, spread evenly over faultKinds.
type faultProxy struct {
	target string
	rate   float64
	client *http.Client

	mu     sync.Mutex
	rng    *rand.Rand
	counts map[string]int
}

func newFaultProxy(target string, rate float64, seed uint64) *faultProxy {
	return &faultProxy{
		target: target,
		rate:   rate,
		client: &http.Client{},
		rng:    rand.New(rand.NewPCG(seed, seed)),
		counts: make(map[string]int),
	}
}

func (p *faultProxy) pick() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	f := faultForwarding
	if p.rng.Float64() < p.rate {
		f = faultKinds[p.rng.IntN(len(faultKinds))]
	}
	p.counts[f]++
	return f
}

func (p *faultProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return
	}
	fault := p.pick()
	switch fault {
	case faultThrottle:
		awsError(w, http.StatusBadRequest, "ThrottlingException", "Rate of requests exceeds the allowed throughput.")
		return
	case fault500:
		awsError(w, http.StatusInternalServerError, "InternalServerError", "injected")
		return
	case faultDrop:
		drop(w)
		return
	case faultSlow:
		time.Sleep(time.Duration(50+rand.IntN(250)) * time.Millisecond)
	}
	out, err := http.NewRequestWithContext(r.Context(), r.Method, p.target+r.URL.RequestURI(), bytes.NewReader(body))
	if err != nil {
		drop(w)
		return
	}
	out.Header = r.Header.Clone()
	resp, err := p.client.Do(out)
	if err != nil {
		drop(w)
		return
	}
	defer resp.Body.Close()
	respBody, err := io.ReadAll(resp.Body)
	if err != nil {
		drop(w)
		return
	}
	switch fault {
	case faultDropAfter:
		drop(w)
		return
	case fault500After:
		awsError(w, http.StatusInternalServerError, "InternalServerError", "injected after the write")
		return
	}
	for k, v := range resp.Header {
		w.Header()[k] = v
	}
	w.WriteHeader(resp.StatusCode)
	w.Write(respBody)
}

func awsError(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("Content-Type", "application/x-amz-json-1.0")
	w.WriteHeader(status)
	fmt.Fprintf(w, `{"__type":"com.amazonaws.dynamodb.v20120810#%s","message":%q}`, code, msg)
}

// drop closes the client's connection without a response.
func drop(w http.ResponseWriter) {
	if hj, ok := w.(http.Hijacker); ok {
		if conn, _, err := hj.Hijack(); err == nil {
			conn.Close()
			return
		}
	}
	panic(http.ErrAbortHandler)
}

func (p *faultProxy) stats() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var parts []string
	for _, k := range append([]string{faultForwarding}, faultKinds...) {
		parts = append(parts, fmt.Sprintf("%s=%d", k, p.counts[k]))
	}
	return strings.Join(parts, " ")
}

// faultSeed seeds the fault proxy's choices; a fixed seed makes the
// sequence of faults repeatable, though not their assignment to racing
// requests.
var faultSeed = uint64(time.Now().UnixNano())

// TestFaults runs concurrent CreateSession and Append calls through a
// proxy that injects throttling, 500s, dropped connections (before and
// after the write reached DynamoDB) and slow responses, with the SDK's
// retries on. Each call must succeed or return an error that is not a
// sentinel; afterwards, read without faults, no session is half-created
// and no event log has a gap or a duplicate.
func TestFaults(t *testing.T) {
	ctx := t.Context()
	ep := endpoint(t)
	table := newTable(t)
	clean := dynamostore.New(client(ep), table, nil)
	if err := dynamostore.CreateTable(ctx, client(ep), table); err != nil {
		t.Fatal(err)
	}

	proxy := newFaultProxy(ep, 0.4, faultSeed)
	srv := httptest.NewServer(proxy)
	defer srv.Close()
	faulty := moto.NewClient(ctx, srv.URL, func(o *dynamodb.Options) {
		o.Retryer = retry.NewStandard(func(so *retry.StandardOptions) {
			so.MaxAttempts = 3
			so.MaxBackoff = 100 * time.Millisecond
			so.RateLimiter = ratelimit.None
		})
	})
	st := dynamostore.New(faulty, table, nil)

	const (
		sessions   = 3 // with concurrent appends
		workers    = 4 // per session: even ones use idempotency keys
		perWorker  = 8
		newSession = 8 // created through the faults
	)
	n := time.Now()
	for i := range sessions {
		if err := clean.CreateSession(ctx, &notify.Session{ID: fmt.Sprintf("s%d", i), ExpiresAt: n.Add(time.Hour)}); err != nil {
			t.Fatal(err)
		}
	}

	type outcome struct {
		session, data string
		seq           int64 // reported last seq, 0 on error
		keyed         bool
		err           error
	}
	var (
		mu       sync.Mutex
		outcomes []outcome
		created  = make(map[string]error)
		wg       sync.WaitGroup
	)
	record := func(o outcome) {
		mu.Lock()
		outcomes = append(outcomes, o)
		mu.Unlock()
	}
	for i := range sessions {
		for w := range workers {
			wg.Go(func() {
				id := fmt.Sprintf("s%d", i)
				for j := range perWorker {
					data := fmt.Sprintf("w%d-%d", w, j)
					if w%2 == 1 {
						// No key: one try; an error leaves the outcome open.
						seq, ok, err := st.Append(ctx, id, "s", [][]byte{[]byte(data)}, nil)
						if err == nil && !ok {
							t.Errorf("Append(%s) = %d, false, nil", data, seq)
						}
						record(outcome{id, data, seq, false, err})
						continue
					}
					// With a key: the caller retries until it is done.
					opts := &notify.AppendOptions{IdempotencyKey: data}
					for try := 0; ; try++ {
						seq, ok, err := st.Append(ctx, id, "s", [][]byte{[]byte(data)}, opts)
						if err != nil && try < 20 {
							record(outcome{id, data, 0, true, err})
							continue
						}
						record(outcome{id, data, seq, true, err})
						_ = ok // false: an earlier try that reported an error had appended
						break
					}
				}
			})
		}
	}
	for i := range newSession {
		wg.Go(func() {
			id := fmt.Sprintf("new%d", i)
			err := st.CreateSession(ctx, &notify.Session{ID: id, ExpiresAt: n.Add(time.Hour),
				Subscriptions: []string{"u:a", "u:" + id}})
			mu.Lock()
			created[id] = err
			mu.Unlock()
		})
	}
	wg.Wait()
	t.Logf("seed %d; faults: %s", faultSeed, proxy.stats())

	// Errors are wrapped SDK errors, never sentinels.
	var errs int
	for _, o := range outcomes {
		if o.err != nil {
			errs++
			if !matchErr(o.err, errAny) {
				t.Errorf("Append(%s, %s): %v, want a non-sentinel error", o.session, o.data, o.err)
			}
		}
	}
	for id, err := range created {
		if err != nil {
			errs++
			if !matchErr(err, errAny) {
				t.Errorf("CreateSession(%s): %v, want a non-sentinel error", id, err)
			}
		}
	}
	t.Logf("%d calls, %d errors", len(outcomes)+len(created), errs)

	// The logs: 1..N without gaps; every event once; every success where
	// it was reported; every keyed event present.
	for i := range sessions {
		id := fmt.Sprintf("s%d", i)
		evs, err := clean.ReadEvents(ctx, id, "s", 0, 1000)
		if err != nil {
			t.Fatal(err)
		}
		at := make(map[string]int64)
		for k, ev := range evs {
			if ev.Seq != int64(k+1) {
				t.Fatalf("%s: event %d has seq %d (gap or duplicate)", id, k, ev.Seq)
			}
			if _, dup := at[string(ev.Data)]; dup {
				t.Errorf("%s: %s appended twice", id, ev.Data)
			}
			at[string(ev.Data)] = ev.Seq
		}
		for _, o := range outcomes {
			if o.session != id {
				continue
			}
			seq, found := at[o.data]
			switch {
			case o.err == nil && o.seq > 0 && seq != o.seq:
				t.Errorf("%s: Append(%s) reported seq %d, log has it at %d (found %t)", id, o.data, o.seq, seq, found)
			case o.keyed && !found:
				t.Errorf("%s: keyed Append(%s) is not in the log", id, o.data)
			}
		}
		// The head is at the end of the log.
		next, ok, err := clean.Append(ctx, id, "s", [][]byte{[]byte("last")}, nil)
		if err != nil || !ok || next != int64(len(evs)+1) {
			t.Errorf("%s: Append after the faults = %d, %t, %v; want %d", id, next, ok, err, len(evs)+1)
		}
	}

	// Sessions: all or nothing.
	raw := client(ep)
	for id, err := range created {
		sess, gerr := clean.GetSession(ctx, id)
		res, qerr := raw.Query(ctx, &dynamodb.QueryInput{TableName: aws.String(table), ConsistentRead: aws.Bool(true),
			KeyConditionExpression:    aws.String("pk = :pk"),
			ExpressionAttributeValues: map[string]types.AttributeValue{":pk": &types.AttributeValueMemberS{Value: "S#" + id}}})
		if qerr != nil {
			t.Fatal(qerr)
		}
		subsA, _ := clean.Subscribers(ctx, "u:a")
		subsOwn, _ := clean.Subscribers(ctx, "u:"+id)
		switch {
		case gerr == nil:
			if diff := slices.Compare(sess.Subscriptions, []string{"u:a", "u:" + id}); diff != 0 || len(res.Items) != 3 ||
				!slices.Contains(subsA, id) || !slices.Equal(subsOwn, []string{id}) {
				t.Errorf("CreateSession(%s) (%v): half created: subscriptions %q, %d items, subscribers %q, %q",
					id, err, sess.Subscriptions, len(res.Items), subsA, subsOwn)
			}
		case errors.Is(gerr, notify.ErrNotFound):
			if err == nil {
				t.Errorf("CreateSession(%s) succeeded, but GetSession: %v", id, gerr)
			}
			if len(res.Items) != 0 || slices.Contains(subsA, id) || len(subsOwn) != 0 {
				t.Errorf("CreateSession(%s) (%v): half created: %d items, subscribers %q, %q", id, err, len(res.Items), subsA, subsOwn)
			}
		default:
			t.Fatal(gerr)
		}
	}
}
