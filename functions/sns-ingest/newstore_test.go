package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRunWarnsNewStore: the CLI warns (a WARN log naming the absolute
// path) when its SQLite file did not exist, as with a typo'd path or
// another working directory; not when it did, even empty, nor on the
// next run; the event is stored either way.
func TestRunWarnsNewStore(t *testing.T) {
	const warning = `"level":"WARN","msg":"sns-ingest: created a new, empty store`
	te := newTestEnv(t)
	if code, out := te.run(t, "-topic", "orders", "-message", "m"); code != exitOK || !strings.Contains(out, `"accepted":1`) {
		t.Fatalf("first run: exit %d: %s", code, out)
	}
	if got := te.stderr.String(); !strings.Contains(got, warning) || !strings.Contains(got, `"store":"sqlite:`+te.db+`"`) {
		t.Errorf("a new store: no warning naming it:\n%s", got)
	}
	if code, _ := te.run(t, "-topic", "orders", "-message", "m2"); code != exitOK || strings.Contains(te.stderr.String(), warning) {
		t.Errorf("second run: exit %d, stderr:\n%s", code, te.stderr.String())
	}

	te = newTestEnv(t)
	if err := os.WriteFile(te.db, nil, 0o600); err != nil { // exists, empty
		t.Fatal(err)
	}
	if code, _ := te.run(t, "-topic", "orders", "-message", "m"); code != exitOK || strings.Contains(te.stderr.String(), warning) {
		t.Errorf("an existing empty file: exit %d, stderr:\n%s", code, te.stderr.String())
	}

	if newSQLiteFile("dynamodb:t") || newSQLiteFile("sqlite::memory:") || !newSQLiteFile("sqlite:"+filepath.Join(t.TempDir(), "none.db")) {
		t.Error("newSQLiteFile: only a SQLite path that does not exist is new")
	}
}
