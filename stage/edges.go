package stage

// The live graph (issue 37, docs/design/live-graph.md): with
// WALKSTAGE_EDGE_TOPIC set, the edge reader and the applier run as actors
// beside the pipeline, and every micro-batch takes the latest published
// snapshot once. Walk requests whose algorithm the engine walks on a
// snapshot (walk.CheckOverlay) walk it, and their manifest and event carry
// its watermark; every other request walks the loaded graph alone and
// carries none. A request may ask for a watermark (edge_offsets): it waits
// for it before it is queued, at most EdgeOffsetsWait, and is rejected
// with edge_offsets_unavailable after that.

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/walkstage/walkstage/livegraph"
	"github.com/walkstage/walkstage/message"
	"github.com/walkstage/walkstage/source"
	"github.com/walkstage/walkstage/stage/live"
	"github.com/walkstage/walkstage/walk"
)

// ReasonEdgeOffsetsUnavailable rejects a request whose edge_offsets the
// live graph did not reach within WALKSTAGE_EDGE_OFFSETS_WAIT. It is the
// request's: offsets beyond what the edge topic holds, or on a partition it
// lacks, never arrive, and a retry would hold the partition's commit point
// for good (as graph_version_unavailable does for a version).
const ReasonEdgeOffsetsUnavailable message.Reason = "edge_offsets_unavailable"

// EdgeSource is the edge topic's reader: it sends each record, decoded,
// on out until ctx ends. *source.EdgeReader implements it.
type EdgeSource interface {
	Run(ctx context.Context, out chan<- source.EdgeBatch) error
}

// LiveOptions turn the live graph on (Options.Live).
type LiveOptions struct {
	// Graph is the live graph over Options.Graph.
	Graph *livegraph.Live
	// Edges feeds it; nil: the caller applies updates itself.
	Edges EdgeSource
	// PublishInterval is how often applied updates are published while
	// they arrive (default 100ms).
	PublishInterval time.Duration
	// OffsetsWait bounds a request's wait for its edge_offsets (0: no
	// wait, a request not covered at once is rejected).
	OffsetsWait time.Duration
	// SnapshotHold is how long requests the engine pays to move to a new
	// snapshot for (walk.HoldsSnapshot) keep the one it walked (0: none
	// do; snapshotFor).
	SnapshotHold time.Duration
	// Compaction, when set, compacts the live graph in the background
	// and swaps the compacted base in (compact.go).
	Compaction *LiveCompaction
	// ApplyShare is the least share of the cores the applier's passes
	// and a compaction keep while walk jobs run or wait (live.Beside); 1
	// keeps them all. 0: live.DefaultApplyShare.
	ApplyShare float64
	// WalkerCores is how many cores the engine's walks hold (0:
	// GOMAXPROCS, for either engine: see walkerCores).
	WalkerCores int
}

// walkerLoad is live.Walkers for the stage: the walks hold a core a walk,
// up to the engine's cores, from the moment their request is queued for
// the engine to the end of its run (hold, drop), so a backlog of walk
// requests holds every core and a probe of one walk holds one. A request
// waiting for its edge_offsets is not queued yet: it waits for the
// applier, which should have the cores meanwhile.
type walkerLoad struct {
	cores int
	walks atomic.Int64
}

func (w *walkerLoad) WalkerCores() int {
	return int(min(int64(w.cores), max(0, w.walks.Load())))
}

// hold counts b's walks (at least one: a visits or sampling request
// walks too) before b is queued.
func (w *walkerLoad) hold(b *batch) {
	b.held = int64(max(1, b.walks))
	w.walks.Add(b.held)
}

// drop gives back what hold counted for b, once: its run is over, or it
// was abandoned.
func (w *walkerLoad) drop(b *batch) {
	w.walks.Add(-b.held)
	b.held = 0
}

// walkerCores is the cores lo says the engine's walks hold, or every
// core. The GPU engine's too: its walks run on one host thread, but the
// sink encodes and writes their output on every core (sink.Options'
// encoders): a GPU walk backlog on the 16-core host kept 11 of them
// busy. Counted as one core, a GPU walk backlog
// never cut the applier, whose passes then took the cores the output
// needed: walks beside an ingest backlog ran at 54-64% of the static
// rate, against 77-83% counted as every core (two alternating pairs,
// docs/benchmarks/live-graph.md, "The GPU engine's walks hold the
// cores"). WALKSTAGE_EDGE_APPLY_SHARE trades walks for ingest beside them.
func walkerCores(lo *LiveOptions, e walk.Engine) int {
	switch {
	case lo != nil && lo.WalkerCores > 0:
		return lo.WalkerCores
	}
	return runtime.GOMAXPROCS(0)
}

// liveSeeds resolves seeds against the live graph's latest snapshot
// (message.Limits.Vertices).
type liveSeeds struct{ l *livegraph.Live }

func (ls liveSeeds) DenseID(ext int64) (uint32, bool) { return ls.l.Snapshot().DenseID(ext) }

// LiveSeeds is the seed resolver the input consumer needs when a stage
// walks l: requests may name the vertices edge updates added.
func LiveSeeds(l *livegraph.Live) message.VertexResolver { return liveSeeds{l} }

// addLiveActors runs the edge reader and the applier until ctx ends.
func (s *Stage) addLiveActors(g *group, ctx context.Context) error {
	lo := s.o.Live
	if lo == nil || lo.Edges == nil {
		return nil
	}
	m, err := live.NewMetrics(s.o.Registry)
	if err != nil {
		return fmt.Errorf("stage: live graph metrics: %w", err)
	}
	log := s.log.With("component", "live-graph")
	compaction, err := s.liveCompaction(lo, log)
	if err != nil {
		return err
	}
	if lo.ApplyShare < 1 {
		// The applier's passes and the compaction give the walks the
		// cores they hold (live.Beside); the applier starts below.
		beside := &live.Beside{Walkers: &s.walkers, Share: lo.ApplyShare}
		lo.Graph.SetCores(beside)
		if compaction != nil {
			compaction.Cores = beside
		}
	}
	ctx, stop := context.WithCancel(ctx)
	batches := make(chan source.EdgeBatch, 256)
	g.add("edge-reader", func() error {
		err := lo.Edges.Run(ctx, batches)
		if ctx.Err() != nil {
			return nil
		}
		// Restarting the reader in place needs the applier's exact
		// offsets; for now the replica stops, and its restart replays
		// the topic into a new live graph (docs/design/live-graph.md).
		return fmt.Errorf("edge topic reader: %w", err)
	}, stop)
	g.add("edge-applier", func() error {
		err := live.RunApplierWith(ctx, log, lo.Graph, batches, lo.PublishInterval, m, compaction)
		if err != nil && !errors.Is(err, context.Canceled) {
			return fmt.Errorf("edge applier: %w", err)
		}
		return nil
	}, stop)
	return nil
}

// checkLive refuses at intake what the live graph cannot give a request:
// edge_offsets without a live graph, or on a request that walks the loaded
// graph alone.
func (s *Stage) checkLive(b *batch) *message.RejectError {
	r := b.req
	if len(r.EdgeOffsets) == 0 {
		return nil
	}
	rej := func(format string, a ...any) *message.RejectError {
		return &message.RejectError{Reason: message.ReasonInvalidParameters, BatchID: r.BatchID, Msg: fmt.Sprintf(format, a...)}
	}
	if s.o.Live == nil {
		return rej("edge_offsets: this stage has no live graph (WALKSTAGE_EDGE_TOPIC is not set)")
	}
	if err := s.overlayRefused(r, s.graphs.serving()); err != nil {
		return rej("edge_offsets: this request walks the loaded graph without its edge updates: %v", err)
	}
	return nil
}

// overlayRefused is nil when r walks the live graph's snapshot on v's
// engine, else why it walks the loaded graph alone.
func (s *Stage) overlayRefused(r *message.Request, v *served) error {
	switch {
	case r.Sample != nil:
		return errors.New("graph samples do not read a live graph's delta yet")
	case r.Visits != nil:
		return errors.New(`"output": "visits" does not read a live graph's delta yet`)
	}
	return walk.CheckOverlay(v.e, r.Algorithm)
}

// awaitEdges queues b once the live graph holds its edge_offsets, or
// rejects it when they do not arrive within OffsetsWait. It runs in a
// goroutine of its own (s.waiting), so requests behind it are not held
// back; at shutdown it leaves b uncommitted, for redelivery.
func (s *Stage) awaitEdges(fetchCtx, workCtx context.Context, b *batch) {
	defer s.waiting.Done()
	s.m.edgeWaits.Inc()
	ctx, cancel := context.WithTimeout(fetchCtx, s.o.Live.OffsetsWait)
	_, err := s.o.Live.Graph.WaitFor(ctx, b.req.EdgeOffsets)
	cancel()
	s.m.edgeWaits.Dec()
	switch {
	case err == nil:
		s.walkers.hold(b)
		select {
		case s.queue <- b:
			s.m.queued.Inc()
		case <-workCtx.Done():
			s.walkers.drop(b)
			s.leave(b.req.BatchID)
		}
	case fetchCtx.Err() != nil:
		b.span.End()
		s.log.Info("batch abandoned at shutdown while waiting for its edge offsets (uncommitted; it will be redelivered)", "batch_id", b.req.BatchID)
		s.leave(b.req.BatchID)
	default:
		re := &message.RejectError{Reason: ReasonEdgeOffsetsUnavailable, BatchID: b.req.BatchID,
			Msg: fmt.Sprintf("the live graph did not reach the request's edge_offsets within %v: %v", s.o.Live.OffsetsWait, err)}
		defer s.leave(b.req.BatchID)
		b.span.End() // the rejection is reported under a span of its own, as at intake
		if s.refuse(workCtx, b.d, re, nil) != nil {
			s.log.Info("batch abandoned at shutdown (uncommitted; it will be redelivered)", "batch_id", b.req.BatchID)
		}
	}
}

// heldSnapshot is the snapshot the engine's jobs of a walk.SnapshotHolder
// algorithm walked last, and when a batch first took it. Only the engine
// loop (walk) reads and writes it.
type heldSnapshot struct {
	snap *livegraph.Snapshot
	at   time.Time
}

// snapshotFor is the snapshot b walks: snap, the micro-batch's newest;
// or, when b's algorithm costs the engine a copy of each new snapshot
// (holds), h's while it is younger than hold, of snap's base, and holds
// b's edge_offsets and seeds. Either is one consistent snapshot whose
// watermark b reports; holding one bounds how often the engine copies
// (the GPU engine's temporal walks: a second at scale 22) at the price of
// walks up to hold behind the newest. A batch that walks the newest makes
// it the held one.
func (h *heldSnapshot) snapshotFor(b *batch, snap *livegraph.Snapshot, holds bool, hold time.Duration, now time.Time) *livegraph.Snapshot {
	if snap == nil || !holds || hold <= 0 || b.req.Sample != nil || b.req.Visits != nil {
		return snap
	}
	r, old := b.req, h.snap
	ok := old != nil && old.Base() == snap.Base() && now.Sub(h.at) < hold && !r.Unresolved &&
		(len(r.EdgeOffsets) == 0 || old.Covers(r.EdgeOffsets))
	for _, st := range r.Starts {
		if !ok {
			break
		}
		ok = int(st) < old.NumVertices()
	}
	if ok {
		return old
	}
	if old != snap {
		h.snap, h.at = snap, now
	}
	return snap
}

// bindLive decides whether b walks snap (set b.snap) or the loaded graph
// alone, and resolves seeds the decoder left to the snapshot. A seed that
// is not in what b walks is the request's fault.
func (s *Stage) bindLive(b *batch, v *served, snap *livegraph.Snapshot) *message.RejectError {
	b.snap = nil
	if snap == nil {
		return nil
	}
	r := b.req
	rej := func(reason message.Reason, format string, a ...any) *message.RejectError {
		return &message.RejectError{Reason: reason, BatchID: r.BatchID, Msg: fmt.Sprintf(format, a...)}
	}
	if why := s.overlayRefused(r, v); why != nil {
		// Seeds were resolved against a snapshot: one the edge updates
		// added is not in the loaded graph.
		baseV := uint32(v.g.NumVertices())
		starts := r.Starts
		if r.Visits != nil {
			starts = nil
			for _, q := range r.Visits.Queries {
				starts = append(starts, q.Starts...)
			}
		}
		for _, st := range starts {
			if st >= baseV {
				return rej(message.ReasonUnknownVertices, "a seed was added by edge updates, and this request walks the loaded graph without them (%v)", why)
			}
		}
		s.log.Debug("request walks the loaded graph without its edge updates", "batch_id", r.BatchID, "reason", why.Error())
		return nil
	}
	if r.Unresolved {
		var unknown []string
		seeds, starts := r.Seeds[:0:0], make([]uint32, 0, len(r.Seeds))
		for _, ext := range r.Seeds {
			d, ok := snap.DenseID(ext)
			if !ok {
				unknown = append(unknown, fmt.Sprint(ext))
				continue
			}
			seeds, starts = append(seeds, ext), append(starts, d)
		}
		if len(unknown) > 0 {
			if !s.graphs.skipUnknown || len(starts) == 0 {
				return rej(message.ReasonUnknownVertices, "%d of %d seeds are not in the live graph at edge offsets %v, e.g. %v",
					len(unknown), len(r.Seeds), snap.Watermark(), unknown[:min(len(unknown), 10)])
			}
			r.Skipped += len(unknown)
			r.SkippedIDs = append(r.SkippedIDs, unknown[:min(len(unknown), max(0, 100-len(r.SkippedIDs)))]...)
		}
		r.Seeds, r.Starts, r.Unresolved = seeds, starts, false
		b.walks = r.NumWalks()
	}
	b.snap = snap
	return nil
}
