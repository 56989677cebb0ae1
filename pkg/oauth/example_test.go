package oauth_test

import (
	"errors"
	"fmt"
	"log"
	"net/http/httptest"

	"github.com/mcpush/mcpush/pkg/mcp"
	"github.com/mcpush/mcpush/pkg/oauth"
)

// A Validator is the Authenticator of a StreamableHandler
// (mcp.StreamableOptions.Authenticator), and serves the protected resource
// metadata its challenges point to (MetadataHandler, mounted at
// WellKnownPath and WellKnownPath+"/mcp"). A request without a token gets
// 401 with this challenge:
func ExampleValidator() {
	v, err := oauth.New(&oauth.Options{
		Issuer:   "https://auth.example.com",
		Resource: "https://mcp.example.com/mcp",
		Scopes:   []string{"mcp:tools"},
	})
	if err != nil {
		log.Fatal(err)
	}
	_, err = v.Authenticate(httptest.NewRequest("POST", "https://mcp.example.com/mcp", nil))
	var c mcp.Challenger
	if errors.Is(err, mcp.ErrUnauthorized) && errors.As(err, &c) {
		fmt.Println(c.WWWAuthenticate())
	}
	// Output: Bearer resource_metadata="https://mcp.example.com/.well-known/oauth-protected-resource/mcp", scope="mcp:tools"
}
