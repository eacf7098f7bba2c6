// Package hybrid walks one job on the CPU engine and the GPU engine at
// once (Garaph: CPU and GPU on one job, work assigned by measured rate;
// issue 35). The walks of the jobs both engines walk alike are numbered
// job after job; the GPU takes ranges from the front, sized so that both
// engines would end together at their measured rates, the CPU short
// ranges from the back, and the CPU takes the GPU's range from its back
// end once nothing else is left (sched.go). Walks are keyed by (seed,
// walk id, step, draw), so a walk is the same whichever engine walks it:
// the output equals either engine's alone, and a job ends no later than
// the CPU engine would end it alone.
//
// It composes two walk.Engine values and knows nothing of CUDA, Kafka or
// how the engines are built (engines does that); it imports walk and graph
// only, and its tests run two CPU engines or a CPU engine and a fake.
package hybrid

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/bits"
	"sync"
	"time"

	"github.com/walkstage/walkstage/graph"
	"github.com/walkstage/walkstage/internal/ctxsleep"
	"github.com/walkstage/walkstage/walk"
)

// Engine runs each job list on a CPU engine and a GPU engine together.
type Engine struct {
	g        *graph.Graph
	cpu, gpu walk.Engine
	log      *slog.Logger

	// gpuFree holds a token while no Run uses the GPU engine. A Run whose
	// walks were all emitted returns without waiting for the GPU's last
	// range (the CPU walked its tail); that range's Run goes on in the
	// background, its walks dropped, and holds the token until it
	// returns, so the next Run's GPU side starts after it while its CPU
	// side starts at once.
	gpuFree chan struct{}

	// reorderBytes bounds how far ahead of the first walk not emitted yet
	// a walk may be emitted, in row bytes (WithReorderBytes; 0: no bound).
	reorderBytes int64

	mu    sync.Mutex
	keys  map[string]*keyStats // by the first split job's Algorithm.String()
	last  walk.RunStats
	share Share
}

var (
	_ walk.Engine           = (*Engine)(nil)
	_ walk.StatsReporter    = (*Engine)(nil)
	_ walk.AlgorithmChecker = (*Engine)(nil)
	_ walk.OverlayWalker    = (*Engine)(nil)
	_ walk.ChunkReleaser    = (*Engine)(nil)
	_ walk.SlotPreparer     = (*Engine)(nil)
)

// rates are the engines' walks a second for one algorithm, an average
// over runs weighted to the recent (negative: not measured).
type rates struct{ cpu, gpu float64 }

var unmeasured = rates{-1, -1}

// keyStats is what the engine measured of one algorithm's runs: each
// engine's rate while they split a job (sizing the ranges), and each
// mode's whole-run rate (choosing the mode).
type keyStats struct {
	rates
	mode [3]float64 // by mode: walks a second of whole runs (negative: not measured)
	runs int
}

// rateWeight is the weight of a run's rate against the average of the
// runs before it.
const rateWeight = 0.5

// Option configures New.
type Option func(*Engine)

// WithLogger logs each run's split at debug level (the stage runs one per
// micro-batch) to log. Defaults to slog.Default().
func WithLogger(log *slog.Logger) Option { return func(e *Engine) { e.log = log } }

// WithReorderBytes bounds how far out of walk-id order the engine emits
// the walks of the jobs it splits: no walk is emitted more than n bytes of
// rows (4 bytes a vertex and 12 a walk, as the sink counts them) ahead of
// the first walk not emitted yet, so a consumer that holds walks until the
// ones before them arrive (sink.BatchWriter, whose memory limit fails a
// batch otherwise) holds at most n bytes for it. The CPU then takes its
// ranges next to the GPU's instead of from the far end, and the GPU's
// ranges are at most the window (an engine that streams a graph larger
// than the device walks a small range at a lower rate; the engine measures
// and chooses, as always). 0: no bound.
func WithReorderBytes(n int64) Option { return func(e *Engine) { e.reorderBytes = n } }

// New walks g's jobs on cpuEngine and gpuEngine, both built for g, which it
// owns: Close closes them.
func New(g *graph.Graph, cpuEngine, gpuEngine walk.Engine, opts ...Option) (*Engine, error) {
	if g == nil || cpuEngine == nil || gpuEngine == nil {
		return nil, errors.New("hybrid engine: needs a graph, a CPU engine and a GPU engine")
	}
	e := &Engine{g: g, cpu: cpuEngine, gpu: gpuEngine, log: slog.Default(), gpuFree: make(chan struct{}, 1), keys: map[string]*keyStats{}}
	for _, o := range opts {
		o(e)
	}
	e.gpuFree <- struct{}{}
	return e, nil
}

// Name implements walk.Engine: "hybrid", recorded in output metadata.
func (e *Engine) Name() string { return "hybrid" }

// Parts are the CPU and the GPU engine, for callers that report on one
// (bench prints the GPU engine's placement and stream plan).
func (e *Engine) Parts() (cpuEngine, gpuEngine walk.Engine) { return e.cpu, e.gpu }

// Close waits for a GPU range still walking in the background, then
// closes both engines.
func (e *Engine) Close() error {
	<-e.gpuFree
	return errors.Join(e.cpu.Close(), e.gpu.Close())
}

// Check implements walk.AlgorithmChecker: a walks on either engine.
func (e *Engine) Check(a walk.Algorithm) error {
	cerr := walk.CheckAlgorithm(e.cpu, a)
	if cerr == nil || walk.CheckAlgorithm(e.gpu, a) == nil {
		return nil
	}
	return cerr
}

// CheckOverlay implements walk.OverlayWalker: a job on a live graph's delta
// is split like any other when both engines walk it on the delta, else
// walked by the CPU engine.
func (e *Engine) CheckOverlay(a walk.Algorithm) error { return walk.CheckOverlay(e.cpu, a) }

// HoldsSnapshot implements walk.SnapshotHolder: the GPU side's.
func (e *Engine) HoldsSnapshot(a walk.Algorithm) bool { return walk.HoldsSnapshot(e.gpu, a) }

// PrepareSlots implements walk.SlotPreparer for the engines that have it.
func (e *Engine) PrepareSlots(length int) error {
	for _, x := range []walk.Engine{e.gpu, e.cpu} {
		if sp, ok := x.(walk.SlotPreparer); ok {
			if err := sp.PrepareSlots(length); err != nil {
				return err
			}
		}
	}
	return nil
}

// cpuChunkWalks is the most walks a CPU engine's chunk holds (its default
// chunk size); the GPU engine's are 65,536.
const cpuChunkWalks = 1024

// Release implements walk.ChunkReleaser: a chunk goes back to the engine
// whose pool its memory suits. Lent chunks are the GPU engine's; of the
// others, those of a CPU chunk's size go to the CPU engine (a GPU chunk's
// tens of MiB would fill its pool with a few chunks), the rest to the GPU
// engine. Either pool only reuses the memory, so a chunk in the other
// engine's pool is no error.
func (e *Engine) Release(c walk.Chunk) {
	to := e.gpu
	if !c.Lent && len(c.WalkIDs) <= cpuChunkWalks {
		to = e.cpu
	}
	if cr, ok := to.(walk.ChunkReleaser); ok {
		cr.Release(c)
	}
}

// LastRunStats implements walk.StatsReporter: the walks and steps
// emitted (each once), the whole Run's time as Wall and Compute, and
// both engines' memory and tables.
func (e *Engine) LastRunStats() walk.RunStats {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.last
}

// Share is how the last Run's walks were split between the engines.
type Share struct {
	CPUWalks, CPUSteps int64 // emitted from the CPU engine
	GPUWalks, GPUSteps int64 // emitted from the GPU engine
	// Duplicates are walks both engines walked (the CPU took the tail of
	// the GPU's range), emitted once.
	Duplicates int64
	// CPURanges and GPURanges are the ranges each engine took (a job list
	// an engine walks alone counts one).
	CPURanges, GPURanges int
	// GPUDetached says the Run returned while the GPU still walked a range
	// whose walks the CPU had all emitted.
	GPUDetached bool
	// Mode is how the split jobs were walked: "split" between the
	// engines, or by the "gpu" or the "cpu" engine alone (chooseMode).
	Mode string
}

// CPUStepShare is the CPU engine's share of the steps emitted (0 to 1).
func (s Share) CPUStepShare() float64 {
	if t := s.CPUSteps + s.GPUSteps; t > 0 {
		return float64(s.CPUSteps) / float64(t)
	}
	return 0
}

// LastShare is the last Run's split.
func (e *Engine) LastShare() Share {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.share
}

// SameWalks says whether the CPU and the GPU engine walk a on g alike,
// walk by walk for the same seed, so its walks may be split between them:
// the uniform, alias and Node2Vec rejection steppers, temporal windows and
// MetaPath on label tables (each compared walk by walk against the CPU
// engine in gpu's TestWalksMatchCPU, TestTemporalWalksMatchCPU and
// TestStreamWalksMatchCPU). The reservoir steppers (zprs, dprs) draw the
// same distribution in a different order; a job of theirs goes to one
// engine whole, so its walks do not depend on how a run was split.
func SameWalks(a walk.Algorithm, g *graph.Graph) bool {
	if walk.UsesLabelTables(a, g) {
		return true
	}
	switch a.ResolvedStepper() {
	case walk.StepperUniform, walk.StepperAlias, walk.StepperRejection, walk.StepperWindow:
		return true
	}
	return false
}

// side names an engine of the pair.
type side int

const (
	cpuSide side = iota
	gpuSide
)

func (s side) String() string { return [...]string{"cpu", "gpu"}[s] }

// Run implements walk.Engine. Jobs both engines walk alike (SameWalks,
// both Check it, or CheckOverlay for a live graph's delta) are split between them; any other
// job goes whole to the GPU engine when it walks it, else to the CPU
// engine. An error from either engine or from emit stops both and is
// returned; a Run returns once every walk is emitted, possibly with the
// GPU engine still walking walks already emitted (Engine.gpuFree).
func (e *Engine) Run(ctx context.Context, jobs []walk.Job, emit walk.EmitFunc) error {
	t0 := time.Now()
	var cpuOnly, gpuOnly, split []int
	for i := range jobs {
		j := &jobs[i]
		cpuOK := walk.CheckAlgorithm(e.cpu, j.Algorithm) == nil
		if j.Overlay != nil {
			cpuOK = walk.CheckOverlay(e.cpu, j.Algorithm) == nil
		}
		gpuOK := walk.CheckAlgorithm(e.gpu, j.Algorithm) == nil
		if j.Overlay != nil {
			// The GPU engine walks DeepWalk and PPR on a delta with the
			// CPU engine's draws (gpu.TestOverlayWalksMatchCPU), when the
			// graph is wholly on the device.
			gpuOK = walk.CheckOverlay(e.gpu, j.Algorithm) == nil
		}
		switch {
		case cpuOK && gpuOK && SameWalks(j.Algorithm, e.g):
			split = append(split, i)
		case gpuOK:
			gpuOnly = append(gpuOnly, i)
		case cpuOK:
			cpuOnly = append(cpuOnly, i)
		case j.Overlay != nil:
			return fmt.Errorf("job %d: %w", j.Tag, walk.CheckOverlay(e.cpu, j.Algorithm))
		default:
			return fmt.Errorf("job %d: %w", j.Tag, walk.CheckAlgorithm(e.cpu, j.Algorithm))
		}
	}
	key := ""
	if len(split) > 0 {
		key = jobs[split[0]].Algorithm.String()
	}
	m := modeCPU // too few to pay for the GPU's latency: the CPU walks them
	measured := newSpace(jobs, split).total() >= minSplitWalks
	if measured {
		m = e.chooseMode(key)
	}
	switch m {
	case modeCPU:
		cpuOnly, split = append(cpuOnly, split...), nil
	case modeGPU:
		gpuOnly, split = append(gpuOnly, split...), nil
	}
	sp := newSpace(jobs, split)
	e.mu.Lock()
	prior := unmeasured
	if ks := e.keys[key]; ks != nil {
		prior = ks.rates
	}
	e.mu.Unlock()

	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	r := &run{e: e, sp: sp, emit: emit, cancel: cancel, cur: newCursors(sp.total()), prior: prior,
		emitted: make([]uint64, (sp.total()+63)/64), allDone: make(chan struct{}), window: e.window(jobs, split)}
	if sp.total() == 0 {
		close(r.allDone)
	}
	cpuDone, gpuOwnDone, gpuDone := make(chan struct{}), make(chan struct{}), make(chan struct{})
	go func() {
		defer close(cpuDone)
		r.cpuLoop(runCtx, cpuOnly)
	}()
	go r.gpuLoop(runCtx, gpuOnly, gpuOwnDone, gpuDone)

	<-cpuDone
	select {
	case <-gpuOwnDone:
	case <-runCtx.Done():
	}
	select {
	case <-gpuDone:
	case <-r.allDone:
	case <-runCtx.Done():
	}
	err := r.finish(ctx)
	e.record(r, key, m, err == nil && measured, t0)
	return err
}

// mode is how a Run walks its split jobs.
type mode int

const (
	modeSplit mode = iota // between the engines
	modeGPU               // on the GPU engine alone
	modeCPU               // on the CPU engine alone
)

func (m mode) String() string { return [...]string{"split", "gpu", "cpu"}[m] }

// reprobeRuns: every so many runs of an algorithm, the mode not chosen
// is measured again (batch sizes and the host's load change).
const reprobeRuns = 16

// chooseMode picks how the next run of algorithm key walks: split
// between the engines, or on the engine that walked faster while they
// split (its share of the host's cores and memory bandwidth back), by
// the whole-run rates each mode measured. Splitting is not always
// faster: the GPU engine's whole run is bound by the host (copying the
// walks out of its pinned buffers), so when the graph fits the device
// the CPU engine's workers slow the GPU more than they add
// (docs/benchmarks/hybrid.md); and a GPU that walks a sliver of the
// steps costs the CPU more in cores than it adds. Each mode is measured
// once before the faster is kept, then the other again every
// reprobeRuns runs.
func (e *Engine) chooseMode(key string) mode {
	e.mu.Lock()
	defer e.mu.Unlock()
	ks := e.keys[key]
	if ks == nil {
		ks = &keyStats{rates: unmeasured, mode: [3]float64{-1, -1, -1}}
		e.keys[key] = ks
	}
	ks.runs++
	return pickMode(ks)
}

// pickMode is chooseMode's choice from ks (ks.runs counts this run).
func pickMode(ks *keyStats) mode {
	if ks.mode[modeSplit] < 0 {
		return modeSplit
	}
	alone := modeGPU
	if ks.rates.cpu > ks.rates.gpu {
		alone = modeCPU
	}
	if ks.mode[alone] < 0 {
		return alone
	}
	best, other := modeSplit, alone
	if ks.mode[alone] > ks.mode[modeSplit] {
		best, other = alone, modeSplit
	}
	if ks.runs%reprobeRuns == 0 {
		return other
	}
	return best
}

// run is one Run's shared state.
type run struct {
	e      *Engine
	sp     *space
	emit   walk.EmitFunc
	cancel context.CancelFunc
	prior  rates

	mu       sync.Mutex // guards what follows; emit is called under it
	cur      *cursors
	emitted  []uint64 // a bit per split walk: emitted already
	nEmitted int64
	allDone  chan struct{} // closed once every split walk is emitted
	closed   bool          // Run returned or is returning: emit nothing more
	emitErr  error
	errs     [2]error
	share    Share
	// produced and busy are what each side walked in its split ranges
	// (duplicates included) and for how long: its rate in this run.
	produced [2]int64
	busy     [2]time.Duration
	gpuStart time.Time // the GPU's current split range started (zero: none)
	// window bounds how far past low a range may end (WithReorderBytes, in
	// walks; 0: no bound); low is the first split walk not emitted yet.
	window, low int64
}

// window is WithReorderBytes in walks of the split jobs (the longest
// row's bytes each), at least minRange; 0 without a bound.
func (e *Engine) window(jobs []walk.Job, split []int) int64 {
	if e.reorderBytes <= 0 {
		return 0
	}
	per := int64(1)
	for _, i := range split {
		per = max(per, int64(jobs[i].Algorithm.Length+1)*4+12)
	}
	return max(e.reorderBytes/per, minRange)
}

// limit is where a range may end under the window (the caller holds r.mu).
func (r *run) limit() int64 {
	if r.window <= 0 {
		return math.MaxInt64
	}
	return r.low + r.window
}

// windowWait is how long a side waits for the first unemitted walk to
// move when the window leaves it nothing to take.
const windowWait = time.Millisecond

// stealAfter is how long the window may leave the CPU waiting before it
// takes walks of the GPU's range (four of its own ranges' time).
const stealAfter = 4 * cpuRangeTime

// errDetached is what a Run that has returned answers a late engine's emit.
var errDetached = errors.New("hybrid: the run's walks were all emitted already")

// emitter is side's EmitFunc for the jobs of r (chunk tags are job
// indices): walks emitted already are dropped, the caller's tags restored.
func (r *run) emitter(s side) walk.EmitFunc {
	return func(c walk.Chunk) error {
		r.mu.Lock()
		defer r.mu.Unlock()
		if r.closed || r.emitErr != nil {
			r.e.releaseTo(s, c)
			if r.emitErr != nil {
				return r.emitErr
			}
			return errDetached
		}
		j := c.Tag
		if base := r.sp.base[j]; base >= 0 && c.Len() > 0 {
			r.produced[s] += int64(c.Len())
			first := r.sp.jobs[j].FirstWalk
			lo := base + int64(c.WalkIDs[0]-first)
			// Engines emit runs of consecutive ids: test and set their
			// bits a word at a time (a GPU chunk is 65,536 walks, and
			// emit is serial).
			contiguous := c.WalkIDs[c.Len()-1]-c.WalkIDs[0] == uint64(c.Len()-1)
			var dups int
			if contiguous {
				dups = countBits(r.emitted, lo, lo+int64(c.Len()))
			} else {
				for _, id := range c.WalkIDs {
					if i := base + int64(id-first); r.emitted[i>>6]&(1<<(i&63)) != 0 {
						dups++
					}
				}
			}
			if dups == c.Len() {
				r.share.Duplicates += int64(dups)
				r.e.releaseTo(s, c)
				return nil
			}
			if dups > 0 {
				r.share.Duplicates += int64(dups)
				kept := keep(c, func(k int) bool {
					i := base + int64(c.WalkIDs[k]-first)
					return r.emitted[i>>6]&(1<<(i&63)) == 0
				})
				r.e.releaseTo(s, c)
				c, contiguous = kept, false
			}
			if contiguous {
				setBits(r.emitted, lo, lo+int64(c.Len()))
			} else {
				for _, id := range c.WalkIDs {
					i := base + int64(id-first)
					r.emitted[i>>6] |= 1 << (i & 63)
				}
			}
			r.nEmitted += int64(c.Len())
			for r.low < r.sp.total() && r.emitted[r.low>>6]&(1<<(r.low&63)) != 0 {
				r.low++
			}
		}
		n, steps := int64(c.Len()), c.Steps()
		if s == cpuSide {
			r.share.CPUWalks, r.share.CPUSteps = r.share.CPUWalks+n, r.share.CPUSteps+steps
		} else {
			r.share.GPUWalks, r.share.GPUSteps = r.share.GPUWalks+n, r.share.GPUSteps+steps
		}
		c.Tag = r.sp.jobs[j].Tag
		if err := r.emit(c); err != nil {
			r.emitErr = err
			r.cancel()
			return err
		}
		if r.sp.base[j] >= 0 && r.nEmitted == r.sp.total() {
			close(r.allDone)
		}
		return nil
	}
}

// countBits is the number of bits set in [lo, hi) of b.
func countBits(b []uint64, lo, hi int64) int {
	n := 0
	for lo < hi {
		w, off := lo>>6, lo&63
		k := min(64-off, hi-lo)
		mask := ^uint64(0) >> (64 - k) << off
		n += bits.OnesCount64(b[w] & mask)
		lo += k
	}
	return n
}

// setBits sets the bits [lo, hi) of b.
func setBits(b []uint64, lo, hi int64) {
	for lo < hi {
		w, off := lo>>6, lo&63
		k := min(64-off, hi-lo)
		b[w] |= ^uint64(0) >> (64 - k) << off
		lo += k
	}
}

// keep is a copy of c holding the walks k of c for which ok(k).
func keep(c walk.Chunk, ok func(k int) bool) walk.Chunk {
	out := walk.Chunk{Tag: c.Tag, Offsets: []uint32{0}}
	for k := range c.Len() {
		if !ok(k) {
			continue
		}
		out.WalkIDs = append(out.WalkIDs, c.WalkIDs[k])
		out.Vertices = append(out.Vertices, c.Walk(k)...)
		if c.Times != nil {
			out.Times = append(out.Times, c.Times[c.Offsets[k]:c.Offsets[k+1]]...)
		}
		if c.Starts != nil {
			out.Starts = append(out.Starts, c.Starts[k])
		}
		out.Offsets = append(out.Offsets, uint32(len(out.Vertices)))
	}
	return out
}

// releaseTo gives a dropped chunk back to the engine that emitted it.
func (e *Engine) releaseTo(s side, c walk.Chunk) {
	x := e.cpu
	if s == gpuSide {
		x = e.gpu
	}
	if cr, ok := x.(walk.ChunkReleaser); ok {
		cr.Release(c)
	}
}

// fail records side's error (unless the run is over) and stops the run.
func (r *run) fail(s side, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed || errors.Is(err, errDetached) || r.emitErr != nil && errors.Is(err, r.emitErr) {
		return
	}
	if r.errs[s] == nil {
		r.errs[s] = fmt.Errorf("%s engine: %w", s, err)
	}
	r.cancel()
}

// rate is side's walks a second for sizing ranges: this run's once it
// has walked a range, else the prior runs' (negative: not measured).
func (r *run) rate(s side) float64 {
	if r.busy[s] > 0 {
		return float64(r.produced[s]) / r.busy[s].Seconds()
	}
	if s == cpuSide {
		return r.prior.cpu
	}
	return r.prior.gpu
}

// cpuLoop walks the jobs only the CPU walks, then ranges of the split
// jobs until none is left.
func (r *run) cpuLoop(ctx context.Context, own []int) {
	if len(own) > 0 {
		r.mu.Lock()
		r.share.CPURanges++
		r.mu.Unlock()
		if err := r.e.cpu.Run(ctx, r.sp.whole(own), r.emitter(cpuSide)); err != nil {
			r.fail(cpuSide, err)
			return
		}
	}
	var blocked time.Time // since when the window has left the CPU nothing
	for ctx.Err() == nil {
		r.mu.Lock()
		var rg span
		var stolen, ok bool
		if r.window > 0 {
			// Blocked by the window for stealAfter, the CPU takes the
			// GPU's range from its back end as when nothing is left (a
			// GPU that holds the window that long is slower than the CPU
			// at it), so a job still ends.
			steal := !blocked.IsZero() && time.Since(blocked) >= stealAfter
			rg, stolen, ok = r.cur.takeCPUWithin(cpuTake(r.sp.total(), r.rate(cpuSide)), r.limit(), steal)
			switch {
			case !ok && r.cur.hi > r.cur.lo:
				// The window is full: wait for the GPU's range to come out.
				r.mu.Unlock()
				if blocked.IsZero() {
					blocked = time.Now()
				}
				if ctxsleep.Sleep(ctx, windowWait) != nil {
					return
				}
				continue
			case ok && !stolen:
				blocked = time.Time{}
			}
		} else {
			rg, stolen, ok = r.cur.takeCPU(cpuTake(r.sp.total(), r.rate(cpuSide)))
		}
		var jobs []walk.Job
		if ok {
			r.share.CPURanges++
			if stolen {
				jobs = r.unemitted(rg)
			} else {
				jobs = r.sp.cut(rg.lo, rg.hi)
			}
		}
		r.mu.Unlock()
		if !ok {
			return
		}
		if len(jobs) == 0 {
			continue
		}
		t := time.Now()
		err := r.e.cpu.Run(ctx, jobs, r.emitter(cpuSide))
		r.mu.Lock()
		r.busy[cpuSide] += time.Since(t)
		r.mu.Unlock()
		if err != nil {
			r.fail(cpuSide, err)
			return
		}
	}
}

// unemitted is the jobs of the walks of rg not emitted yet (the caller
// holds r.mu).
func (r *run) unemitted(rg span) []walk.Job {
	var jobs []walk.Job
	for i := rg.lo; i < rg.hi; {
		for i < rg.hi && r.emitted[i>>6]&(1<<(i&63)) != 0 {
			i++
		}
		lo := i
		for i < rg.hi && r.emitted[i>>6]&(1<<(i&63)) == 0 {
			i++
		}
		if lo < i {
			jobs = append(jobs, r.sp.cut(lo, i)...)
		}
	}
	return jobs
}

// gpuLoop waits for the GPU engine, walks the jobs only the GPU walks
// (then closes ownDone), then ranges of the split jobs until none is
// left; done is closed when it stops.
func (r *run) gpuLoop(ctx context.Context, own []int, ownDone, done chan struct{}) {
	defer close(done)
	waitFor := r.allDone
	if len(own) > 0 {
		waitFor = nil // its own jobs need the GPU, however long it is busy
	}
	select {
	case <-r.e.gpuFree:
	case <-waitFor:
		close(ownDone)
		return
	case <-ctx.Done():
		close(ownDone)
		return
	}
	defer func() { r.e.gpuFree <- struct{}{} }()
	if len(own) > 0 {
		r.mu.Lock()
		r.share.GPURanges++
		r.mu.Unlock()
		err := r.e.gpu.Run(ctx, r.sp.whole(own), r.emitter(gpuSide))
		close(ownDone)
		if err != nil {
			r.fail(gpuSide, err)
			return
		}
	} else {
		close(ownDone)
	}
	for ctx.Err() == nil {
		r.mu.Lock()
		left := r.cur.hi - r.cur.lo
		share := gpuShare(r.rate(cpuSide), r.rate(gpuSide))
		var rg span
		var ok bool
		if r.window > 0 {
			rg, ok = r.cur.takeGPUWithin(gpuTake(left, share), r.limit())
			if !ok && left > 0 {
				// The window is full of the CPU's ranges: wait for them.
				r.mu.Unlock()
				if ctxsleep.Sleep(ctx, windowWait) != nil {
					return
				}
				continue
			}
		} else {
			rg, ok = r.cur.takeGPU(gpuTake(left, share))
		}
		if ok {
			r.share.GPURanges++
			r.gpuStart = time.Now()
		}
		r.mu.Unlock()
		if !ok {
			return
		}
		err := r.e.gpu.Run(ctx, r.sp.cut(rg.lo, rg.hi), r.emitter(gpuSide))
		r.mu.Lock()
		if !r.closed {
			r.busy[gpuSide] += time.Since(r.gpuStart)
			r.gpuStart = time.Time{}
			r.cur.gpuDone()
		}
		r.mu.Unlock()
		if err != nil {
			r.fail(gpuSide, err)
			return
		}
	}
}

// whole is the jobs at indices own, whole, tagged with their index.
func (s *space) whole(own []int) []walk.Job {
	out := make([]walk.Job, len(own))
	for k, i := range own {
		out[k] = s.jobs[i]
		out[k].Tag = i
	}
	return out
}

// finish ends the run: later emits are dropped (a GPU range still walking
// is told to stop through its context, which Run cancels on return) and
// the error to return is chosen: emit's, else an engine's, else ctx's.
func (r *run) finish(ctx context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.closed = true
	if !r.gpuStart.IsZero() {
		// The GPU's range is still walking: its rate so far is what it
		// emitted in the time it took (none emitted: 0, and the next
		// run gives it minGPUShare).
		r.share.GPUDetached = true
		r.busy[gpuSide] += time.Since(r.gpuStart)
	}
	if r.emitErr != nil {
		return r.emitErr
	}
	for _, err := range r.errs {
		if err != nil && !errors.Is(err, context.Canceled) {
			return err
		}
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	for _, err := range r.errs {
		if err != nil {
			return err
		}
	}
	if r.nEmitted != r.sp.total() {
		return fmt.Errorf("hybrid engine: %d of %d walks emitted", r.nEmitted, r.sp.total()) // a bug
	}
	return nil
}

// record keeps the run's stats and split and folds its rates into the
// averages.
func (e *Engine) record(r *run, key string, m mode, ok bool, t0 time.Time) {
	r.mu.Lock()
	r.share.Mode = m.String()
	sh := r.share
	var rt [2]float64
	for s := range rt {
		if r.busy[s] > 0 {
			rt[s] = float64(r.produced[s]) / r.busy[s].Seconds()
		} else {
			rt[s] = -1
		}
	}
	r.mu.Unlock()
	st := walk.RunStats{Walks: sh.CPUWalks + sh.GPUWalks, Steps: sh.CPUSteps + sh.GPUSteps, Wall: time.Since(t0)}
	st.Compute = st.Wall
	for _, x := range []walk.Engine{e.cpu, e.gpu} {
		if sr, ok := x.(walk.StatsReporter); ok {
			s := sr.LastRunStats()
			st.MemoryBytes += s.MemoryBytes
			st.TableBytes += s.TableBytes
			st.TableBuild = max(st.TableBuild, s.TableBuild)
		}
	}
	e.mu.Lock()
	e.last, e.share = st, sh
	if ks := e.keys[key]; ks != nil {
		fold := func(old *float64, v float64) {
			switch {
			case v < 0: // not measured this run
			case *old < 0:
				*old = v
			default:
				*old = rateWeight*v + (1-rateWeight)**old
			}
		}
		fold(&ks.cpu, rt[cpuSide])
		fold(&ks.gpu, rt[gpuSide])
		if ok && st.Wall > 0 {
			fold(&ks.mode[m], float64(st.Walks)/st.Wall.Seconds())
		}
	}
	e.mu.Unlock()
	e.log.Debug("hybrid run", "walks", st.Walks, "steps", st.Steps, "duration", st.Wall.Seconds(),
		"cpu_steps", sh.CPUSteps, "gpu_steps", sh.GPUSteps, "cpu_step_share", sh.CPUStepShare(),
		"duplicate_walks", sh.Duplicates, "cpu_ranges", sh.CPURanges, "gpu_ranges", sh.GPURanges, "gpu_detached", sh.GPUDetached, "mode", sh.Mode)
}
