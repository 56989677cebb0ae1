package storeconfig_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcpush/mcpush/internal/moto"
	"github.com/mcpush/mcpush/internal/storecount"
	"github.com/mcpush/mcpush/pkg/notify"
	"github.com/mcpush/mcpush/pkg/notify/storeconfig"
)

func TestOpenBadSpec(t *testing.T) {
	for _, spec := range []string{"", "sqlite", "sqlite:", "postgres:db", "dynamodb:"} {
		if st, err := storeconfig.Open(context.Background(), spec, nil); err == nil || !strings.Contains(err.Error(), "want") {
			if st != nil {
				st.Close()
			}
			t.Errorf("Open(%q) = %v, want an error saying what to write", spec, err)
		}
	}
}

// TestOpen opens both kinds and round-trips a topic event through each.
func TestOpen(t *testing.T) {
	ctx := context.Background()
	specs := []string{"sqlite:" + filepath.Join(t.TempDir(), "mcpush.db")}
	if !testing.Short() {
		endpoint := moto.Start(t)
		t.Setenv("AWS_ENDPOINT_URL_DYNAMODB", endpoint)
		t.Setenv("AWS_REGION", "us-east-1")
		t.Setenv("AWS_ACCESS_KEY_ID", "test")
		t.Setenv("AWS_SECRET_ACCESS_KEY", "test")
		specs = append(specs, fmt.Sprintf("dynamodb:storeconfig-%d", time.Now().UnixNano()))
	}
	for _, spec := range specs {
		st, err := storeconfig.Open(ctx, spec, &storeconfig.Options{CreateTable: true})
		if err != nil {
			t.Fatalf("Open(%q): %v", spec, err)
		}
		if _, _, err := st.AppendTopicEvent(ctx, "t", "m-1", time.Now(), []byte(`{"n":1}`)); err != nil {
			t.Errorf("%s: AppendTopicEvent: %v", spec, err)
		}
		evs, err := st.ReadTopicEvents(ctx, "t", 0, 10)
		if err != nil || len(evs) != 1 || string(evs[0].Data) != `{"n":1}` {
			t.Errorf("%s: ReadTopicEvents = %+v, %v", spec, evs, err)
		}
		st.Close()
	}
}

// TestOpenStats: with StatsDir the store is counted into a stats file,
// written last when it is closed, and keeps the optional interfaces the
// server looks for.
func TestOpenStats(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	st, err := storeconfig.Open(ctx, "sqlite:"+filepath.Join(t.TempDir(), "mcpush.db"), &storeconfig.Options{StatsDir: dir, StatsName: "test"})
	if err != nil {
		t.Fatal(err)
	}
	_, rate := st.(notify.RateCounter)
	_, sessions := st.(notify.SessionCounter)
	if !rate || !sessions {
		t.Errorf("counted store: RateCounter %v, SessionCounter %v; want both", rate, sessions)
	}
	if _, _, err := st.AppendTopicEvent(ctx, "t", "m-1", time.Now(), []byte(`{"n":1}`)); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	all, err := storecount.ReadStats(dir)
	if err != nil || len(all) != 1 || all[0].Process != "test" || all[0].Ops.String() != "AppendTopicEvent=1" || all[0].Writes != 1 {
		t.Errorf("stats = %+v, %v; want one file of process test with AppendTopicEvent=1", all, err)
	}
}
