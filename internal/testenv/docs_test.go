package testenv

import (
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// libraryPackages returns, for each Go package under root's pkg/, its
// directory and its non-test .go files. It fails t if the walk finds fewer
// packages than there are (a broken walk would let every check pass).
func libraryPackages(t *testing.T, root string) map[string][]string {
	t.Helper()
	pkgs := map[string][]string{}
	err := filepath.WalkDir(filepath.Join(root, "pkg"), func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return err
		}
		if d.Name() == "testdata" {
			return filepath.SkipDir
		}
		files, err := filepath.Glob(filepath.Join(path, "*.go"))
		if err != nil {
			return err
		}
		files = slices.DeleteFunc(files, func(f string) bool { return strings.HasSuffix(f, "_test.go") })
		if len(files) > 0 {
			pkgs[path] = files
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(pkgs) < 14 {
		t.Fatalf("found %d packages under pkg/; the walk is broken", len(pkgs))
	}
	return pkgs
}

// TestPackageDocs: every package under pkg/ has a package doc comment
// that starts "Package <name>", so go doc and pkgsite show one.
func TestPackageDocs(t *testing.T) {
	root := RepoRoot(t)
	for dir, files := range libraryPackages(t, root) {
		var name, doc string
		for _, file := range files {
			f, err := parser.ParseFile(token.NewFileSet(), file, nil, parser.ParseComments|parser.PackageClauseOnly)
			if err != nil {
				t.Fatal(err)
			}
			name = f.Name.Name
			if f.Doc != nil {
				doc += f.Doc.Text()
			}
		}
		rel, _ := filepath.Rel(root, dir)
		if !strings.HasPrefix(doc, "Package "+name+" ") {
			t.Errorf("%s: no package doc starting %q", rel, "Package "+name)
		}
	}
}
