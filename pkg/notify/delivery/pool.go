package delivery

import (
	"container/heap"
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/mcpush/mcpush/pkg/metrics"
	"github.com/mcpush/mcpush/pkg/notify"
)

// Defaults of PoolOptions.
const (
	DefaultWorkers       = 32
	DefaultPollInterval  = 250 * time.Millisecond
	DefaultSweepInterval = 15 * time.Second
	DefaultMaxPending    = 100_000
)

// PoolOptions configure a Pool.
type PoolOptions struct {
	// Workers run tasks at once. Default DefaultWorkers.
	Workers int
	// PollInterval: how often Run reads the store's topic heads to find
	// events appended by other processes. Default DefaultPollInterval.
	PollInterval time.Duration
	// SweepInterval: how often Run sweeps (Engine.Sweep). Default
	// DefaultSweepInterval.
	SweepInterval time.Duration
	// MaxPending bounds the tasks waiting (tasks with one key coalesce,
	// so it bounds subscriptions and pages): beyond it a task is dropped,
	// counted and left to the sweep. Default DefaultMaxPending.
	MaxPending int
	// Grace is how long Run lets the attempts in flight finish after its
	// context ends (each task stops before its next attempt and releases
	// its claim). Default 6 s: the default Sender timeout and a second.
	Grace  time.Duration
	Logger *slog.Logger
}

// Pool is the in-process [Queue] of a local server: tasks wait in memory
// (delays on a timer heap) and [Pool.Run]'s workers handle them with an
// [Engine].
// Tasks with one key (one subscription, one page of one topic) coalesce:
// a task enqueued while its twin runs runs once more after it, so a
// subscription is worked by one worker of the process at a time and no
// event appended meanwhile waits for the sweep. Safe for concurrent use.
type Pool struct {
	o    PoolOptions
	wake chan struct{}

	mu      sync.Mutex
	items   map[string]*poolItem
	queue   poolHeap
	seq     uint64 // enqueue order: due times that tie run first come, first served
	dropped int64
	closed  bool
}

type poolItem struct {
	task    Task
	due     time.Time
	seq     uint64
	index   int // in the heap; -1 while running
	running bool
	again   bool // enqueued while running: run once more
	againAt time.Time
}

// NewPool returns a Pool under o (nil: defaults).
func NewPool(o *PoolOptions) *Pool {
	var opts PoolOptions
	if o != nil {
		opts = *o
	}
	if opts.Workers <= 0 {
		opts.Workers = DefaultWorkers
	}
	if opts.PollInterval <= 0 {
		opts.PollInterval = DefaultPollInterval
	}
	if opts.SweepInterval <= 0 {
		opts.SweepInterval = DefaultSweepInterval
	}
	if opts.MaxPending <= 0 {
		opts.MaxPending = DefaultMaxPending
	}
	if opts.Grace <= 0 {
		opts.Grace = 6 * time.Second
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	return &Pool{o: opts, wake: make(chan struct{}, 1), items: map[string]*poolItem{}}
}

// Enqueue implements Queue. It never blocks on a worker.
func (p *Pool) Enqueue(_ context.Context, tasks ...Task) error {
	now := time.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil
	}
	for _, t := range tasks {
		due := now.Add(t.Delay)
		k := t.key()
		if it := p.items[k]; it != nil {
			if it.running {
				if !it.again || due.Before(it.againAt) {
					it.againAt = due
				}
				it.again = true
				it.task = mergeTask(it.task, t)
				continue
			}
			deferred := it.task.Defer > 0
			it.task = mergeTask(it.task, t)
			if due.Before(it.due) && !deferred {
				// (A task put back because its origin is busy keeps
				// its time: running it sooner only finds the origin
				// busy again, ahead of other origins' work.)
				it.due = due
				heap.Fix(&p.queue, it.index)
			}
			continue
		}
		if len(p.items) >= p.o.MaxPending {
			p.dropped++
			if p.dropped == 1 || p.dropped%1000 == 0 {
				p.o.Logger.Warn("webhook delivery: too many tasks waiting; dropped (the sweep repairs)", "max", p.o.MaxPending, "dropped", p.dropped)
			}
			continue
		}
		p.seq++
		it := &poolItem{task: t, due: due, seq: p.seq}
		p.items[k] = it
		heap.Push(&p.queue, it)
	}
	p.signal()
	return nil
}

// mergeTask keeps the larger head and the newer hints of two tasks with
// one key.
func mergeTask(old, t Task) Task {
	if t.Seq < old.Seq {
		t.Seq, t.event = old.Seq, old.event
	}
	if t.sub == nil {
		t.sub = old.sub
	}
	t.Defer = max(t.Defer, old.Defer)
	return t
}

func (p *Pool) signal() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// Pending returns how many tasks wait or run.
func (p *Pool) Pending() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.items)
}

// Run handles the pool's tasks with e until ctx ends, on Workers
// goroutines; it also polls the store's topic heads and registry hashes
// every PollInterval (a topic whose head moved gets a fan-out; a change of
// the events registry, a Recheck) and sweeps every
// SweepInterval, the first time at once (what was pending when the
// process started). When ctx ends, no task starts; the tasks running stop
// before their next attempt, their attempts in flight get Grace to finish
// (an attempt cut short is one the receiver may have taken, and would get
// again), and each releases its claim. Run returns when they have.
func (p *Pool) Run(ctx context.Context, e *Engine) {
	drain := make(chan struct{})
	work, cancelWork := context.WithCancel(context.WithValue(context.WithoutCancel(ctx), drainKey{}, drain))
	defer cancelWork()
	ready := make(chan *poolItem)
	var wg sync.WaitGroup
	for range p.o.Workers {
		wg.Go(func() {
			for it := range ready {
				p.run(work, e, it)
			}
		})
	}
	wg.Go(func() { p.watch(ctx, e) })
	p.dispatch(ctx, ready)
	close(drain)
	stop := time.AfterFunc(p.o.Grace, cancelWork)
	defer stop.Stop()
	close(ready)
	wg.Wait()
}

// drainKey marks a Pool's task context: the value is a channel closed
// when the pool stops, so that a task stops before its next attempt.
type drainKey struct{}

// draining reports whether ctx is a stopping Pool's.
func draining(ctx context.Context) bool {
	ch, _ := ctx.Value(drainKey{}).(chan struct{})
	if ch == nil {
		return false
	}
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// dispatch hands due tasks to the workers until ctx ends.
func (p *Pool) dispatch(ctx context.Context, ready chan<- *poolItem) {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		p.mu.Lock()
		var next *poolItem
		wait := time.Hour
		if len(p.queue) > 0 {
			top := p.queue[0]
			if d := time.Until(top.due); d <= 0 {
				next = heap.Pop(&p.queue).(*poolItem)
				next.running = true
			} else {
				wait = d
			}
		}
		depth, age := len(p.items), time.Duration(0)
		if next != nil {
			age = time.Since(next.due)
		}
		p.mu.Unlock()
		if next != nil {
			metrics.QueueState(ctx, metrics.QueueDelivery, depth, age)
			select {
			case ready <- next:
				continue
			case <-ctx.Done():
			}
		} else {
			timer.Reset(wait)
			select {
			case <-p.wake:
				continue
			case <-timer.C:
				continue
			case <-ctx.Done():
			}
		}
		p.mu.Lock()
		p.closed = true
		p.mu.Unlock()
		return
	}
}

// run handles one task, then forgets it or, when it was enqueued again
// meanwhile, puts it back.
func (p *Pool) run(ctx context.Context, e *Engine, it *poolItem) {
	p.mu.Lock()
	t := it.task
	p.mu.Unlock()
	c, err := e.Handle(ctx, t)
	if err != nil && ctx.Err() == nil && !draining(ctx) {
		p.o.Logger.Warn("webhook delivery task failed (retried by the sweep)", "kind", t.Kind, "topic", t.Topic, "err", err)
	}
	if c.Refused > 0 || c.Abandoned > 0 {
		p.o.Logger.Info("webhook delivery", "topic", t.Topic, "delivered", c.Delivered, "abandoned", c.Abandoned, "refused", c.Refused)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	it.running = false
	if !it.again || p.closed {
		delete(p.items, t.key())
		return
	}
	it.again = false
	it.task.sub = nil // the record changed since: read it again
	it.due = it.againAt
	p.seq++
	it.seq = p.seq
	heap.Push(&p.queue, it)
	p.signal()
}

// watch polls the topic heads and sweeps until ctx ends.
func (p *Pool) watch(ctx context.Context, e *Engine) {
	seen := map[string]int64{}
	hashes, _ := e.o.Store.RegistryHashes(ctx)
	eventsHash := hashes[notify.RegistryEvents]
	if n, err := e.Sweep(ctx); err != nil {
		p.o.Logger.Warn("webhook sweep", "err", err)
	} else if n > 0 {
		p.o.Logger.Info("webhook sweep at start", "topics", n)
	}
	if topics, err := e.o.Store.Topics(ctx); err == nil {
		for _, t := range topics {
			seen[t.Name] = t.LastSeq
		}
	}
	poll := time.NewTicker(p.o.PollInterval)
	defer poll.Stop()
	sweep := time.NewTicker(p.o.SweepInterval)
	defer sweep.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-sweep.C:
			if _, err := e.Sweep(ctx); err != nil && ctx.Err() == nil {
				p.o.Logger.Warn("webhook sweep", "err", err)
			}
		case <-poll.C:
			topics, err := e.o.Store.Topics(ctx)
			if err != nil {
				continue
			}
			var tasks []Task
			for _, t := range topics {
				if t.LastSeq > seen[t.Name] {
					tasks = append(tasks, Task{Kind: KindFanOut, Topic: t.Name, Seq: t.LastSeq})
					seen[t.Name] = t.LastSeq
				}
			}
			// An events registry change (another process's ingest):
			// every subscription checked against it.
			if hashes, err := e.o.Store.RegistryHashes(ctx); err == nil && hashes[notify.RegistryEvents] != eventsHash {
				eventsHash = hashes[notify.RegistryEvents]
				tasks = append(tasks, Recheck())
			}
			p.Enqueue(ctx, tasks...)
		}
	}
}

// poolHeap orders waiting items by due time.
type poolHeap []*poolItem

func (h poolHeap) Len() int { return len(h) }
func (h poolHeap) Less(i, j int) bool {
	if !h[i].due.Equal(h[j].due) {
		return h[i].due.Before(h[j].due)
	}
	return h[i].seq < h[j].seq
}
func (h poolHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index, h[j].index = i, j
}
func (h *poolHeap) Push(x any) {
	it := x.(*poolItem)
	it.index = len(*h)
	*h = append(*h, it)
}
func (h *poolHeap) Pop() any {
	old := *h
	it := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	it.index = -1
	return it
}
