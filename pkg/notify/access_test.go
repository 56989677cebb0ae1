package notify

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseAccess(t *testing.T) {
	long := strings.Repeat("x", MaxAccessString+1)
	many := func(n int) string {
		var vs []string
		for i := range n {
			vs = append(vs, fmt.Sprintf("%q", fmt.Sprint("v", i)))
		}
		return "[" + strings.Join(vs, ",") + "]"
	}
	for _, tc := range []struct {
		in, err string
		want    *Access
	}{
		{in: `{"scopes":["a:read"]}`, want: &Access{Scopes: []string{"a:read"}}},
		{in: `{"claims":{"team":["a","b"]},"bind":{"team":"team"}}`, want: &Access{Claims: map[string][]string{"team": {"a", "b"}}, Bind: map[string]string{"team": "team"}}},
		{in: `{}`, err: "empty"},
		{in: `[]`, err: "JSON object"},
		{in: `null`, err: "JSON object"},
		{in: `{"scope":["a"]}`, err: `unknown member "scope"`},
		{in: `{"scopes":"a"}`, err: "access.scopes: want an array"},
		{in: `{"scopes":[""]}`, err: "access.scopes[0]: empty"},
		{in: `{"scopes":["a","a"]}`, err: "listed twice"},
		{in: `{"scopes":` + many(MaxAccessScopes+1) + `}`, err: "more than 16"},
		{in: `{"claims":{"team":[]}}`, err: "access.claims.team: empty"},
		{in: `{"claims":{"team":"a"}}`, err: "access.claims.team: want an array"},
		{in: `{"claims":{"team":[1]}}`, err: "want an array of strings"},
		{in: `{"claims":{"team":` + many(MaxAccessClaimValues+1) + `}}`, err: "more than 64"},
		{in: `{"claims":{"team":["` + long + `"]}}`, err: "more than 256"},
		{in: `{"claims":[]}`, err: "access.claims: not a JSON object"},
		{in: `{"bind":{"team":1}}`, err: "access.bind.team: want a claim name"},
		{in: `{"bind":{"team":""}}`, err: "access.bind.team: empty"},
		{in: `{"bind":{"":"team"}}`, err: "access.bind argument name: empty"},
		{in: `{"scopes":["a"]} x`, err: "data after the object"},
		{in: `{"scopes":["a"],"scopes":["b"]}`, err: "access.scopes: member appears twice"},
		{in: `{"claims":{"team":["a"],"team":["b"]}}`, err: "access.claims.team: member appears twice"},
		{in: `{"bind":{"team":"team","team":"x"}}`, err: "access.bind.team: member appears twice"},
		{in: `{"claims":null}`, err: "access.claims: not a JSON object"},
	} {
		a, err := ParseAccess(json.RawMessage(tc.in))
		if tc.err != "" {
			if err == nil || !errors.Is(err, ErrBadItem) || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("ParseAccess(%.60s) = %v, want an ErrBadItem containing %q", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("ParseAccess(%s): %v", tc.in, err)
			continue
		}
		if d := cmp.Diff(tc.want, a); d != "" {
			t.Errorf("ParseAccess(%s) (-want +got):\n%s", tc.in, d)
		}
	}
}

func TestAccessPermits(t *testing.T) {
	rule := &Access{
		Scopes: []string{"incidents:read"},
		Claims: map[string][]string{"cognito:groups": {"oncall", "sre"}},
		Bind:   map[string]string{"team": "team"},
	}
	for _, tc := range []struct {
		name   string
		claims string
		want   bool
	}{
		{"all", `{"scope":"openid incidents:read","cognito:groups":["dev","sre"],"team":"a"}`, true},
		{"scp array", `{"scp":["incidents:read"],"cognito:groups":"oncall","team":"b"}`, true},
		{"no scope", `{"scope":"openid","cognito:groups":["sre"],"team":"a"}`, false},
		{"scope prefix only", `{"scope":"incidents:readx","cognito:groups":["sre"],"team":"a"}`, false},
		{"other group", `{"scope":"incidents:read","cognito:groups":["dev"],"team":"a"}`, false},
		{"group not a string", `{"scope":"incidents:read","cognito:groups":[1],"team":"a"}`, false},
		{"no team", `{"scope":"incidents:read","cognito:groups":["sre"]}`, false},
		{"team an array", `{"scope":"incidents:read","cognito:groups":["sre"],"team":["a"]}`, false},
		{"nothing", `{}`, false},
	} {
		var c Claims
		if err := json.Unmarshal([]byte(tc.claims), &c); err != nil {
			t.Fatal(err)
		}
		if got := rule.Permits(c); got != tc.want {
			t.Errorf("%s: Permits = %v, want %v", tc.name, got, tc.want)
		}
	}
	var open *Access
	if !open.Permits(nil) || !open.Admits(nil, nil) {
		t.Error("a nil rule does not permit everyone")
	}
}

func TestAccessAdmitsAndRecord(t *testing.T) {
	rule := &Access{Scopes: []string{"s"}, Bind: map[string]string{"team": "team"}, Claims: map[string][]string{"groups": {"g"}}}
	c := Claims{"scope": "s", "team": "a", "groups": []any{"g"}, "email": "x@example.com", "exp": 1.0}
	rec := rule.Record(c)
	if d := cmp.Diff(Claims{"scope": "s", "team": "a", "groups": []any{"g"}}, rec); d != "" {
		t.Errorf("Record (-want +got):\n%s", d)
	}
	for _, tc := range []struct {
		args string
		want bool
	}{
		{`{"team":"a"}`, true},
		{`{"team":"a","severity":"high"}`, true},
		{`{"team":"b"}`, false},
		{`{}`, false},
		{``, false},
		{`{"team":1}`, false},
	} {
		if got := rule.Admits(rec, json.RawMessage(tc.args)); got != tc.want {
			t.Errorf("Admits(%s) = %v, want %v", tc.args, got, tc.want)
		}
	}
	w := &WebhookSubscription{Claims: rec, Arguments: json.RawMessage(`{"team":"a"}`)}
	if !w.Permitted(&EventItem{Name: "x", Access: rule}) {
		t.Error("Permitted refuses a qualifying subscription")
	}
	if w.Permitted(&EventItem{Name: "x", Access: &Access{Claims: map[string][]string{"groups": {"other"}}}}) {
		t.Error("Permitted admits a subscription whose group was removed")
	}
}

// FuzzParseAccess checks that ParseAccess never panics, refuses with
// ErrBadItem, and that what it accepts is within the bounds and a fixed
// point of encoding and parsing again.
func FuzzParseAccess(f *testing.F) {
	for _, s := range []string{
		`{"scopes":["a"]}`, `{"claims":{"cognito:groups":["oncall","sre"]},"bind":{"team":"team"}}`,
		`{}`, `{"scopes":["a","a"]}`, `{"claims":{"t":[]}}`, `{"bind":{"a":""}}`, `[`, `{"scopes":[1]}`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		a, err := ParseAccess(json.RawMessage(in))
		if err != nil {
			if !errors.Is(err, ErrBadItem) {
				t.Fatalf("error %v does not wrap ErrBadItem", err)
			}
			return
		}
		if len(a.Scopes)+len(a.Claims)+len(a.Bind) == 0 || len(a.Scopes) > MaxAccessScopes || len(a.Claims) > MaxAccessClaims || len(a.Bind) > MaxAccessBinds {
			t.Fatalf("accepted out of bounds: %+v", a)
		}
		b, err := json.Marshal(a)
		if err != nil {
			t.Fatal(err)
		}
		again, err := ParseAccess(b)
		if err != nil {
			t.Fatalf("re-parsing %s: %v", b, err)
		}
		if d := cmp.Diff(a, again); d != "" {
			t.Fatalf("not a fixed point (-first +second):\n%s", d)
		}
		// Evaluation never panics on hostile claims.
		a.Permits(Claims{"scope": in, "scp": []any{in, 1.0}, in: []any{in}})
	})
}
