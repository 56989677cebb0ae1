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
// their package's errors.go, with why.
var sentinelsElsewhere = map[string]string{}

// TestSentinelsInErrorsGo: in a package under pkg/ that has an errors.go,
// every package-level error (a var set by errors.New or fmt.Errorf) is
// declared there (STYLE: sentinels in errors.go), so that a reader finds a
// package's errors, and what they map to, in one file.
func TestSentinelsInErrorsGo(t *testing.T) {
	root := RepoRoot(t)
	n := 0
	err := filepath.WalkDir(filepath.Join(root, "pkg"), func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return err
		}
		if d.Name() == "testdata" {
			return filepath.SkipDir
		}
		if _, err := os.Stat(filepath.Join(path, "errors.go")); err != nil {
			return nil
		}
		n++
		files, err := filepath.Glob(filepath.Join(path, "*.go"))
		if err != nil {
			return err
		}
		for _, file := range files {
			if strings.HasSuffix(file, "_test.go") || filepath.Base(file) == "errors.go" {
				continue
			}
			f, err := parser.ParseFile(token.NewFileSet(), file, nil, 0)
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(root, file)
			for _, decl := range f.Decls {
				g, ok := decl.(*ast.GenDecl)
				if !ok || g.Tok != token.VAR {
					continue
				}
				for _, spec := range g.Specs {
					vs := spec.(*ast.ValueSpec)
					for i, v := range vs.Values {
						if !newError(v) || i >= len(vs.Names) {
							continue
						}
						key := filepath.ToSlash(rel) + " " + vs.Names[i].Name
						if sentinelsElsewhere[key] == "" {
							t.Errorf("%s: declare the error %s in errors.go", rel, vs.Names[i].Name)
						}
					}
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n < 5 {
		t.Errorf("found %d packages with an errors.go under pkg/; the walk is broken", n)
	}
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
