package testenv

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// sentinelsElsewhere are the package-level errors that may stay outside
// their package's errors.go, with why, keyed by "file name".
var sentinelsElsewhere = map[string]string{}

// TestSentinelsInErrorsGo: in every package under pkg/, each package-level
// error (a var set by errors.New or fmt.Errorf) and each JSON-RPC error code
// (a constant named Code…) is declared in the package's errors.go (STYLE:
// sentinels in errors.go), so that a reader finds a package's errors, and
// what they map to, in one file. A package without an errors.go fails
// here as soon as it declares one. No package is exempt, not even one of
// a single file (eventcursor and eventtools were): the rule is the same
// everywhere, and the errors stay in one place when a second file comes.
func TestSentinelsInErrorsGo(t *testing.T) {
	root := RepoRoot(t)
	for _, files := range libraryPackages(t, root) {
		for _, file := range files {
			if filepath.Base(file) == "errors.go" {
				continue
			}
			rel, _ := filepath.Rel(root, file)
			names, err := errorDecls(file)
			if err != nil {
				t.Fatal(err)
			}
			for _, name := range names {
				if sentinelsElsewhere[filepath.ToSlash(rel)+" "+name] == "" {
					t.Errorf("%s: declare %s in errors.go", rel, name)
				}
			}
		}
	}
}

// errorDecls returns the names of the package-level errors (vars set by
// errors.New or fmt.Errorf) and JSON-RPC codes (constants named Code…)
// that file declares.
func errorDecls(file string) ([]string, error) {
	f, err := parser.ParseFile(token.NewFileSet(), file, nil, 0)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, decl := range f.Decls {
		g, ok := decl.(*ast.GenDecl)
		if !ok || g.Tok != token.VAR && g.Tok != token.CONST {
			continue
		}
		for _, spec := range g.Specs {
			vs := spec.(*ast.ValueSpec)
			for i, name := range vs.Names {
				switch {
				case g.Tok == token.CONST && strings.HasPrefix(name.Name, "Code"):
					names = append(names, name.Name)
				case g.Tok == token.VAR && i < len(vs.Values) && newError(vs.Values[i]):
					names = append(names, name.Name)
				}
			}
		}
	}
	return names, nil
}

// newError reports whether e is a call of errors.New or fmt.Errorf.
func newError(e ast.Expr) bool {
	c, ok := e.(*ast.CallExpr)
	if !ok {
		return false
	}
	s, ok := c.Fun.(*ast.SelectorExpr)
	if !ok {
		return false
	}
	x, ok := s.X.(*ast.Ident)
	return ok && (x.Name == "errors" && s.Sel.Name == "New" || x.Name == "fmt" && s.Sel.Name == "Errorf")
}

// TestRefusalKindsDocumented: every row of pkg/mcp's refusalKinds (the
// one map from a refusal to its HTTP status and JSON-RPC code) is named in
// docs/design.md's Errors section, so that the table there stays the
// whole map.
func TestRefusalKindsDocumented(t *testing.T) {
	root := RepoRoot(t)
	doc, err := os.ReadFile(filepath.Join(root, "docs", "design.md"))
	if err != nil {
		t.Fatal(err)
	}
	section := string(doc)
	start := strings.Index(section, "\n## Errors")
	if start < 0 {
		t.Fatal("docs/design.md has no Errors section")
	}
	section = section[start+1:]
	if end := strings.Index(section, "\n## "); end >= 0 {
		section = section[:end]
	}
	f, err := parser.ParseFile(token.NewFileSet(), filepath.Join(root, "pkg", "mcp", "errors.go"), nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	ast.Inspect(f, func(node ast.Node) bool {
		vs, ok := node.(*ast.ValueSpec)
		if !ok || len(vs.Names) != 1 || vs.Names[0].Name != "refusalKinds" || len(vs.Values) != 1 {
			return true
		}
		for _, row := range vs.Values[0].(*ast.CompositeLit).Elts {
			var name string
			switch e := row.(*ast.CompositeLit).Elts[0].(type) {
			case *ast.Ident:
				name = e.Name
			case *ast.SelectorExpr:
				name = e.X.(*ast.Ident).Name + "." + e.Sel.Name
			default:
				t.Fatalf("refusalKinds row of an unexpected form: %T", e)
			}
			n++
			if !strings.Contains(section, "`"+name+"`") {
				t.Errorf("docs/design.md's Errors section does not name the refusal kind %s", name)
			}
		}
		return false
	})
	if n < 20 {
		t.Errorf("found %d rows of refusalKinds in pkg/mcp/errors.go; the parse is broken", n)
	}
}

// TestOneErrorWriter: outside pkg/mcp, no Go file of the servers (pkg/,
// functions/, cmd/; tests and internal/ test tools aside) spells a
// JSON-RPC message in a string (a "jsonrpc" key or a literal body, as
// pkg/serve's panic answer did): an error answer goes through pkg/mcp's
// one writer, writeError (from pkg/serve, mcp.WriteInternalError), so
// that there is one map from a failure to the status and code a client
// gets. Struct tags are not checked: ingest's notification type has one.
func TestOneErrorWriter(t *testing.T) {
	root := RepoRoot(t)
	n := 0
	for _, dir := range []string{"pkg", "functions", "cmd"} {
		err := filepath.WalkDir(filepath.Join(root, dir), func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(root, path)
			rel = filepath.ToSlash(rel)
			if d.IsDir() {
				if rel == "pkg/mcp" || d.Name() == "testdata" {
					return filepath.SkipDir
				}
				return nil
			}
			if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return nil
			}
			n++
			f, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
			if err != nil {
				return err
			}
			tags := map[*ast.BasicLit]bool{}
			ast.Inspect(f, func(node ast.Node) bool {
				switch x := node.(type) {
				case *ast.Field:
					if x.Tag != nil {
						tags[x.Tag] = true
					}
				case *ast.BasicLit:
					if x.Kind == token.STRING && !tags[x] && strings.Contains(x.Value, "jsonrpc") {
						t.Errorf("%s: a JSON-RPC message built outside pkg/mcp (%s); answer errors with pkg/mcp's writer", rel, x.Value)
					}
				}
				return true
			})
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if n < 50 {
		t.Errorf("checked %d files; the walk is broken", n)
	}
}
