package oauth_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"errors"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/google/go-cmp/cmp"

	"github.com/mcpush/mcpush/pkg/mcp"
	"github.com/mcpush/mcpush/pkg/notify"
	"github.com/mcpush/mcpush/pkg/oauth"
)

// TestAuthenticateClaims: the validator is an mcp.ClaimsAuthenticator
// whose claims are every claim of a valid token (Cognito's groups and a
// custom team claim among them), which the access rules read; an invalid
// token gives no claims, and a token signed by another key is refused.
func TestAuthenticateClaims(t *testing.T) {
	as := startAS(t)
	v := newValidator(t, as, nil)
	var _ mcp.ClaimsAuthenticator = v
	now := time.Now()
	claims := jwt.MapClaims{"iss": as.Issuer, "sub": "alice", "aud": resource, "scope": "mcp:tools incidents:read",
		"cognito:groups": []string{"oncall"}, "team": "a", "iat": now.Unix(), "exp": now.Add(time.Hour).Unix()}
	r := httptest.NewRequest("POST", resource, nil)
	r.Header.Set("Authorization", "Bearer "+as.Mint(t, claims))
	p, exp, got, err := v.AuthenticateClaims(r)
	if err != nil || p != as.Issuer+"#alice" || exp.IsZero() {
		t.Fatalf("AuthenticateClaims = %q, %v, %v", p, exp, err)
	}
	want := notify.Claims{"iss": as.Issuer, "sub": "alice", "aud": resource, "scope": "mcp:tools incidents:read",
		"cognito:groups": []any{"oncall"}, "team": "a", "iat": float64(now.Unix()), "exp": float64(now.Add(time.Hour).Unix())}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("claims (-want +got):\n%s", diff)
	}
	rule := &notify.Access{Scopes: []string{"incidents:read"}, Claims: map[string][]string{"cognito:groups": {"oncall", "sre"}}, Bind: map[string]string{"team": "team"}}
	if !rule.Permits(got) {
		t.Error("the token's claims do not pass a rule they satisfy")
	}

	// A forged token (the same claims, another key) gives nothing.
	r.Header.Set("Authorization", "Bearer "+forged(t, claims, as.KeyID()))
	if p, _, c, err := v.AuthenticateClaims(r); err == nil || p != "" || c != nil {
		t.Errorf("a forged token: %q, %v, %v", p, c, err)
	}
	var e *oauth.Error
	if _, _, c, err := v.AuthenticateClaims(httptest.NewRequest("POST", resource, nil)); !errors.As(err, &e) || c != nil {
		t.Errorf("no token: %v, %v", c, err)
	}
}

// forged signs claims with a key the authorization server never had,
// under its key id.
func forged(t *testing.T, claims jwt.MapClaims, kid string) string {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tok := jwt.NewWithClaims(jwt.SigningMethodES256, claims)
	tok.Header["kid"] = kid
	s, err := tok.SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}
