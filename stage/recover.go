package stage

// Recovery of a live graph (issue 37): a replica starts from the latest
// compacted version and its watermark, and reads the edge topic from
// there, so a restart replays the records since the last compaction, not
// the whole topic. The version comes from WALKSTAGE_EDGE_CATALOG, where
// the compactions are published (compact.go), when its CURRENT records a
// watermark of WALKSTAGE_EDGE_TOPIC; else from WALKSTAGE_GRAPH (whose
// pointer's version may record one too).

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"

	"github.com/walkstage/walkstage/catalog"
	"github.com/walkstage/walkstage/engines"
	"github.com/walkstage/walkstage/graph"
	"github.com/walkstage/walkstage/internal/redact"
	"github.com/walkstage/walkstage/livegraph"
	"github.com/walkstage/walkstage/stage/config"
	"github.com/walkstage/walkstage/stage/live"
	"github.com/walkstage/walkstage/walk"
)

// liveStart is where a live graph starts: the watermark its graph holds
// (nil: none, the edge topic is read from its start) and the time window's
// event time then (nil: the graph's newest edge's).
type liveStart struct {
	watermark map[int32]int64
	eventTime *int64
}

// loadStartGraph loads the graph the stage starts from and, with a live
// graph, where it starts.
func loadStartGraph(ctx context.Context, c config.Config, log *slog.Logger) (*graph.Graph, liveStart, error) {
	if c.EdgeTopic == "" {
		g, err := catalog.LoadGraph(ctx, c.Graph, c.GraphDownloadDir)
		return g, liveStart{}, err
	}
	if c.EdgeCatalog != "" {
		g, st, ok, err := loadCompacted(ctx, c, c.EdgeCatalog, "WALKSTAGE_EDGE_CATALOG", log)
		if ok || err != nil {
			return g, st, err
		}
	}
	if catalog.IsPointerURL(c.Graph) {
		g, st, ok, err := loadCompacted(ctx, c, c.Graph, "WALKSTAGE_GRAPH", log)
		if ok || err != nil {
			return g, st, err
		}
	}
	g, err := catalog.LoadGraph(ctx, c.Graph, c.GraphDownloadDir)
	if err == nil {
		log.Info("live graph: no compacted version to start from; the edge topic is read from its start", "edge_topic", c.EdgeTopic)
	}
	return g, liveStart{}, err
}

// loadCompacted loads the version the catalog at location names, with its
// watermark, when it records one of c.EdgeTopic (ok false: it has no
// CURRENT, or a version without a watermark: the caller loads GRAPH).
func loadCompacted(ctx context.Context, c config.Config, location, setting string, log *slog.Logger) (*graph.Graph, liveStart, bool, error) {
	cat, err := catalog.Open(ctx, location)
	if err != nil {
		return nil, liveStart{}, false, fmt.Errorf("%s: %w", setting, err)
	}
	defer cat.Close()
	p, err := cat.Current(ctx)
	switch {
	case errors.Is(err, catalog.ErrNoCurrent):
		return nil, liveStart{}, false, nil
	case err != nil:
		return nil, liveStart{}, false, fmt.Errorf("%s: the live graph's latest compacted version: %w", setting, err)
	case p.EdgeTopic == "":
		log.Warn("the catalog's CURRENT version records no edge-topic watermark; not starting from it", "catalog", cat.String(), "version", p.Version)
		return nil, liveStart{}, false, nil
	case p.EdgeTopic != c.EdgeTopic:
		return nil, liveStart{}, false, fmt.Errorf("%s: %s's CURRENT version %s was compacted from edge topic %q, this stage reads %q: "+
			"name a catalog of this topic's graph (or an empty one)", setting, cat.String(), p.Version, p.EdgeTopic, c.EdgeTopic)
	}
	g, err := cat.Load(ctx, p, c.GraphDownloadDir)
	if err != nil {
		return nil, liveStart{}, false, fmt.Errorf("%s: %w", setting, err)
	}
	wm := p.EdgeOffsets
	if wm == nil {
		wm = map[int32]int64{}
	}
	log.Info("live graph: starting from a compacted version; the edge topic is read from its offsets", "catalog", cat.String(),
		"graph", g.Name, "version", g.Version, "edge_topic", p.EdgeTopic, "edge_offsets", wm)
	return g, liveStart{watermark: wm, eventTime: p.EdgeEventTime}, true, nil
}

// newLive starts the live graph over g at watermark wm (nil: none).
func newLive(g *graph.Graph, wm map[int32]int64, opts ...livegraph.Option) (*livegraph.Live, error) {
	if wm == nil {
		return livegraph.New(g, opts...)
	}
	return livegraph.NewAt(g, wm, opts...)
}

// liveCompactionFor is the background compaction c asks for (nil: off),
// opening WALKSTAGE_EDGE_CATALOG when set.
func (rt *Runtime) liveCompactionFor(ctx context.Context, c config.Config, log *slog.Logger) (*LiveCompaction, error) {
	if c.EdgeCompactRatio <= 0 {
		return nil, nil
	}
	settings := c.EngineSettings()
	// The compacted graph's engine is built beside the applier: its
	// tables leave the applier the cores the compaction does.
	settings.TableWorkers = live.CompactionWorkers(runtime.GOMAXPROCS(0))
	lc := &LiveCompaction{Ratio: c.EdgeCompactRatio, MinDelta: c.EdgeCompactMin, Topic: c.EdgeTopic, Dir: c.GraphDownloadDir,
		Build: func(g *graph.Graph) (walk.Engine, error) { return engines.New(g, c.Engine, settings, log) }}
	if c.EdgeCatalog != "" {
		cat, err := catalog.Open(ctx, c.EdgeCatalog)
		if err != nil {
			return nil, fmt.Errorf("WALKSTAGE_EDGE_CATALOG: %w", err)
		}
		rt.closers = append(rt.closers, cat.Close)
		lc.Catalog = cat
	}
	log.Info("live graph: compacted in the background", "ratio", c.EdgeCompactRatio, "min_delta", c.EdgeCompactMin,
		"catalog", redact.String(c.EdgeCatalog))
	return lc, nil
}
