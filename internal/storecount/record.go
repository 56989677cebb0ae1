package storecount

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/mcpush/mcpush/pkg/envconfig"
	"github.com/mcpush/mcpush/pkg/notify/storeconfig"
)

// DefaultInterval is how often Record writes a process's counts.
const DefaultInterval = 500 * time.Millisecond

// Stats is the content of a stats file: the cumulative store requests of
// one process since it opened its store.
type Stats struct {
	Process string    `json:"process"` // RecordOptions.Name
	PID     int       `json:"pid"`
	Started time.Time `json:"started"` // when the store was opened
	Updated time.Time `json:"updated"` // when Ops were taken
	Reads   int64     `json:"reads"`
	Writes  int64     `json:"writes"`
	Ops     Counts    `json:"ops"`
}

// RecordOptions tune Record. A nil *RecordOptions means all defaults.
type RecordOptions struct {
	// Name names the process in its stats file and starts the file's
	// name; default "store".
	Name string
	// Interval is how often the counts are written when they changed;
	// default DefaultInterval.
	Interval time.Duration
	// Logger reports the writes that fail after the first; default none.
	Logger *slog.Logger
}

// Record returns st with its requests counted as Wrap counts them, and
// writes the counts to a new stats file in dir (created if missing),
// NAME-PID-NANOS.json holding a Stats: once before it returns, then every
// Interval when they changed, and last when the returned store is closed.
// Each write replaces the file whole (a temporary file renamed over it),
// so a reader never sees half a file and a killed process leaves the
// counts of its last write. It returns the file's path; the error is the
// first write's.
func Record(st storeconfig.Store, dir string, opts *RecordOptions) (storeconfig.Store, string, error) {
	var o RecordOptions
	if opts != nil {
		o = *opts
	}
	if o.Name == "" {
		o.Name = "store"
	}
	if o.Interval <= 0 {
		o.Interval = DefaultInterval
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, "", fmt.Errorf("store stats: %w", err)
	}
	now := time.Now()
	r := &recorder{
		path: filepath.Join(dir, fmt.Sprintf("%s-%d-%d.json", o.Name, os.Getpid(), now.UnixNano())),
		c:    &Counter{},
		stats: Stats{
			Process: o.Name,
			PID:     os.Getpid(),
			Started: now,
		},
		last: -1,
		stop: make(chan struct{}),
		done: make(chan struct{}),
	}
	if err := r.write(); err != nil {
		return nil, "", err
	}
	go r.loop(o.Interval, o.Logger)
	s := &store{Store: st, c: r.c}
	s.close = func() error {
		err := r.close()
		return errors.Join(err, st.Close())
	}
	return s, r.path, nil
}

// recorder writes a Counter's counts to a stats file.
type recorder struct {
	path string
	c    *Counter
	stop chan struct{} // closed by close
	done chan struct{} // closed when loop returned

	mu    sync.Mutex // one write at a time
	stats Stats
	last  int64 // the total written last; -1 before the first write

	closeOnce sync.Once
	closeErr  error
}

func (r *recorder) loop(interval time.Duration, logger *slog.Logger) {
	defer close(r.done)
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-r.stop:
			return
		case <-tick.C:
		}
		if err := r.write(); err != nil {
			logger.Warn("writing the store stats", "err", err)
		}
	}
}

// close stops the periodic writes and writes the counts a last time.
func (r *recorder) close() error {
	r.closeOnce.Do(func() {
		close(r.stop)
		<-r.done
		r.closeErr = r.write()
	})
	return r.closeErr
}

// write writes the counts when they changed since the last write.
func (r *recorder) write() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	ops := r.c.Counts()
	if ops == nil {
		ops = Counts{}
	}
	total := ops.Total()
	if total == r.last {
		return nil
	}
	r.stats.Updated = time.Now()
	r.stats.Ops, r.stats.Reads, r.stats.Writes = ops, ops.Reads(), ops.Writes()
	b, err := json.Marshal(r.stats)
	if err != nil {
		return fmt.Errorf("store stats: %w", err)
	}
	if err := writeFile(r.path, append(b, '\n')); err != nil {
		return fmt.Errorf("store stats: %w", err)
	}
	r.last = total
	return nil
}

// writeFile replaces path with data: a temporary file in the same
// directory, renamed over it.
func writeFile(path string, data []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		os.Remove(f.Name())
	}
	return err
}

// ReadStats reads the stats files in dir (the *.json files Record
// writes), sorted by file name.
func ReadStats(dir string) ([]Stats, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		return nil, err
	}
	var all []Stats
	for _, name := range files {
		if strings.HasPrefix(filepath.Base(name), ".") {
			continue
		}
		st, err := readStats(name)
		if err != nil {
			return nil, err
		}
		all = append(all, st)
	}
	return all, nil
}

func readStats(name string) (Stats, error) {
	b, err := os.ReadFile(name)
	if err != nil {
		return Stats{}, err
	}
	var st Stats
	if err := json.Unmarshal(b, &st); err != nil {
		return Stats{}, fmt.Errorf("store stats %s: %w", name, err)
	}
	return st, nil
}

// Open opens the store of c (storeconfig.Open of c.Spec, as both mains
// read it from the environment: envconfig.ReadStore) and, when c.StatsDir
// is set (MCPUSH_STORE_STATS, a diagnostic for load tests), counts its
// requests into a stats file of process name in that directory (Record);
// logger reports the stats writes that fail. Its errors name
// MCPUSH_STORE, or MCPUSH_STORE_STATS when the stats file cannot be
// written.
func Open(ctx context.Context, c envconfig.Store, name string, logger *slog.Logger) (storeconfig.Store, error) {
	st, err := storeconfig.Open(ctx, c.Spec, &storeconfig.Options{CreateTable: c.CreateTable, FeedShards: c.FeedShards})
	if err != nil {
		return nil, fmt.Errorf("MCPUSH_STORE=%q: %w", c.Spec, err)
	}
	if c.StatsDir == "" {
		// Counted only in the process's metrics.
		return Wrap(st, nil), nil
	}
	counted, _, err := Record(st, c.StatsDir, &RecordOptions{Name: name, Logger: logger})
	if err != nil {
		st.Close()
		return nil, fmt.Errorf("MCPUSH_STORE_STATS=%q: %w", c.StatsDir, err)
	}
	return counted, nil
}
