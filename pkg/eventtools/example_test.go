package eventtools_test

import (
	"fmt"
	"log"
	"os"
	"path/filepath"
	"time"

	"github.com/mcpush/mcpush/pkg/eventtools"
	"github.com/mcpush/mcpush/pkg/mcp"
	"github.com/mcpush/mcpush/pkg/notify/sqlitestore"
)

// The event tools beside a program's own: one call adds the four tools
// and the events://{topic} template, reading the events the SNS ingest
// writes to the same store.
func ExampleAdd() {
	dir, err := os.MkdirTemp("", "eventtools-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	store, err := sqlitestore.New(filepath.Join(dir, "mcpush.db"), nil)
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()

	srv := mcp.NewServer(&mcp.Implementation{Name: "demo", Version: "1"}, store, nil)
	eventtools.Add(srv, store, &eventtools.Options{MaxWait: time.Minute})
	fmt.Println(eventtools.Names)
	// Output:
	// [events_recent events_wait session_info topics_list]
}
