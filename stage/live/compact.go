package live

// Background compaction (issue 37, docs/design/live-graph.md): after a
// publication whose delta has reached the threshold, the applier marks
// that snapshot (livegraph.Live.BeginCompaction) and a goroutine compacts
// it while the applier goes on; the caller's Prepare then publishes the
// compacted graph and builds what serves it (the stage: an engine), and
// the same goroutine catches a live graph over it up with the records the
// applier applied meanwhile (livegraph.Rebaser). Back on the applier, the
// few records kept after the last catch up are applied again and the
// caller's swap serves it: ingest stops only for that tail. Walks never wait: a
// batch on an older snapshot finishes on that snapshot's base.

import (
	"context"
	"log/slog"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/walkstage/walkstage/graph"
	"github.com/walkstage/walkstage/livegraph"
	"github.com/walkstage/walkstage/source"
)

// Compaction turns on background compaction in RunApplierWith.
type Compaction struct {
	// Ratio and MinDelta are the threshold (Snapshot.DueForCompaction):
	// the delta's share of the base's edges and its least size.
	Ratio    float64
	MinDelta int64
	// Prepare runs on the compacting goroutine with the compacted graph
	// and the snapshot it was compacted from: it publishes the graph where
	// it should go and builds what serves it. It returns swap, which the
	// applier calls right after the live graph is rebased on g, with the
	// first snapshot of the new base. An error drops the compaction: the
	// delta goes on growing over the current base, and the next
	// publication past the threshold tries again.
	Prepare func(ctx context.Context, g *graph.Graph, from *livegraph.Snapshot) (swap func(*livegraph.Snapshot), err error)
	// Metrics are the series the compactions are counted in (nil: a
	// registry of their own, not exported).
	Metrics *CompactionMetrics
	// Workers bounds the goroutines the compaction and its catch up
	// spread over (0: CompactionWorkers of GOMAXPROCS); Prepare's engine
	// build should keep to the same (engines.Settings.TableWorkers).
	Workers int
	// Cores, when set, bounds them further while it says so (Beside: while
	// walks hold the cores); it is asked at each chunk of Compact and at
	// each record of the catch up (livegraph.WithCores).
	Cores livegraph.Cores
}

// CompactionWorkers is how many of procs cores a background compaction
// takes: all but a quarter, at least one, and one fewer than procs when
// there are two or more. The rest are the applier's: it spreads each
// record over goroutines (livegraph's applyParallel) and waits for the
// last of them, and Go's scheduler gives the goroutines it starts no core
// while every core runs one of the compaction's (work is stolen from
// another core's queue only when the global queue is empty, and a
// preempted compaction goroutine goes back there). So while a compaction
// held every core the applier applied about as fast as one goroutine
// (while 16 walkers held them, as they may, 0.6-0.7 M updates/s at scale
// 22, against 3 M/s on free cores), and under a stream at half its rate updates waited on it: on the 16-core
// host the slowest update -> walkable during compactions was 0.23-0.45 s
// with every core, 0.11-0.18 s with this share, compactions taking as long
// (docs/benchmarks/live-graph.md, one run each).
func CompactionWorkers(procs int) int {
	if procs < 2 {
		return 1
	}
	return max(1, procs-max(1, procs/4))
}

// CompactionMetrics are the compaction's Prometheus series.
type CompactionMetrics struct {
	compactions *prometheus.CounterVec
	seconds     prometheus.Histogram
	reapplied   prometheus.Counter
	baseEdges   prometheus.Gauge
	published   *prometheus.CounterVec
}

// NewCompactionMetrics registers the compaction's series with reg.
func NewCompactionMetrics(reg prometheus.Registerer) (*CompactionMetrics, error) {
	m := &CompactionMetrics{
		compactions: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "walkstage_live_compactions_total",
			Help: "Background compactions of the live graph, by result: swapped (the compacted graph serves), failed (dropped; the delta goes on over the old base)."},
			[]string{"result"}),
		seconds: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "walkstage_live_compaction_seconds",
			Help:    "From the snapshot a compaction starts from to the swap: compaction, catalog publication, engine build, updates applied again.",
			Buckets: prometheus.ExponentialBuckets(0.01, 2, 16)}),
		reapplied: prometheus.NewCounter(prometheus.CounterOpts{Name: "walkstage_live_compaction_reapplied_updates_total",
			Help: "Edge updates applied during a compaction and applied again over the compacted base at its swap."}),
		baseEdges: prometheus.NewGauge(prometheus.GaugeOpts{Name: "walkstage_live_base_edges",
			Help: "Edges of the live graph's base (the loaded version, or the last compaction swapped in)."}),
		published: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "walkstage_live_compaction_publishes_total",
			Help: "Compacted versions published to WALKSTAGE_EDGE_CATALOG with their watermark, by result (ok, failed)."},
			[]string{"result"}),
	}
	for _, r := range []string{"swapped", "failed"} {
		m.compactions.WithLabelValues(r)
	}
	for _, r := range []string{"ok", "failed"} {
		m.published.WithLabelValues(r)
	}
	for _, c := range []prometheus.Collector{m.compactions, m.seconds, m.reapplied, m.baseEdges, m.published} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// Published counts a catalog publication of a compacted version.
func (m *CompactionMetrics) Published(err error) {
	if err != nil {
		m.published.WithLabelValues("failed").Inc()
		return
	}
	m.published.WithLabelValues("ok").Inc()
}

// RunApplierWith is RunApplier compacting the live graph in the background
// as c says (nil: never).
func RunApplierWith(ctx context.Context, log *slog.Logger, l *livegraph.Live, in <-chan source.EdgeBatch, interval time.Duration, m *Metrics, c *Compaction) error {
	var bg *background
	if c != nil && c.Ratio > 0 {
		if c.Metrics == nil { // counted, not exported
			cm, err := NewCompactionMetrics(prometheus.NewRegistry())
			if err != nil {
				return err
			}
			c.Metrics = cm
		}
		bg = &background{c: c, l: l, log: log, m: m, done: make(chan compacted, 1), workers: c.Workers}
		if bg.workers <= 0 {
			bg.workers = CompactionWorkers(runtime.GOMAXPROCS(0))
		}
		bg.ctx, bg.cancel = context.WithCancel(ctx)
		defer bg.stop()
		c.Metrics.baseEdges.Set(float64(l.Base().NumEdges()))
	}
	return runApplier(ctx, log, l, in, interval, m, bg)
}

// background is the applier's side of the compaction: at most one runs.
type background struct {
	c      *Compaction
	l      *livegraph.Live
	log    *slog.Logger
	m      *Metrics
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	done   chan compacted // the compacting goroutine's result
	t0     time.Time
	// workers bound the compaction's goroutines (Compaction.Workers).
	workers int
	// phase is what the compacting goroutine does now (phaseNames), for
	// the applier's reports.
	phase atomic.Int32
}

// The compaction's phases, as the applier's reports name them.
const (
	phaseNone = iota
	phaseCompact
	phasePrepare
	phaseCatchUp
	phaseReady
)

// phaseName is what the compaction in progress does ("" when none runs).
func (b *background) phaseName() string {
	if b == nil {
		return ""
	}
	switch b.phase.Load() {
	case phaseCompact:
		return "compact"
	case phasePrepare:
		return "prepare"
	case phaseCatchUp:
		return "catch_up"
	case phaseReady:
		return "ready"
	}
	return ""
}

type compacted struct {
	g    *graph.Graph
	rb   *livegraph.Rebaser
	swap func(*livegraph.Snapshot)
	// rounds are the catch up's rounds off the applier.
	rounds int
	// Its phases' durations on the compacting goroutine.
	compact, prepare, catchUp time.Duration
	err                       error
}

// catchUpTail is how far behind the applier a caught-up rebase may be
// handed to it: about 10-40 ms of applying on the applier, which stops
// ingest meanwhile. The catch up goes on while it at least halves its
// distance to the applier every catchUpRounds rounds, up to
// catchUpMaxRounds: under a stream slower than the catch up it gets there
// geometrically, while under a backlog (the applier as fast as it) it
// would not, and stops after catchUpRounds+1 rounds.
//
// Why over a window of rounds and not round by round: the compaction's
// engine build, the applier and the walks share the cores, so rounds vary,
// and asked to gain a tenth every round the catch up would stop at the
// first slow one and hand the applier whatever it was behind then: a
// second or more without ingest at scale 22, which update -> walkable's
// p99 sees (docs/benchmarks/live-graph.md). Halving every eight rounds is
// a gain of a twelfth a round on average; slower than that, the catch up
// would take more than ten times the compaction's own time to land while
// the delta over the old base grows.
const (
	catchUpTail      = 1 << 16
	catchUpRounds    = 8
	catchUpMaxRounds = 256
)

// results is where a compaction's result arrives (nil, never, without
// background compaction).
func (b *background) results() <-chan compacted {
	if b == nil {
		return nil
	}
	return b.done
}

// maybeStart starts a compaction of what was applied so far when snap,
// just published, is past the threshold and none runs.
func (b *background) maybeStart(snap *livegraph.Snapshot) {
	if b == nil || b.ctx.Err() != nil || b.l.Compacting() != nil || !snap.DueForCompaction(b.c.Ratio, b.c.MinDelta) {
		return
	}
	from, err := b.l.BeginCompaction()
	if err != nil {
		b.log.Error("live graph compaction not started", "err", err)
		return
	}
	rb, err := b.l.NewRebaser()
	if err != nil {
		b.l.AbortCompaction()
		b.log.Error("live graph compaction not started", "err", err)
		return
	}
	b.t0 = time.Now()
	st := from.Stats()
	b.log.Info("live graph compaction started", "workers", b.workers, "delta_edges", st.DeltaEdges, "tombstones", st.Tombstones,
		"base_edges", from.Base().NumEdges(), "edge_offsets", from.Watermark())
	b.phase.Store(phaseCompact)
	b.wg.Go(func() {
		var r compacted
		t := time.Now()
		lap := func(d *time.Duration, next int32) {
			now := time.Now()
			*d, t = now.Sub(t), now
			b.phase.Store(next)
		}
		g, err := livegraph.Compact(b.ctx, from, b.opts()...)
		lap(&r.compact, phasePrepare)
		var swap func(*livegraph.Snapshot)
		if err == nil {
			swap, err = b.c.Prepare(b.ctx, g, from)
		}
		lap(&r.prepare, phaseCatchUp)
		rounds := 0
		if err == nil {
			rounds, err = b.catchUp(rb, g)
		}
		lap(&r.catchUp, phaseReady)
		r.g, r.rb, r.swap, r.rounds, r.err = g, rb, swap, rounds, err
		b.done <- r
	})
}

// opts bound the compaction's goroutines (Compaction.Workers and Cores).
func (b *background) opts() []livegraph.Option {
	o := []livegraph.Option{livegraph.WithWorkers(b.workers)}
	if b.c.Cores != nil {
		o = append(o, livegraph.WithCores(b.c.Cores))
	}
	return o
}

// catchUp starts rb over g and applies the records kept meanwhile until
// fewer than catchUpTail updates are left for the applier (catchUpRounded),
// and returns the rounds it took.
func (b *background) catchUp(rb *livegraph.Rebaser, g *graph.Graph) (int, error) {
	if err := rb.Base(g, b.opts()...); err != nil {
		return 0, err
	}
	return catchUpRounded(b.ctx, rb.CatchUp)
}

// catchUpRounded calls catchUp, which returns how far behind the applier
// it still is, until that is below catchUpTail, or it is more than half
// what it was catchUpRounds rounds before, or catchUpMaxRounds; it
// returns the rounds taken.
func catchUpRounded(ctx context.Context, catchUp func() (int64, error)) (int, error) {
	// ago[r%catchUpRounds] is how far behind round r left it, read back
	// catchUpRounds rounds later.
	var ago [catchUpRounds]int64
	for round := 1; ; round++ {
		behind, err := catchUp()
		if err != nil || behind < catchUpTail {
			return round, err
		}
		if err := ctx.Err(); err != nil {
			return round, err
		}
		i := round % catchUpRounds
		if round >= catchUpMaxRounds || round > catchUpRounds && behind > ago[i]/2 {
			return round, nil
		}
		ago[i] = behind
	}
}

// finish swaps a compaction in (or drops it), on the applier.
func (b *background) finish(r compacted) {
	cm := b.c.Metrics
	b.phase.Store(phaseNone)
	if r.err != nil {
		b.l.AbortCompaction()
		if b.ctx.Err() == nil {
			cm.compactions.WithLabelValues("failed").Inc()
			b.log.Error("live graph compaction failed; the delta goes on over the current base", "err", r.err)
		}
		return
	}
	t0 := time.Now()
	snap, st, err := b.l.FinishRebase(r.rb)
	tail := time.Since(t0)
	if err != nil {
		cm.compactions.WithLabelValues("failed").Inc()
		b.log.Error("live graph compaction not swapped in; the delta goes on over the current base", "err", err)
		return
	}
	r.swap(snap)
	took := time.Since(b.t0)
	cm.compactions.WithLabelValues("swapped").Inc()
	cm.seconds.Observe(took.Seconds())
	cm.reapplied.Add(float64(st.Updates))
	cm.baseEdges.Set(float64(r.g.NumEdges()))
	b.m.published.Inc()
	ds := snap.Stats()
	b.m.deltaEdges.Set(float64(ds.DeltaEdges))
	b.m.tombstones.Set(float64(ds.Tombstones))
	b.m.deltaBytes.Set(float64(snap.DeltaBytes()))
	b.m.added.Set(float64(ds.Added))
	b.m.window(snap)
	b.log.Info("live graph compaction swapped in", "graph", r.g.Name, "version", r.g.Version, "vertices", r.g.NumVertices(),
		"edges", r.g.NumEdges(), "reapplied_updates", st.Updates, "on_the_applier", st.TailUpdates, "catch_up_rounds", r.rounds, "duration", took.Seconds(),
		"compact", r.compact.Seconds(), "prepare", r.prepare.Seconds(), "catch_up", r.catchUp.Seconds(), "tail", tail.Seconds(), "edge_offsets", snap.Watermark())
	// The updates applied during the compaction may be past the
	// threshold already: the topic may be quiet now, with no publication
	// to look again.
	b.maybeStart(snap)
}

// stop cancels a compaction in progress and waits for its goroutine.
func (b *background) stop() {
	b.cancel()
	b.wg.Wait()
	select {
	case r := <-b.done:
		if r.err == nil {
			b.l.AbortCompaction()
		}
	default:
	}
	if b.l.Compacting() != nil {
		b.l.AbortCompaction()
	}
}
