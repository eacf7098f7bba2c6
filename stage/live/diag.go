package live

// What the applier reports about its own tail (issue 37: update ->
// walkable's p99 on the 16-core host): how far behind its records it
// publishes, where its time goes (applying, publishing, a compaction's
// swap) and what the collector took meanwhile, so that a log shows which
// of them a slow publication fell on.

import (
	"log/slog"
	"runtime/metrics"
	"time"
)

// behindLog is how far behind its oldest record a publication must be for
// the applier to report it (at most once every behindEvery): below it,
// update -> walkable meets its target (p99 <= 1 s) with room for the walk.
const (
	behindLog   = 250 * time.Millisecond
	behindEvery = time.Second
)

// gcSample is the collector's cumulative counts.
type gcSample struct {
	cycles        uint64
	assist, total float64 // CPU seconds: mark assists, all the collector's
	pause         float64 // CPU seconds of stop-the-world pauses, all Ps
}

func readGC() gcSample {
	s := []metrics.Sample{
		{Name: "/gc/cycles/total:gc-cycles"},
		{Name: "/cpu/classes/gc/mark/assist:cpu-seconds"},
		{Name: "/cpu/classes/gc/total:cpu-seconds"},
		{Name: "/cpu/classes/gc/pause:cpu-seconds"},
	}
	metrics.Read(s)
	f := func(i int) float64 {
		if s[i].Value.Kind() == metrics.KindFloat64 {
			return s[i].Value.Float64()
		}
		return 0
	}
	var g gcSample
	if s[0].Value.Kind() == metrics.KindUint64 {
		g.cycles = s[0].Value.Uint64()
	}
	g.assist, g.total, g.pause = f(1), f(2), f(3)
	return g
}

// applierWindow adds up what the applier did since its last report.
type applierWindow struct {
	start   time.Time
	updates int64
	records int
	apply   time.Duration // in Live.Apply
	// applyWorkers is apply weighted by each pass's goroutines
	// (Live.PassWorkers): over apply, the goroutines a pass took on
	// average (fewer while walks hold the cores: Beside).
	applyWorkers time.Duration
	publish      time.Duration // in Publish (the delta index included)
	publishes    int           // publications
	maxPublish   time.Duration
	swap         time.Duration // in a compaction's FinishRebase and swap
	behind       time.Duration // the oldest record's age at its publication, the most
	gc           gcSample
}

func newApplierWindow(now time.Time) applierWindow {
	return applierWindow{start: now, gc: readGC()}
}

// report logs w when a publication in it was behindLog or more behind its
// records, and starts the next window. phase is what the background
// compaction is doing ("" when none runs).
func (w *applierWindow) report(log *slog.Logger, now time.Time, phase string) {
	if now.Sub(w.start) < behindEvery {
		return
	}
	if w.behind >= behindLog {
		g := readGC()
		log.Info("live graph publication behind its records",
			"behind", w.behind.Seconds(), "window", now.Sub(w.start).Seconds(), "updates", w.updates, "records", w.records,
			"apply", w.apply.Seconds(), "apply_workers", w.meanWorkers(), "publish", w.publish.Seconds(), "publishes", w.publishes, "publish_max", w.maxPublish.Seconds(), "swap", w.swap.Seconds(),
			"compaction", phase, "gc_cycles", g.cycles-w.gc.cycles, "gc_cpu", g.total-w.gc.total, "gc_assist_cpu", g.assist-w.gc.assist,
			"gc_pause_cpu", g.pause-w.gc.pause)
	}
	*w = newApplierWindow(now)
}

// meanWorkers is the goroutines the window's passes took, weighted by
// their time.
func (w *applierWindow) meanWorkers() float64 {
	if w.apply <= 0 {
		return 0
	}
	return float64(w.applyWorkers) / float64(w.apply)
}
