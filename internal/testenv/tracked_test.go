package testenv

import (
	"bytes"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// maxTrackedBytes bounds a file under version control: build output and
// data dumps do not belong there.
const maxTrackedBytes = 5 << 20

// gitFiles lists the files git tracks in the repository at root.
func gitFiles(t *testing.T, root string) []string {
	t.Helper()
	_, err := exec.LookPath("git")
	RequireComponent(t, "git", err)
	cmd := exec.Command("git", "ls-files", "-z")
	cmd.Dir = root
	out, err := cmd.Output()
	RequireComponent(t, "a git checkout", err)
	files := strings.Split(strings.TrimSuffix(string(out), "\x00"), "\x00")
	if len(files) < 50 {
		t.Fatalf("git ls-files lists %d files; the listing is broken", len(files))
	}
	return files
}

// executableMagic names the executable format whose magic number starts
// head, or "".
func executableMagic(head []byte) string {
	switch {
	case bytes.HasPrefix(head, []byte("\x7fELF")):
		return "ELF"
	case bytes.HasPrefix(head, []byte{0xfe, 0xed, 0xfa, 0xce}), bytes.HasPrefix(head, []byte{0xfe, 0xed, 0xfa, 0xcf}),
		bytes.HasPrefix(head, []byte{0xce, 0xfa, 0xed, 0xfe}), bytes.HasPrefix(head, []byte{0xcf, 0xfa, 0xed, 0xfe}),
		bytes.HasPrefix(head, []byte{0xca, 0xfe, 0xba, 0xbe}):
		return "Mach-O"
	case bytes.HasPrefix(head, []byte("MZ")):
		return "PE"
	}
	return ""
}

// TestNoTrackedBinaries: no file git tracks is an executable (ELF, Mach-O,
// PE) or larger than 5 MB.
func TestNoTrackedBinaries(t *testing.T) {
	root := RepoRoot(t)
	for _, name := range gitFiles(t, root) {
		f, err := os.Open(filepath.Join(root, name))
		if errors.Is(err, os.ErrNotExist) {
			continue // deleted in the work tree, not yet committed
		}
		if err != nil {
			t.Fatal(err)
		}
		head := make([]byte, 4)
		n, _ := io.ReadFull(f, head)
		fi, err := f.Stat()
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		if kind := executableMagic(head[:n]); kind != "" {
			t.Errorf("%s is tracked and is an %s executable: git rm --cached it and ignore it in .gitignore", name, kind)
		}
		if fi.Size() > maxTrackedBytes {
			t.Errorf("%s is tracked and has %d bytes, over %d", name, fi.Size(), maxTrackedBytes)
		}
	}
}

func TestExecutableMagic(t *testing.T) {
	for head, want := range map[string]string{
		"\x7fELF\x02":         "ELF",
		"\xcf\xfa\xed\xfe":    "Mach-O",
		"MZ\x90\x00":          "PE",
		"package main\n":      "",
		"go test fuzz v1\n":   "",
		"\x89PNG\r\n\x1a\n":   "",
		"<svg xmlns=\"http:/": "",
		"":                    "",
	} {
		if got := executableMagic([]byte(head)); got != want {
			t.Errorf("executableMagic(%q) = %q, want %q", head, got, want)
		}
	}
}

// TestBuildOutputIgnored: what `go build` of each main leaves in the tree
// (a binary named for the main's directory, at the root for the mains of
// this module, in the directory for an example module) is ignored by git,
// so a build leaves the tree clean.
func TestBuildOutputIgnored(t *testing.T) {
	root := RepoRoot(t)
	gitFiles(t, root) // git and a checkout, or skip/fail
	var paths []string
	for _, pattern := range []string{"functions/*/main.go", "cmd/*/main.go"} {
		mains, err := filepath.Glob(filepath.Join(root, pattern))
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range mains {
			paths = append(paths, filepath.Base(filepath.Dir(m)))
		}
	}
	examples, err := filepath.Glob(filepath.Join(root, "examples", "*", "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range examples {
		name := filepath.Base(filepath.Dir(m))
		paths = append(paths, "examples/"+name+"/"+name)
	}
	paths = append(paths, ".mcpush/mcpush.db", "build/mcp/bootstrap", "examples/counter/.mcpush/counter.db")
	if len(paths) < 6 {
		t.Fatalf("found %d build outputs (%v); the globs are broken", len(paths), paths)
	}
	for _, p := range paths {
		cmd := exec.Command("git", "check-ignore", "-q", "--no-index", p)
		cmd.Dir = root
		if err := cmd.Run(); err != nil {
			t.Errorf("%s (build output) is not ignored by .gitignore: git check-ignore: %v", p, err)
		}
	}
}
