// Package live applies a live graph's edge updates (issue 37): the batches
// source's edge-topic reader hands on go into a livegraph.Live, whose
// snapshots are published on an interval, with the live graph's
// Prometheus series. The stage runs RunApplier as one of its actors when
// WALKSTAGE_EDGE_TOPIC is set (stage/edges.go); it knows nothing of the
// walks that read the snapshots.
package live

import (
	"context"
	"log/slog"
	"math"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/walkstage/walkstage/livegraph"
	"github.com/walkstage/walkstage/source"
)

// Metrics are the live graph's Prometheus series.
type Metrics struct {
	updates    prometheus.Counter
	rejected   prometheus.Counter
	published  prometheus.Counter
	deltaEdges prometheus.Gauge
	tombstones prometheus.Gauge
	deltaBytes prometheus.Gauge
	added      prometheus.Gauge
	lag        prometheus.Gauge
	walkable   prometheus.Histogram
	// Where the applier's time goes: applying records, publishing.
	applySeconds prometheus.Counter
	applyPasses  prometheus.Counter
	applyWorkers prometheus.Gauge
	publishSec   prometheus.Histogram
	// The time window's (livegraph.WithWindow): edges evicted by reason,
	// moves of the cut, the event time and the cutoff.
	evicted   *prometheus.CounterVec
	evictions prometheus.Counter
	eventTime prometheus.Gauge
	cutoff    prometheus.Gauge
	// counted is the evicted counts already added to the counters.
	counted livegraph.Stats
}

// NewMetrics registers the live graph's series with reg.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		updates: prometheus.NewCounter(prometheus.CounterOpts{Name: "walkstage_live_updates_total",
			Help: "Edge updates applied to the live graph (rate() gives the ingest rate)."}),
		rejected: prometheus.NewCounter(prometheus.CounterOpts{Name: "walkstage_live_rejected_records_total",
			Help: "Edge-topic records dead-lettered as bad edge updates."}),
		published: prometheus.NewCounter(prometheus.CounterOpts{Name: "walkstage_live_snapshots_total",
			Help: "Live graph snapshots published to the walkers."}),
		deltaEdges: prometheus.NewGauge(prometheus.GaugeOpts{Name: "walkstage_live_delta_edges",
			Help: "Edges appended to the loaded version, deleted ones included until a compaction."}),
		tombstones: prometheus.NewGauge(prometheus.GaugeOpts{Name: "walkstage_live_tombstones",
			Help: "Deleted (vertex, target) pairs in the live graph's delta."}),
		deltaBytes: prometheus.NewGauge(prometheus.GaugeOpts{Name: "walkstage_live_delta_bytes",
			Help: "Memory of the live graph's delta."}),
		added: prometheus.NewGauge(prometheus.GaugeOpts{Name: "walkstage_live_added_vertices",
			Help: "Vertices the edge updates added to the loaded version."}),
		lag: prometheus.NewGauge(prometheus.GaugeOpts{Name: "walkstage_live_watermark_lag_records",
			Help: "Edge-topic records beyond the published snapshot's watermark, over all partitions, as of the last fetch."}),
		walkable: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "walkstage_live_update_to_walkable_seconds",
			Help:    "From an edge record's timestamp to the publication of the first snapshot that holds it.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 16)}),
		applySeconds: prometheus.NewCounter(prometheus.CounterOpts{Name: "walkstage_live_apply_seconds_total",
			Help: "Time the applier spent applying edge records (rate() is the share of a core it is busy applying)."}),
		applyPasses: prometheus.NewCounter(prometheus.CounterOpts{Name: "walkstage_live_apply_passes_total",
			Help: "Passes in which the applier applied edge records: the records queued behind the one it takes go in the same pass (records over passes is how many a pass took)."}),
		applyWorkers: prometheus.NewGauge(prometheus.GaugeOpts{Name: "walkstage_live_apply_workers",
			Help: "Goroutines the applier's last pass took: fewer while a walk backlog holds half the cores or more (WALKSTAGE_EDGE_APPLY_SHARE), every core otherwise."}),
		publishSec: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "walkstage_live_publish_seconds",
			Help:    "Time a snapshot's publication took on the applier, its delta index included.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 2, 16)}),
		evicted: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "walkstage_live_evicted_edges_total",
			Help: "Edges the time window (WALKSTAGE_EDGE_WINDOW) removed: reason window for edges it passed, late for inserts already older than it when applied."},
			[]string{"reason"}),
		evictions: prometheus.NewCounter(prometheus.CounterOpts{Name: "walkstage_live_window_evictions_total",
			Help: "Times the time window's cut moved to a later segment and evicted the edges before it."}),
		eventTime: prometheus.NewGauge(prometheus.GaugeOpts{Name: "walkstage_live_event_time_seconds",
			Help: "The live graph's event time: the largest edge time applied (Unix seconds), which the time window is measured from; time() minus it is the event-time lag."}),
		cutoff: prometheus.NewGauge(prometheus.GaugeOpts{Name: "walkstage_live_window_cutoff_seconds",
			Help: "The time window's cutoff (Unix seconds): the published snapshot holds no edge older than this."}),
	}
	// Both reasons are series from the start, so rate() sees the first one.
	m.evicted.WithLabelValues("window")
	m.evicted.WithLabelValues("late")
	for _, c := range []prometheus.Collector{m.updates, m.rejected, m.published, m.deltaEdges, m.tombstones, m.deltaBytes, m.added, m.lag, m.walkable, m.applySeconds, m.applyPasses, m.applyWorkers, m.publishSec,
		m.evicted, m.evictions, m.eventTime, m.cutoff} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// A pass of the applier takes the records queued behind the one it
// received, up to mergeUpdates updates or mergeRecords records: about
// 5-15 ms of applying on the 16-core host, which is as long as a waiter
// for the first of them may wait longer (it is published after the pass).
const (
	mergeUpdates = 1 << 16
	mergeRecords = 64
)

// RunApplier applies the edge reader's batches to l in arrival order
// and publishes a snapshot every interval while updates arrive (and once
// when in stops), so walks see an update within about interval of its
// arrival and publishing costs nothing while the topic is quiet; and at
// once when a read-your-writes request waits for what it just applied
// (livegraph.Live.Waited) and no more records are queued (else once they
// are applied too, or at the interval). A batch the live graph refuses (an update that does not fit the graph, found
// only against it) is counted and logged, and its offset passed: the
// reader dead-letters records that do not decode, this is the rest. It
// returns when in is closed or ctx is done.
func RunApplier(ctx context.Context, log *slog.Logger, l *livegraph.Live, in <-chan source.EdgeBatch, interval time.Duration, m *Metrics) error {
	return runApplier(ctx, log, l, in, interval, m, nil)
}

func runApplier(ctx context.Context, log *slog.Logger, l *livegraph.Live, in <-chan source.EdgeBatch, interval time.Duration, m *Metrics, bg *background) error {
	tick := time.NewTicker(interval)
	defer tick.Stop()
	dirty := false
	// pending holds the timestamps of the records applied since the last
	// publication; hwm each partition's end offset as last fetched.
	var pending []time.Time
	hwm := map[int32]int64{}
	// An early publication for a waiter (early) comes at least gap after
	// the last one: each costs what changed since the last, plus a copy of
	// the delta index's patch (at scale 22 up to tens of MB), and
	// read-your-writes requests may come by the hundred a second. A waiter
	// too soon after one gets the next when gap has passed (wake).
	gap := min(interval/10, 10*time.Millisecond)
	var last time.Time
	var wake <-chan time.Time
	win := newApplierWindow(time.Now())
	publish := func() {
		if !dirty {
			return
		}
		t0 := time.Now()
		snap := l.Publish()
		now := time.Now()
		took := now.Sub(t0)
		m.publishSec.Observe(took.Seconds())
		win.publish += took
		win.publishes++
		win.maxPublish = max(win.maxPublish, took)
		dirty, last = false, now
		for _, t := range pending {
			m.walkable.Observe(max(0, now.Sub(t).Seconds()))
			win.behind = max(win.behind, now.Sub(t))
		}
		pending = pending[:0]
		var lag int64
		wm := snap.Watermark()
		for p, end := range hwm {
			lag += max(0, end-wm[p])
		}
		m.lag.Set(float64(lag))
		st := snap.Stats()
		m.published.Inc()
		m.deltaEdges.Set(float64(st.DeltaEdges))
		m.tombstones.Set(float64(st.Tombstones))
		m.deltaBytes.Set(float64(snap.DeltaBytes()))
		m.added.Set(float64(st.Added))
		m.window(snap)
		bg.maybeStart(snap)
		win.report(log, now, bg.phaseName())
	}
	early := func() {
		// While records are queued behind the pass, a waiter the pass
		// reached gets its publication once they are applied too (the
		// pass that drains the queue calls early again), or at the tick:
		// at most an interval later, with more of the stream in it.
		// Publishing after every pass that reached a waiter (the paced
		// series' probes, tens a second) cost the applier about half of
		// each second on the 16-core host at half its backlog rate, so a
		// lag it fell into stayed to the series' end
		// (docs/benchmarks/live-graph.md, "Beside walks: a share only for
		// a walk backlog"); published once a drained queue, that time
		// goes to draining it.
		if wake != nil || len(in) > 0 || !l.Waited() {
			return
		}
		if since := time.Since(last); since < gap {
			wake = time.After(gap - since)
			return
		}
		publish()
	}
	// batch and recs are the records of one pass, kept between passes.
	var batch []source.EdgeBatch
	var recs []livegraph.Record
	m.window(l.Snapshot()) // what New evicted from the loaded graph
	defer publish()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
			publish()
		case r := <-bg.results():
			t0 := time.Now()
			bg.finish(r)
			win.swap += time.Since(t0)
		case <-l.Wanted():
			early()
		case <-wake:
			wake = nil
			early()
		case b, ok := <-in:
			if !ok {
				return nil
			}
			// The records queued behind b go with it, in one pass
			// (livegraph.Live.ApplyRecords): while a backlog is caught
			// up, a record at a time paid for starting and waiting for
			// the pass's goroutines once per record.
			batch = append(batch[:0], b)
			n := len(b.Updates)
			open := true
		more:
			for n < mergeUpdates && len(batch) < mergeRecords {
				select {
				case b, ok := <-in:
					if !ok {
						open = false
						break more
					}
					batch = append(batch, b)
					n += len(b.Updates)
				default:
					break more
				}
			}
			recs = recs[:0]
			for _, b := range batch {
				dirty = true
				if !b.Time.IsZero() {
					pending = append(pending, b.Time)
				}
				hwm[b.Partition] = max(hwm[b.Partition], b.HighWaterMark)
				ups := b.Updates
				if b.Rejected != nil {
					m.rejected.Inc()
					ups = nil // passed: the watermark moves past it
				}
				recs = append(recs, livegraph.Record{Partition: b.Partition, Offset: b.Offset, Updates: ups})
			}
			t0 := time.Now()
			errs := l.ApplyRecords(recs)
			took := time.Since(t0)
			m.applySeconds.Add(took.Seconds())
			m.applyPasses.Inc()
			m.applyWorkers.Set(float64(l.PassWorkers()))
			win.apply += took
			win.applyWorkers += took * time.Duration(l.PassWorkers())
			for i, b := range batch {
				switch {
				case b.Rejected != nil:
				case errs != nil && errs[i] != nil:
					win.records++
					m.rejected.Inc()
					log.Warn("edge record refused by the live graph; skipped", "partition", b.Partition, "offset", b.Offset, "err", errs[i])
				default:
					win.records++
					m.updates.Add(float64(len(b.Updates)))
					win.updates += int64(len(b.Updates))
				}
			}
			// The decoded updates are not kept past their pass: their
			// slices go back to the reader for its next records.
			for i := range batch {
				batch[i].Release()
			}
			clear(batch)
			clear(recs)
			if !open {
				return nil
			}
			// A read-your-writes request waiting for what was just
			// applied gets it now, not at the next tick: publishing
			// costs what changed since the last snapshot.
			early()
		}
	}
}

// window updates the time window's series from snap: the counters by the
// counts added since the last snapshot seen.
func (m *Metrics) window(snap *livegraph.Snapshot) {
	now, cut, ok := snap.Window()
	if !ok {
		return
	}
	st := snap.Stats()
	// A count below the one seen is a new live graph's (one built over a
	// compacted version), counting from zero.
	since := func(n, seen int64) float64 {
		if n < seen {
			return float64(n)
		}
		return float64(n - seen)
	}
	m.evicted.WithLabelValues("window").Add(since(st.Evicted, m.counted.Evicted))
	m.evicted.WithLabelValues("late").Add(since(st.Late, m.counted.Late))
	m.evictions.Add(since(st.Evictions, m.counted.Evictions))
	m.counted = st
	m.eventTime.Set(float64(now) / 1000)
	if cut != math.MinInt64 {
		m.cutoff.Set(float64(cut) / 1000)
	}
}
