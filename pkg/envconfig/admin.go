package envconfig

import "strings"

// DefaultAdminScope is MCPUSH_ADMIN_SCOPE's default.
const DefaultAdminScope = "mcpush:admin"

// maxAdminARNs bounds MCPUSH_ADMIN_ARNS.
const maxAdminARNs = 100

// Admin says who may use the MCP server's admin tools (the operator's
// view of webhook subscriptions, package admintools): functions/mcp.
type Admin struct {
	// Scope is MCPUSH_ADMIN_SCOPE: an OAuth token with this scope is an
	// admin's ("off": no token is). Default DefaultAdminScope.
	Scope string
	// ARNs is MCPUSH_ADMIN_ARNS: comma-separated IAM ARNs whose callers
	// (SigV4, MCPUSH_AUTH=iam) are admins, exactly as the caller's ARN
	// (an assumed role's is arn:aws:sts::<account>:assumed-role/<role>/
	// <session>); at most 100. Empty: none.
	ARNs []string
}

// ReadAdmin reads the admin tools' variables; a bad value is an *Error.
func ReadAdmin(getenv func(string) string) (Admin, error) {
	a := Admin{Scope: strings.TrimSpace(getenv("MCPUSH_ADMIN_SCOPE"))}
	switch {
	case a.Scope == "":
		a.Scope = DefaultAdminScope
	case a.Scope == "off":
		a.Scope = ""
	case strings.ContainsAny(a.Scope, " \t\",") || len(a.Scope) > 128:
		return Admin{}, &Error{Name: "MCPUSH_ADMIN_SCOPE", Value: a.Scope, Want: "one OAuth scope (no space, comma or quote; at most 128 bytes), or off"}
	}
	raw := getenv("MCPUSH_ADMIN_ARNS")
	for _, arn := range strings.Split(raw, ",") {
		if arn = strings.TrimSpace(arn); arn == "" {
			continue
		}
		if !strings.HasPrefix(arn, "arn:") || len(arn) > 2048 || strings.Contains(arn, "*") {
			return Admin{}, &Error{Name: "MCPUSH_ADMIN_ARNS", Value: raw, Want: "comma-separated IAM ARNs (arn:aws:iam::123456789012:user/ops, arn:aws:sts::123456789012:assumed-role/Ops/alice), without wildcards"}
		}
		a.ARNs = append(a.ARNs, arn)
	}
	if len(a.ARNs) > maxAdminARNs {
		return Admin{}, &Error{Name: "MCPUSH_ADMIN_ARNS", Value: raw, Want: "at most 100 ARNs"}
	}
	return a, nil
}
