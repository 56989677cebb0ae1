package mcp

import (
	"fmt"
	"regexp"
	"strings"
)

// compileTemplate turns an RFC 6570 level-1 URI template into a regexp:
// each {var} matches one or more characters other than '/', '?' and '#'
// (a query or fragment is not part of a variable).
func compileTemplate(tmpl string) (*regexp.Regexp, error) {
	var b strings.Builder
	b.WriteString("^")
	rest := tmpl
	for {
		i := strings.IndexByte(rest, '{')
		if i < 0 {
			b.WriteString(regexp.QuoteMeta(rest))
			break
		}
		j := strings.IndexByte(rest[i:], '}')
		if j < 0 {
			return nil, fmt.Errorf("unclosed '{' in %q", tmpl)
		}
		name := rest[i+1 : i+j]
		if name == "" || strings.ContainsAny(name, "{/") {
			return nil, fmt.Errorf("bad variable %q in %q", name, tmpl)
		}
		b.WriteString(regexp.QuoteMeta(rest[:i]))
		b.WriteString(`(?P<` + sanitizeGroup(name) + `>[^/?#]+)`)
		rest = rest[i+j+1:]
	}
	b.WriteString("$")
	return regexp.Compile(b.String())
}

func sanitizeGroup(name string) string {
	return strings.Map(func(r rune) rune {
		if r == '_' || ('a' <= r && r <= 'z') || ('A' <= r && r <= 'Z') || ('0' <= r && r <= '9') {
			return r
		}
		return '_'
	}, name)
}

// TemplateVars returns the variables of uri matched against tmpl, or nil
// when it does not match.
func TemplateVars(tmpl, uri string) map[string]string {
	re, err := compileTemplate(tmpl)
	if err != nil {
		return nil
	}
	m := re.FindStringSubmatch(uri)
	if m == nil {
		return nil
	}
	vars := map[string]string{}
	for i, n := range re.SubexpNames() {
		if i > 0 && n != "" {
			vars[n] = m[i]
		}
	}
	return vars
}
