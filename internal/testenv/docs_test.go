package testenv

import (
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
)

// TestPackageDocs: every package under pkg/ has a package doc comment
// that starts "Package <name>", so go doc and pkgsite show one.
func TestPackageDocs(t *testing.T) {
	root := RepoRoot(t)
	n := 0
	err := filepath.WalkDir(filepath.Join(root, "pkg"), func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return err
		}
		if d.Name() == "testdata" {
			return filepath.SkipDir
		}
		entries, err := filepath.Glob(filepath.Join(path, "*.go"))
		if err != nil {
			return err
		}
		var name, doc string
		for _, file := range entries {
			if strings.HasSuffix(file, "_test.go") {
				continue
			}
			f, err := parser.ParseFile(token.NewFileSet(), file, nil, parser.ParseComments|parser.PackageClauseOnly)
			if err != nil {
				return err
			}
			name = f.Name.Name
			if f.Doc != nil {
				doc += f.Doc.Text()
			}
		}
		if name == "" {
			return nil // no Go package here
		}
		n++
		rel, _ := filepath.Rel(root, path)
		if !strings.HasPrefix(doc, "Package "+name+" ") {
			t.Errorf("%s: no package doc starting %q", rel, "Package "+name)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n < 5 {
		t.Errorf("found %d packages under pkg/; the walk is broken", n)
	}
}
