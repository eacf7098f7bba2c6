package stage

// The catalog follower: it polls a catalog pointer and swaps new graph
// versions in (graphs.go describes the swap modes and what a batch holds).

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"runtime/debug"
	"strings"
	"time"

	"github.com/walkstage/walkstage/catalog"
	"github.com/walkstage/walkstage/engines"
	"github.com/walkstage/walkstage/graph"
	"github.com/walkstage/walkstage/stage/config"
	"github.com/walkstage/walkstage/walk"
)

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
	f.log.Info("following graph catalog", "catalog", f.cat.String(), "interval_seconds", f.interval.Seconds(), "drain", f.drain)
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
		f.s.turns.Lock()
		gs.cur.Store(nv)
		f.s.turns.Done()
		pause := time.Since(p0)
		f.finish(old, nv, log, config.SwapOverlap, pause, loaded, built)
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
			f.s.health.BreakEngine(fmt.Errorf("graph swap: new engine: %v; old engine: %w", err, rerr))
			return errors.Join(err, rerr)
		}
		gs.cur.Store(newServed(old.g, back))
		return err
	}
	built := time.Since(t0)
	nv := newServed(g, e)
	gs.cur.Store(nv)
	pause := time.Since(p0)
	f.finish(old, nv, log, config.SwapDrain, pause, loaded, built)
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
	log.Info("graph version swapped", "mode", mode, "pause_seconds", pause.Seconds(), "load_seconds", loaded.Seconds(), "build_seconds", built.Seconds(),
		"engine", nv.e.Name(), "vertices", nv.g.NumVertices(), "edges", nv.g.NumEdges())
	if mode == config.SwapOverlap {
		version := old.g.Version
		old.retire(true, func() { log.Info("previous graph version released", "version", version) })
	}
}

// followGraph starts following the catalog when c.Graph names a pointer
// and polling is on; FromConfig calls it once the Stage is built.
func (rt *Runtime) followGraph(ctx context.Context, c config.Config, log *slog.Logger) error {
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
	cpu := c.EngineSettings()
	drain := c.GraphSwap == config.SwapDrain || c.GraphSwap == config.SwapAuto && !strings.HasPrefix(s.o.Engine.Name(), "cpu")
	f := &follower{s: s, cat: cat, interval: c.GraphPollInterval, drain: drain, dir: c.GraphDownloadDir,
		build: func(g *graph.Graph) (walk.Engine, error) { return engines.New(g, c.Engine, cpu, log) },
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
