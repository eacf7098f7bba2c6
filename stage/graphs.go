package stage

// New graph versions without a restart. When WALKSTAGE_GRAPH names a
// catalog pointer (an object URL ending in /CURRENT, see package catalog),
// a follower polls it; on a new version it downloads and verifies the file,
// builds the new engine and swaps it in between micro-batches:
//
//   - overlap (the CPU engine's default): the new engine is built while the
//     old one serves; the swap itself only waits for the engine run in
//     progress (engineMu). Batches launched on the old version finish on it;
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
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/walkstage/walkstage/catalog"
	"github.com/walkstage/walkstage/graph"
	"github.com/walkstage/walkstage/source"
	"github.com/walkstage/walkstage/walk"
)

// ReasonGraphVersionUnavailable rejects a request pinned to a graph version
// that is not loaded and did not arrive within WALKSTAGE_GRAPH_VERSION_WAIT.
const ReasonGraphVersionUnavailable source.Reason = "graph_version_unavailable"

// Swap modes (WALKSTAGE_GRAPH_SWAP).
const (
	swapAuto    = "auto"
	swapOverlap = "overlap"
	swapDrain   = "drain"
)

type configErr struct{ name, msg string }

// validGraphSettings checks the graph-following variables (Config.validate).
func validGraphSettings(c *Config) *configErr {
	switch c.GraphSwap {
	case swapAuto, swapOverlap, swapDrain:
	default:
		return &configErr{"GRAPH_SWAP", fmt.Sprintf("%q is not auto, overlap or drain", c.GraphSwap)}
	}
	if c.GraphPollInterval < 0 || c.GraphPollInterval > 0 && c.GraphPollInterval < 100*time.Millisecond {
		return &configErr{"GRAPH_POLL_INTERVAL", fmt.Sprintf("%v: use 0 (off) or at least 100ms", c.GraphPollInterval)}
	}
	if c.GraphVersionWait < 0 {
		return &configErr{"GRAPH_VERSION_WAIT", fmt.Sprintf("%v is negative", c.GraphVersionWait)}
	}
	return nil
}

// served is one graph version with its engine. References (walks being
// launched, batches until they are finished) keep it alive; retire releases
// it once the last reference is gone.
type served struct {
	g *graph.Graph
	e walk.Engine

	mu       sync.Mutex
	refs     int
	retired  bool
	released chan struct{} // closed once retired and unreferenced
	closeG   bool          // retire closes the graph too (not in drain mode)
	freed    func()        // called once released (a log line), may be nil
}

func newServed(g *graph.Graph, e walk.Engine) *served {
	return &served{g: g, e: e, released: make(chan struct{}), closeG: true}
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
		if !sleepCtx(ctx, time.Millisecond) {
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
func (s *Stage) bind(b *batch, v *served) *source.RejectError {
	b.unbind()
	v.addRef()
	b.v = v
	if b.existing != nil || b.lookupErr != nil {
		return nil // reported from the output found (its own version), not walked
	}
	if pin := b.req.GraphVersion; pin != "" && pin != v.g.Version {
		return &source.RejectError{Reason: ReasonGraphVersionUnavailable, BatchID: b.req.BatchID,
			Msg: fmt.Sprintf("request is pinned to graph version %s; this stage serves %s %s", pin, v.g.Name, v.g.Version)}
	}
	if s.graphs.follower == nil {
		return nil // the consumer resolved the seeds against this very graph
	}
	if re := rebind(b.req, v.g, s.graphs.skipUnknown); re != nil {
		return re
	}
	b.walks = b.req.NumWalks()
	return nil
}

// rebind resolves r's seeds (external ids) and checks its algorithm
// against g, as source.DecodeRequest did against the graph it had.
func rebind(r *source.Request, g *graph.Graph, skipUnknown bool) *source.RejectError {
	rej := func(reason source.Reason, format string, a ...any) *source.RejectError {
		return &source.RejectError{Reason: reason, BatchID: r.BatchID, Msg: fmt.Sprintf(format, a...)}
	}
	if r.Graph != "" && r.Graph != g.Name {
		return rej(source.ReasonGraphMismatch, "request is for graph %q, this stage now serves %q (version %s)", r.Graph, g.Name, g.Version)
	}
	if err := r.ValidateFor(g); err != nil {
		return rej(source.ReasonInvalidParameters, "graph version %s: %v", g.Version, err)
	}
	seeds := make([]int64, 0, len(r.Seeds))
	starts := make([]uint32, 0, len(r.Seeds))
	var unknown []int64
	for _, ext := range r.Seeds {
		v, ok := g.DenseID(ext)
		if !ok {
			unknown = append(unknown, ext)
			continue
		}
		seeds, starts = append(seeds, ext), append(starts, v)
	}
	if len(unknown) > 0 {
		if !skipUnknown || len(starts) == 0 {
			return rej(source.ReasonUnknownVertices, "%d of %d seeds are not in graph version %s, e.g. %v",
				len(unknown), len(r.Seeds), g.Version, unknown[:min(len(unknown), 10)])
		}
		r.Skipped += len(unknown)
		r.SkippedIDs = append(r.SkippedIDs, unknown[:min(len(unknown), max(0, 100-len(r.SkippedIDs)))]...)
	}
	r.Seeds, r.Starts = seeds, starts
	return nil
}

// follower polls a catalog pointer and swaps new versions in.
type follower struct {
	s        *Stage
	cat      *catalog.Catalog
	interval time.Duration
	drain    bool
	dir      string
	build    func(*graph.Graph) (walk.Engine, error)
	onSwap   func(*graph.Graph) // before the old graph is released
	log      *slog.Logger

	// refused is the last pointer whose version was corrupt or could not
	// be built: it is not tried again until CURRENT changes.
	refused catalog.Pointer
	lastErr string
}

// run polls until ctx ends.
func (f *follower) run(ctx context.Context) {
	f.log.Info("following graph catalog", "catalog", f.cat.String(), "interval", f.interval, "drain", f.drain)
	t := time.NewTicker(f.interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		f.poll(ctx)
	}
}

// poll reads the pointer once and swaps when it names a new version.
func (f *follower) poll(ctx context.Context) {
	p, err := f.cat.Current(ctx)
	if err != nil {
		if ctx.Err() == nil && err.Error() != f.lastErr {
			f.s.graphs.failures.WithLabelValues("pointer").Inc()
			f.log.Warn("graph catalog pointer unreadable; serving the current version", "err", err)
		}
		f.lastErr = err.Error()
		return
	}
	f.lastErr = ""
	cur := f.s.graphs.serving().g
	if p.Version == cur.Version || p.Key == f.refused.Key && p.SHA256 == f.refused.SHA256 {
		return
	}
	log := f.log.With("graph", p.Name, "version", p.Version, "from", cur.Version)
	log.Info("new graph version published; loading it while the current one serves", "bytes", p.Size)
	t0 := time.Now()
	g, err := f.cat.Load(ctx, p, f.dir)
	if err != nil {
		if ctx.Err() != nil {
			return
		}
		reason := "download" // the store's trouble: tried again at the next poll
		if errors.Is(err, catalog.ErrCorrupt) {
			reason = "corrupt" // the version's: not tried again until CURRENT changes
			f.refused = p
		}
		f.s.graphs.failures.WithLabelValues(reason).Inc()
		log.Error("new graph version refused; the current version keeps serving", "reason", reason, "err", err)
		return
	}
	if err := f.swap(ctx, g, log, time.Since(t0)); err != nil {
		f.refused = p
		f.s.graphs.failures.WithLabelValues("engine").Inc()
		log.Error("new graph version not swapped in; the current version keeps serving", "err", err)
	}
}

// swap serves g in place of the current version. On error g is closed and
// the current version serves on.
func (f *follower) swap(ctx context.Context, g *graph.Graph, log *slog.Logger, loaded time.Duration) error {
	gs := &f.s.graphs
	old := gs.serving()
	if !f.drain {
		t0 := time.Now()
		e, err := f.build(g)
		if err != nil {
			g.Close()
			return err
		}
		built := time.Since(t0)
		if ctx.Err() != nil { // shutting down while building: keep the old one
			e.Close()
			g.Close()
			return ctx.Err()
		}
		nv := newServed(g, e)
		// Between micro-batches: no engine run is in progress while the
		// pointer moves, and the next micro-batch takes the new version.
		p0 := time.Now()
		f.s.engineMu.Lock()
		gs.cur.Store(nv)
		f.s.engineMu.Unlock()
		pause := time.Since(p0)
		f.finish(old, nv, log, swapOverlap, pause, loaded, built)
		return nil
	}
	// Drain: hold launches back, let what runs on the old version finish,
	// release its engine (the graph stays mapped until the new engine is
	// up, to rebuild the old one if that fails), build, resume.
	p0 := time.Now()
	gate := make(chan struct{})
	gs.gate.Store(&gate)
	defer func() {
		gs.gate.Store(nil)
		close(gate)
	}()
	log.Info("draining: launches held until the new engine is built")
	select {
	case <-old.retire(false, nil):
	case <-ctx.Done():
		// Shutdown: in-flight batches still hold the old version; the
		// runtime closes it after the stage stops.
		g.Close()
		return ctx.Err()
	}
	// The CPU engine's tables are Go memory: hand them back to the OS
	// before the new ones are built, or draining saves nothing.
	runtime.GC()
	debug.FreeOSMemory()
	t0 := time.Now()
	e, err := f.build(g)
	if err != nil {
		g.Close()
		back, rerr := f.build(old.g)
		if rerr != nil {
			// Nothing can walk: the engine is broken, as after a device
			// fault; /healthz reports it and the pod restarts on CURRENT.
			f.s.health.breakEngine(fmt.Errorf("graph swap: new engine: %v; old engine: %w", err, rerr))
			return errors.Join(err, rerr)
		}
		gs.cur.Store(newServed(old.g, back))
		return err
	}
	built := time.Since(t0)
	nv := newServed(g, e)
	gs.cur.Store(nv)
	pause := time.Since(p0)
	f.finish(old, nv, log, swapDrain, pause, loaded, built)
	old.g.Close()
	return nil
}

// finish reports a swap and has the old version released once its last
// batch is done.
func (f *follower) finish(old, nv *served, log *slog.Logger, mode string, pause, loaded, built time.Duration) {
	gs := &f.s.graphs
	if f.onSwap != nil {
		f.onSwap(nv.g) // the consumer resolves seeds against the new version
	}
	gs.announce(old.g, nv.g)
	gs.swaps.WithLabelValues(mode).Inc()
	gs.pause.Observe(pause.Seconds())
	f.s.m.graphBytes.Set(float64(nv.g.MemoryBytes()))
	log.Info("graph version swapped", "mode", mode, "pause", pause, "load", loaded, "build", built,
		"engine", nv.e.Name(), "vertices", nv.g.NumVertices(), "edges", nv.g.NumEdges())
	if mode == swapOverlap {
		version := old.g.Version
		old.retire(true, func() { log.Info("previous graph version released", "version", version) })
	}
}

// pinSource holds back requests pinned to a graph version that is not
// loaded, up to wait, and turns those still unserved then into
// graph_version_unavailable rejections. Everything else passes through.
type pinSource struct {
	inner Deliveries
	gs    *graphState
	wait  time.Duration
	max   int // held requests at most; then it fetches nothing new

	held    []heldDelivery
	pending chan nextResult // an inner Next running in the background
}

type heldDelivery struct {
	d        *source.Delivery
	deadline time.Time
}

type nextResult struct {
	d   *source.Delivery
	err error
}

func pinnedElsewhere(d *source.Delivery, version string) bool {
	return d.Reject == nil && d.Request != nil && d.Request.GraphVersion != "" && d.Request.GraphVersion != version
}

func (p *pinSource) Next(ctx context.Context) (*source.Delivery, error) {
	for {
		version := p.gs.serving().g.Version
		now := time.Now()
		var next time.Time
		for i, h := range p.held {
			if !pinnedElsewhere(h.d, version) {
				p.held = slices.Delete(p.held, i, i+1)
				return h.d, nil
			}
			if !now.Before(h.deadline) {
				p.held = slices.Delete(p.held, i, i+1)
				return p.reject(h.d, version), nil
			}
			if next.IsZero() || h.deadline.Before(next) {
				next = h.deadline
			}
		}
		var got *nextResult
		switch {
		case len(p.held) == 0 && p.pending == nil:
			// Nothing held: fetch in line, as without pinning.
			d, err := p.inner.Next(ctx)
			got = &nextResult{d, err}
		default:
			if p.pending == nil && len(p.held) < p.max {
				ch := make(chan nextResult, 1)
				p.pending = ch
				go func() {
					d, err := p.inner.Next(ctx)
					ch <- nextResult{d, err}
				}()
			}
			var expiry <-chan time.Time
			if !next.IsZero() {
				timer := time.NewTimer(time.Until(next))
				defer timer.Stop()
				expiry = timer.C
			}
			select {
			case r := <-p.pending:
				p.pending = nil
				got = &r
			case <-p.gs.changes():
			case <-expiry:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		if got == nil {
			continue
		}
		if got.err != nil || !pinnedElsewhere(got.d, version) {
			return got.d, got.err
		}
		if p.wait <= 0 {
			return p.reject(got.d, version), nil
		}
		p.held = append(p.held, heldDelivery{d: got.d, deadline: time.Now().Add(p.wait)})
	}
}

func (p *pinSource) reject(d *source.Delivery, version string) *source.Delivery {
	cur := p.gs.serving().g
	return &source.Delivery{Received: d.Received, Ack: d.Ack, Reject: &source.RejectError{
		Reason: ReasonGraphVersionUnavailable, BatchID: d.Request.BatchID,
		Msg: fmt.Sprintf("request is pinned to graph version %s, which did not arrive within %v; this stage serves %s %s",
			d.Request.GraphVersion, p.wait, cur.Name, version)}}
}

// loadFromCatalog loads the version a catalog pointer names (ok false:
// location is not a pointer). A crash during a swap restarts here, on the
// pointer's version.
func loadFromCatalog(ctx context.Context, location, dir string) (g *graph.Graph, ok bool, err error) {
	if !catalog.IsPointerURL(location) {
		return nil, false, nil
	}
	c, err := catalog.Open(ctx, location)
	if err != nil {
		return nil, true, err
	}
	defer c.Close()
	p, err := c.Current(ctx)
	if err != nil {
		return nil, true, err
	}
	g, err = c.Load(ctx, p, dir)
	return g, true, err
}

// followGraph starts following the catalog when c.Graph names a pointer
// and polling is on; FromConfig calls it once the Stage is built.
func (rt *Runtime) followGraph(ctx context.Context, c Config, log *slog.Logger) error {
	s := rt.Stage
	s.graphs.skipUnknown = c.UnknownVertices == "skip"
	if !catalog.IsPointerURL(c.Graph) || c.GraphPollInterval <= 0 {
		return nil
	}
	cat, err := catalog.Open(ctx, c.Graph)
	if err != nil {
		return err
	}
	rt.closers = append(rt.closers, cat.Close)
	cpu := CPUSettings{Workers: c.CPUWorkers, FusedTableBytes: c.CPUFusedTableBytes, EagerLabelTables: c.CPULabelTables == "eager"}
	drain := c.GraphSwap == swapDrain || c.GraphSwap == swapAuto && !strings.HasPrefix(s.o.Engine.Name(), "cpu")
	f := &follower{s: s, cat: cat, interval: c.GraphPollInterval, drain: drain, dir: c.GraphDownloadDir,
		build: func(g *graph.Graph) (walk.Engine, error) { return NewEngine(g, c.Engine, cpu, log) },
		log:   log.With("component", "graph-follower")}
	if rt.Consumer != nil {
		f.onSwap = rt.Consumer.SetGraph
	}
	s.graphs.follower = f
	s.o.Source = &pinSource{inner: s.o.Source, gs: &s.graphs, wait: c.GraphVersionWait, max: s.o.QueueDepth}
	// The version served at shutdown (maybe not the one loaded at start).
	rt.closers = append(rt.closers, func() error {
		v := s.graphs.serving()
		return errors.Join(v.e.Close(), v.g.Close())
	})
	return nil
}

// addActors adds the follower to the stage's actors (Run).
func (gs *graphState) addActors(g *group, ctx context.Context) {
	if gs.follower == nil {
		return
	}
	fctx, stop := context.WithCancel(ctx)
	g.add("graph follower", func() error {
		gs.follower.run(fctx)
		return nil
	}, stop)
}
