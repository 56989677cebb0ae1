package testenv

import (
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestReadmeLayout: the README's Layout section lists every directory
// holding Go files (a nested module's directory stands for its tree), and
// every directory it lists exists.
func TestReadmeLayout(t *testing.T) {
	root := RepoRoot(t)
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(readme), "\n## Layout\n")
	if !ok {
		t.Fatal("README.md has no ## Layout section")
	}
	_, block, _ := strings.Cut(section, "```\n")
	block, _, _ = strings.Cut(block, "```")

	// Listed directories: "dir/" at the start of a line, or indented
	// "sub/" under the last unindented one.
	var listed []string
	parent := ""
	for _, line := range strings.Split(block, "\n") {
		indented := strings.HasPrefix(line, "  ")
		for _, f := range strings.Fields(line) {
			if !strings.HasSuffix(f, "/") {
				continue
			}
			dir := strings.TrimSuffix(f, "/")
			if indented {
				dir = parent + "/" + dir
			} else {
				parent = dir
			}
			listed = append(listed, dir)
		}
	}
	for _, dir := range listed {
		if fi, err := os.Stat(filepath.Join(root, dir)); err != nil || !fi.IsDir() {
			t.Errorf("README Layout lists %s/, which is not a directory", dir)
		}
	}

	var missing []string
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			name := d.Name()
			if rel != "." && (strings.HasPrefix(name, ".") || name == "testdata" || name == "node_modules" || name == "build") {
				return filepath.SkipDir
			}
			if rel != "." {
				if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil {
					if !slices.Contains(listed, rel) {
						missing = append(missing, rel)
					}
					return filepath.SkipDir // a module of its own
				}
			}
			return nil
		}
		dir := filepath.ToSlash(filepath.Dir(rel))
		if strings.HasSuffix(rel, ".go") && dir != "." && !slices.Contains(listed, dir) && !slices.Contains(missing, dir) {
			missing = append(missing, dir)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, dir := range missing {
		t.Errorf("README Layout does not list %s/", dir)
	}
}
