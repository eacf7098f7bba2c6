package stage

// New graph versions without a restart. When WALKSTAGE_GRAPH names a
// catalog pointer (an object URL ending in /CURRENT, see package catalog),
// a follower polls it; on a new version it downloads and verifies the file,
// builds the new engine and swaps it in between micro-batches:
//
//   - overlap (the CPU engine's default): the new engine is built while the
//     old one serves; the swap itself only waits for the engine run in
//     progress (internal/turns). Batches launched on the old version finish on it;
//     the old version is released when the last of them is done.
//   - drain (the GPU engine's default: two graphs rarely fit in device
//     memory): launching stops, batches in flight finish, the old engine is
//     released, the new one built, launching resumes. The stage stays live
//     (it fetches and queues meanwhile); the pause is measured.
//
// A micro-batch walks on exactly one version: walk() takes a reference to
// the served version once, and every batch keeps one until it is finished,
// so its completion event and manifest name the version it was walked on.
// Seeds are resolved again against the version a batch is walked on (the
// consumer may have decoded it against the previous one). A request may pin
// graph_version: if that version is not loaded it waits up to
// WALKSTAGE_GRAPH_VERSION_WAIT for it, else is rejected
// (graph_version_unavailable).

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/walkstage/walkstage/graph"
	"github.com/walkstage/walkstage/internal/ctxsleep"
	"github.com/walkstage/walkstage/message"
	"github.com/walkstage/walkstage/walk"
)

// ReasonGraphVersionUnavailable rejects a request pinned to a graph version
// that is not loaded and did not arrive within WALKSTAGE_GRAPH_VERSION_WAIT.
const ReasonGraphVersionUnavailable message.Reason = "graph_version_unavailable"

// served is one graph version with its engine. References (walks being
// launched, batches until they are finished) keep it alive; retire releases
// it once the last reference is gone.
type served struct {
	g *graph.Graph
	e walk.Engine
	// cost estimates requests' engine cost on g (admission, budget.go).
	cost walk.CostModel

	mu       sync.Mutex
	refs     int
	retired  bool
	released chan struct{} // closed once retired and unreferenced
	closeG   bool          // retire closes the graph too (not in drain mode)
	freed    func()        // called once released (a log line), may be nil
}

func newServed(g *graph.Graph, e walk.Engine) *served {
	return &served{g: g, e: e, cost: walk.NewCostModel(g), released: make(chan struct{}), closeG: true}
}

// chunkReleaser is v's engine's Release, which takes emitted chunks back (the
// GPU engine's; a lent chunk must come back before its batch buffer is
// walked again), or nil for an engine that does not.
func (v *served) chunkReleaser() func(walk.Chunk) {
	if r, ok := v.e.(walk.ChunkReleaser); ok {
		return r.Release
	}
	return nil
}

// releaseChunk gives chunk c back to the engine that emitted it, where the
// engine takes chunks back (chunkReleaser).
func (v *served) releaseChunk(c walk.Chunk) {
	if f := v.chunkReleaser(); f != nil {
		f(c)
	}
}

// acquire takes a reference unless the version is retired.
func (v *served) acquire() bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.retired {
		return false
	}
	v.refs++
	return true
}

// addRef takes another reference; the caller holds one.
func (v *served) addRef() {
	v.mu.Lock()
	v.refs++
	v.mu.Unlock()
}

func (v *served) release() {
	v.mu.Lock()
	v.refs--
	last := v.retired && v.refs == 0
	v.mu.Unlock()
	if last {
		v.free()
	}
}

// retire refuses new references and frees the engine (and the graph, when
// closeG) once the last one is released; released is closed and freed
// called then.
func (v *served) retire(closeG bool, freed func()) <-chan struct{} {
	v.mu.Lock()
	v.retired, v.closeG, v.freed = true, closeG, freed
	idle := v.refs == 0
	v.mu.Unlock()
	if idle {
		v.free()
	}
	return v.released
}

func (v *served) free() {
	v.e.Close()
	if v.closeG {
		v.g.Close()
	}
	close(v.released)
	if v.freed != nil {
		v.freed()
	}
}

// graphState is the Stage's view of the graph it walks (one field of Stage).
type graphState struct {
	cur atomic.Pointer[served]
	// gate, when set, holds launches back during a drain swap.
	gate atomic.Pointer[chan struct{}]

	mu      sync.Mutex
	changed chan struct{} // closed and replaced at every swap

	follower *follower // nil: the graph never changes
	// skipUnknown is the seed policy when seeds are resolved again.
	skipUnknown bool

	swaps    *prometheus.CounterVec
	failures *prometheus.CounterVec
	pause    prometheus.Histogram
	info     *prometheus.GaugeVec
}

// init serves g on e and registers the graph metrics.
func (gs *graphState) init(s *Stage) error {
	gs.cur.Store(newServed(s.o.Graph, s.o.Engine))
	gs.changed = make(chan struct{})
	gs.swaps = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "walkstage_graph_swaps_total",
		Help: "Graph versions swapped in without a restart, by mode (overlap, drain)."}, []string{"mode"})
	gs.failures = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "walkstage_graph_swap_failures_total",
		Help: "New graph versions refused or not swapped in, by reason (pointer, corrupt, download, engine); the old version keeps serving."},
		[]string{"reason"})
	gs.pause = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "walkstage_graph_swap_pause_seconds",
		Help:    "Time launches were held back by a graph swap (overlap: the engine run in progress; drain: in-flight batches and the engine build).",
		Buckets: prometheus.ExponentialBuckets(1e-5, 4, 14)})
	gs.info = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "walkstage_graph_info",
		Help: "1 for the graph version being served."}, []string{"graph", "version"})
	for _, c := range []prometheus.Collector{gs.swaps, gs.failures, gs.pause, gs.info} {
		if err := s.o.Registry.Register(c); err != nil {
			return fmt.Errorf("stage: register graph metrics: %w", err)
		}
	}
	gs.info.WithLabelValues(s.o.Graph.Name, s.o.Graph.Version).Set(1)
	return nil
}

// serving is the version now served, without a reference: only its name,
// version and engine name may be read.
func (gs *graphState) serving() *served { return gs.cur.Load() }

// acquire returns the served version with a reference, waiting while a
// drain swap holds launches back; nil when ctx ends first.
func (gs *graphState) acquire(ctx context.Context) *served {
	for {
		if g := gs.gate.Load(); g != nil {
			select {
			case <-*g:
			case <-ctx.Done():
				return nil
			}
			continue
		}
		v := gs.cur.Load()
		if v.acquire() {
			return v
		}
		// Retired under us: the swap stores its successor or sets the
		// gate right away (or the stage is shutting down mid-swap).
		if ctxsleep.Sleep(ctx, time.Millisecond) != nil {
			return nil
		}
	}
}

// changes returns a channel closed at the next swap.
func (gs *graphState) changes() <-chan struct{} {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	return gs.changed
}

func (gs *graphState) announce(old, nv *graph.Graph) {
	gs.info.DeleteLabelValues(old.Name, old.Version)
	gs.info.WithLabelValues(nv.Name, nv.Version).Set(1)
	gs.mu.Lock()
	close(gs.changed)
	gs.changed = make(chan struct{})
	gs.mu.Unlock()
}

// unbind drops b's reference to the version it was walked on.
func (b *batch) unbind() {
	if b.v != nil {
		b.v.release()
		b.v = nil
	}
}

// bind attaches b to v (walk holds a reference to v) before its writer
// opens: the pinned version must be v, and when versions can change the
// seeds are resolved against v. A rejection is the request's fault.
func (s *Stage) bind(b *batch, v *served) *message.RejectError {
	b.unbind()
	v.addRef()
	b.v = v
	if b.existing != nil || b.lookupErr != nil {
		return nil // reported from the output found (its own version), not walked
	}
	if pin := b.req.GraphVersion; pin != "" && pin != v.g.Version {
		return &message.RejectError{Reason: ReasonGraphVersionUnavailable, BatchID: b.req.BatchID,
			Msg: fmt.Sprintf("request is pinned to graph version %s; this stage serves %s %s", pin, v.g.Name, v.g.Version)}
	}
	if s.graphs.follower == nil {
		// The consumer resolved the seeds against this very graph, unless
		// a live graph's compaction has replaced it since.
		return s.rebindLive(b, v)
	}
	if re := rebind(b.req, v.g, s.graphs.skipUnknown); re != nil {
		return re
	}
	b.walks = b.req.NumWalks()
	return nil
}

// rebind resolves r's seeds (external ids) and checks its algorithm
// against g, as message.DecodeRequest did against the graph it had.
func rebind(r *message.Request, g *graph.Graph, skipUnknown bool) *message.RejectError {
	rej := func(reason message.Reason, format string, a ...any) *message.RejectError {
		return &message.RejectError{Reason: reason, BatchID: r.BatchID, Msg: fmt.Sprintf(format, a...)}
	}
	if r.Graph != "" && r.Graph != g.Name {
		return rej(message.ReasonGraphMismatch, "request is for graph %q, this stage now serves %q (version %s)", r.Graph, g.Name, g.Version)
	}
	if err := r.ValidateFor(g); err != nil {
		return rej(message.ReasonInvalidParameters, "graph version %s: %v", g.Version, err)
	}
	// Integer ids resolve as numbers; where the request or the graph has
	// string ids, as text (DenseIDString reads decimal ids of an integer
	// graph), so a swap to a graph of the other id type keeps working
	// where the ids still name vertices.
	strs := g.HasStringIDs()
	n := r.NumSeeds()
	var seeds []int64
	var stringSeeds []string
	if strs {
		stringSeeds = make([]string, 0, n)
	} else {
		seeds = make([]int64, 0, n)
	}
	starts := make([]uint32, 0, n)
	var unknown []string
	for i := range n {
		var v uint32
		var ok bool
		if r.StringSeeds == nil && !strs {
			v, ok = g.DenseID(r.Seeds[i])
		} else {
			v, ok = g.DenseIDString(r.SeedID(i))
		}
		switch {
		case !ok:
			unknown = append(unknown, r.SeedID(i))
			continue
		case strs:
			stringSeeds = append(stringSeeds, r.SeedID(i))
		case r.StringSeeds == nil:
			seeds = append(seeds, r.Seeds[i])
		default:
			seeds = append(seeds, g.ExternalID(v))
		}
		starts = append(starts, v)
	}
	if len(unknown) > 0 {
		if !skipUnknown || len(starts) == 0 {
			return rej(message.ReasonUnknownVertices, "%d of %d seeds are not in graph version %s, e.g. %v",
				len(unknown), n, g.Version, unknown[:min(len(unknown), 10)])
		}
		r.Skipped += len(unknown)
		r.SkippedIDs = append(r.SkippedIDs, unknown[:min(len(unknown), max(0, 100-len(r.SkippedIDs)))]...)
	}
	r.Seeds, r.StringSeeds, r.Starts = seeds, stringSeeds, starts
	return nil
}
