package stage

// The live graph's background compaction in the stage (issue 37,
// docs/design/live-graph.md): stage/live compacts a snapshot while updates
// go on; here the compacted graph is published to WALKSTAGE_EDGE_CATALOG
// with its watermark, an engine is built for it beside the serving one,
// and at the swap both move together: the live graph's first snapshot of
// the new base and the served version (engine and graph) it needs. A
// micro-batch takes the served version and a snapshot of the same base
// (liveVersion); a batch walking the old base finishes on it, and the old
// engine is released with its last batch, as after a graph follower's
// overlap swap. The compacted base numbers vertices as an import does, so
// seeds decoded against an older base are resolved again at bind.

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/walkstage/walkstage/catalog"
	"github.com/walkstage/walkstage/graph"
	"github.com/walkstage/walkstage/internal/ctxsleep"
	"github.com/walkstage/walkstage/livegraph"
	"github.com/walkstage/walkstage/message"
	"github.com/walkstage/walkstage/stage/live"
	"github.com/walkstage/walkstage/walk"
)

// catalogKeep is how many versions a live graph's catalog keeps after each
// compaction it publishes (CURRENT always among them): a replica loading
// the previous CURRENT while the next is published still finds it.
const catalogKeep = 3

// LiveCompaction turns on the live graph's background compaction
// (LiveOptions.Compaction).
type LiveCompaction struct {
	// Ratio and MinDelta are the threshold (WALKSTAGE_EDGE_COMPACT_RATIO,
	// WALKSTAGE_EDGE_COMPACT_MIN); Ratio 0 never compacts.
	Ratio    float64
	MinDelta int64
	// Build builds the engine for a compacted graph (the stage's engine
	// settings).
	Build func(*graph.Graph) (walk.Engine, error)
	// Catalog, when set, receives each compacted version with the
	// watermark it holds (WALKSTAGE_EDGE_CATALOG); Topic is the edge topic
	// it records; Dir holds the file while it is written and uploaded.
	Catalog *catalog.Catalog
	Topic   string
	Dir     string
	// OnSwap, when set, is told the new base at each swap (the input
	// consumer checks requests against it).
	OnSwap func(*graph.Graph)
}

// liveCompaction is the applier's compaction for lo (nil: none).
func (s *Stage) liveCompaction(lo *LiveOptions, log *slog.Logger) (*live.Compaction, error) {
	lc := lo.Compaction
	if lc == nil || lc.Ratio <= 0 {
		return nil, nil
	}
	if lc.Build == nil {
		return nil, fmt.Errorf("stage: live graph compaction without an engine builder")
	}
	cm, err := live.NewCompactionMetrics(s.o.Registry)
	if err != nil {
		return nil, fmt.Errorf("stage: live graph compaction metrics: %w", err)
	}
	prepare := func(ctx context.Context, g *graph.Graph, from *livegraph.Snapshot) (func(*livegraph.Snapshot), error) {
		if lc.Catalog != nil {
			// A version that is not published only makes a restart replay
			// more: the swap goes on.
			err := publishCompacted(ctx, lc, g, from)
			cm.Published(err)
			if err != nil && ctx.Err() == nil {
				log.Error("compacted live graph not published; a restart replays the edge topic from the previous version's offsets",
					"catalog", lc.Catalog.String(), "err", err)
			}
		}
		e, err := lc.Build(g)
		if err != nil {
			return nil, fmt.Errorf("engine for the compacted graph: %w", err)
		}
		// The engine is chosen for the graph's size: a grown graph may
		// get one that cannot walk the delta (the out-of-core engine).
		if err := walk.CheckOverlay(e, walk.Algorithm{Kind: walk.DeepWalk, Length: 1}); err != nil {
			e.Close()
			return nil, fmt.Errorf("the %s engine built for the compacted graph (%d edges) cannot walk a live graph (WALKSTAGE_HOST_MEMORY_LIMIT, or WALKSTAGE_GPU_MEMORY_LIMIT for the GPU engine?): %w",
				e.Name(), g.NumEdges(), err)
		}
		nv := newServed(g, e)
		return func(*livegraph.Snapshot) { s.swapCompacted(nv, lc, log) }, nil
	}
	return &live.Compaction{Ratio: lc.Ratio, MinDelta: lc.MinDelta, Prepare: prepare, Metrics: cm}, nil
}

// swapCompacted serves nv, the compacted base the live graph was just
// rebased on. Batches holding the old version finish on it; it is
// released with the last of them. Its graph is not closed here: the
// first one is the loaded file, which the runtime closes at shutdown and
// snapshots still in use may read, the later ones are Go memory.
func (s *Stage) swapCompacted(nv *served, lc *LiveCompaction, log *slog.Logger) {
	gs := &s.graphs
	old := gs.serving()
	gs.cur.Store(nv)
	if lc.OnSwap != nil {
		lc.OnSwap(nv.g)
	}
	gs.announce(old.g, nv.g)
	s.m.graphBytes.Set(float64(nv.g.MemoryBytes()))
	version := old.g.Version
	old.retire(false, func() { log.Debug("previous live graph base released", "version", version) })
}

// publishCompacted saves g, the compaction of from, and publishes it to
// lc's catalog with the watermark it holds (and the time window's event
// time), then prunes the catalog to catalogKeep versions.
func publishCompacted(ctx context.Context, lc *LiveCompaction, g *graph.Graph, from *livegraph.Snapshot) error {
	wm := from.Watermark()
	o := catalog.PublishOptions{EdgeTopic: lc.Topic}
	if now, _, ok := from.Window(); ok {
		o.EdgeEventTime = &now
	}
	f, err := os.CreateTemp(lc.Dir, "walkstage-compacted-*.wsg")
	if err != nil {
		return fmt.Errorf("save the compacted graph: %w", err)
	}
	name := f.Name()
	f.Close()
	defer os.Remove(name)
	if err := graph.Save(name, g); err != nil {
		return fmt.Errorf("save the compacted graph: %w", err)
	}
	if wm == nil {
		wm = map[int32]int64{}
	}
	o.EdgeOffsets = wm
	if _, err := lc.Catalog.PublishWith(ctx, name, o); err != nil {
		return err
	}
	if _, err := lc.Catalog.Prune(ctx, catalogKeep); err != nil {
		return fmt.Errorf("prune after publishing: %w", err)
	}
	return nil
}

// liveVersion returns v, or the version served after it, with the newest
// snapshot, of the same base: a compaction's swap publishes the new base's
// first snapshot and serves its engine one after the other, and a
// micro-batch taken between the two waits for the second. Every snapshot's
// delta index is made when it is published, from the last one's, so the
// newest costs a batch nothing more to walk than an older one (but for the
// requests an engine holds a snapshot for: heldSnapshot).
func (s *Stage) liveVersion(ctx context.Context, v *served) (*served, *livegraph.Snapshot) {
	for {
		snap := s.o.Live.Graph.Snapshot()
		if snap.Base() == v.g {
			return v, snap
		}
		v.release()
		if ctxsleep.Sleep(ctx, 50*time.Microsecond) != nil {
			return nil, nil
		}
		if v = s.graphs.acquire(ctx); v == nil {
			return nil, nil
		}
	}
}

// rebindLive resolves b's seeds again once a compaction has been swapped
// in: they may have been decoded against an older base, whose dense ids
// the compacted one (numbered as an import) does not keep. A request that
// walks the snapshot is resolved against it by bindLive; one that walks
// the base alone against v.
func (s *Stage) rebindLive(b *batch, v *served) *message.RejectError {
	if s.o.Live == nil || v.g == s.o.Graph {
		return nil // the base the consumer resolved the seeds against
	}
	if s.overlayRefused(b.req, v) == nil {
		b.req.Unresolved = true
		return nil
	}
	if re := rebind(b.req, v.g, s.graphs.skipUnknown); re != nil {
		return re
	}
	b.walks = b.req.NumWalks()
	return nil
}
