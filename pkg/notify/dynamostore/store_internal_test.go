package dynamostore

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

func TestPart(t *testing.T) {
	long := strings.Repeat("x", maxKeyPart+1)
	tests := []struct {
		in, want string
	}{
		{"abc", "abc"},
		{"a#b", "a%23b"},
		{"a%23b", "a%2523b"},
		{"%", "%25"},
		{strings.Repeat("y", maxKeyPart), strings.Repeat("y", maxKeyPart)},
	}
	for _, tt := range tests {
		if got := part(tt.in); got != tt.want {
			t.Errorf("part(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
	got := part(long)
	if !strings.HasPrefix(got, "%h") || len(got) != 2+64 {
		t.Errorf("part(%d bytes) = %q, want %%h and a SHA-256", len(long), got)
	}
	if part(long+"z") == got {
		t.Error("part: two long parts hash alike")
	}

	// Joined keys stay unambiguous: no two (session, stream) pairs share
	// an event key.
	pairs := [][2]string{{"a#b", "c"}, {"a", "b#c"}, {"a%23b", "c"}, {"a", "%23b#c"}}
	seen := make(map[string][2]string)
	for _, p := range pairs {
		k := sessPK(p[0]) + "|" + eventSK(p[1], 1)
		if other, ok := seen[k]; ok {
			t.Errorf("%q and %q share the key %q", p, other, k)
		}
		seen[k] = p
	}
}

func TestEventKeysSort(t *testing.T) {
	// Event keys sort by sequence number, and a stream's events are
	// contiguous.
	keys := []string{metaSK, markerSK("u"), eventSK("s", 1), eventSK("s", 2), eventSK("s", 10), eventSK("s", 1<<62), eventSK("s0", 1), headSK("s")}
	for i := 1; i < len(keys); i++ {
		if keys[i-1] >= keys[i] {
			t.Errorf("%q sorts after %q", keys[i-1], keys[i])
		}
	}
	if !strings.HasPrefix(markerSK("u"), metaSK) || strings.HasPrefix(headSK("s"), metaSK) ||
		strings.HasPrefix(eventSK("s", 1), metaSK) || strings.HasPrefix(msgSK("m"), metaSK) || strings.HasPrefix(idemSK("i"), metaSK) {
		t.Error(`only the session item and its subscriptions may start with "#"`)
	}
}

func TestEncodeItems(t *testing.T) {
	tests := []map[string]json.RawMessage{
		{},
		{"a": json.RawMessage(`{"x": 1}`)},
		{"b": json.RawMessage(`"b"`), "a": json.RawMessage(" [1, 2]\n"), "": json.RawMessage(`null`)},
		{strings.Repeat("k", 300): json.RawMessage(strings.Repeat("1", 70000))},
	}
	for _, items := range tests {
		got, err := decodeItems(encodeItems(items))
		if err != nil {
			t.Fatalf("decodeItems: %v", err)
		}
		if diff := cmp.Diff(items, got, cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("round trip mismatch (-want +got):\n%s", diff)
		}
	}
	for _, bad := range [][]byte{{5, 'a'}, {1, 'a', 9}, {0x80}} {
		if _, err := decodeItems(bad); !errors.Is(err, errCorrupt) {
			t.Errorf("decodeItems(%q): got %v, want errCorrupt", bad, err)
		}
	}
}

func TestExpiry(t *testing.T) {
	tests := []struct {
		t         time.Time
		exp, secs string
	}{
		{time.Unix(100, 0), "100000000000", "100"},
		{time.Unix(100, 1), "100000000001", "101"}, // TTL rounds up: never deleted early
		{time.Unix(100, 999999999), "100999999999", "101"},
	}
	for _, tt := range tests {
		exp, ttl := expiry(tt.t)
		if got := exp.(*types.AttributeValueMemberN).Value; got != tt.exp {
			t.Errorf("expiry(%v): exp %s, want %s", tt.t, got, tt.exp)
		}
		if got := ttl.(*types.AttributeValueMemberN).Value; got != tt.secs {
			t.Errorf("expiry(%v): expiresAt %s, want %s", tt.t, got, tt.secs)
		}
	}
	now := time.Unix(100, 0).UnixNano()
	it := setExpiry(key("p", "s"), time.Unix(100, 1))
	if !live(it, now) || live(it, now+1) {
		t.Error("live: wrong around exp")
	}
	if live(nil, now) || !live(key("p", "s"), now) {
		t.Error("live: a missing item is not live; an item without exp is")
	}
}

func TestCancellationTransient(t *testing.T) {
	r := func(codes ...string) cancellation {
		var c cancellation
		for _, code := range codes {
			c = append(c, types.CancellationReason{Code: aws.String(code)})
		}
		return c
	}
	tests := []struct {
		c    cancellation
		want bool
	}{
		{r("None", "TransactionConflict"), true},
		{r("ThrottlingError", "None"), true},
		{r("ProvisionedThroughputExceeded"), true},
		{r("None", "None"), false},
		{r("TransactionConflict", "ConditionalCheckFailed"), false},
		{r("ValidationError"), false},
		{r("ItemCollectionSizeLimitExceeded", "TransactionConflict"), false},
	}
	for _, tt := range tests {
		if got := tt.c.transient(); got != tt.want {
			t.Errorf("%v.transient() = %t, want %t", tt.c, got, tt.want)
		}
	}
}

func TestKeyedMutex(t *testing.T) {
	var km keyedMutex
	ctx := context.Background()
	var (
		mu      sync.Mutex
		in, max int
		wg      sync.WaitGroup
	)
	for range 8 {
		wg.Go(func() {
			unlock, err := km.lock(ctx, "k")
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			in++
			max = maxInt(max, in)
			mu.Unlock()
			time.Sleep(time.Millisecond)
			mu.Lock()
			in--
			mu.Unlock()
			unlock()
		})
	}
	wg.Wait()
	if max != 1 {
		t.Errorf("%d holders at once, want 1", max)
	}
	if len(km.m) != 0 {
		t.Errorf("%d keys left, want none", len(km.m))
	}

	// A waiter gives up with its context; other keys are independent.
	unlock, _ := km.lock(ctx, "a")
	if u, err := km.lock(ctx, "b"); err != nil {
		t.Errorf("lock(b) while a is held: %v", err)
	} else {
		u()
	}
	cctx, cancel := context.WithTimeout(ctx, 10*time.Millisecond)
	defer cancel()
	if _, err := km.lock(cctx, "a"); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("lock(a) while held: got %v, want DeadlineExceeded", err)
	}
	unlock()
	if len(km.m) != 0 {
		t.Errorf("%d keys left, want none", len(km.m))
	}
}

func maxInt(a, b int) int { return max(a, b) }
