// Package cpu is the multi-core CPU engine, the reference for every other
// engine and the engine of machines without a GPU: Engine runs walk.Jobs
// on all cores and emits walk.Chunks. It holds the steppers that follow
// the draw contract of walk/draws.go and walk/timeparams.go (stepper.go,
// node2vec.go, temporal.go), the sampling tables it builds on first use
// (the packed and fused alias tables, label tables, Node2Vec's fence
// index; tables.go), and the loops that keep many walks in flight to hide
// memory latency: the lockstep and pipelined loops and the ring walker with
// its vector rounds (ring.go, ringvec_amd64.s, philox8/philox64 in AVX2 and
// AVX-512). Uniform, alias, PPR, Node2Vec and MetaPath walks equal the GPU
// engine's walk by walk. It imports walk and graph; it knows nothing of
// Kafka, Parquet or CUDA.
//
// Size: about 3,900 lines without tests, over the project's ~3,000,
// because every algorithm's steps (static, Node2Vec, MetaPath, temporal, the live
// graph's overlay) are methods of one stepper that holds the engine's
// tables and the walk's draw keys, and the loops that keep walks in flight
// call them; in packages of their own they would need that stepper as an
// exported API that nothing else should use.
package cpu

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/walkstage/walkstage/graph"
	"github.com/walkstage/walkstage/internal/sysmem"
	"github.com/walkstage/walkstage/walk"
)

// Option configures the CPU engine.
type Option func(*config)

type config struct {
	workers      int
	tableWorkers int
	chunkSize    int
	fusedLimit   int64
}

// WithWorkers sets the number of walking goroutines (default GOMAXPROCS).
func WithWorkers(n int) Option { return func(c *config) { c.workers = n } }

// WithTableWorkers sets the most goroutines that build the alias tables
// (the fused or packed table) at a time: an engine built beside other work,
// for a live graph's compaction while its applier goes on, leaves that
// work the other cores. Defaults to 0, every core.
func WithTableWorkers(n int) Option { return func(c *config) { c.tableWorkers = n } }

// WithChunkSize sets how many walks form one emitted chunk and one unit of
// scheduling (default 1024). Walking memory in flight is bounded by about
// 3 * workers * chunkSize * (Length+1) * 4 bytes: one buffer being filled per
// worker and up to two finished chunks per worker queued for emit.
func WithChunkSize(n int) Option { return func(c *config) { c.chunkSize = n } }

// WithFusedTableLimit sets the most memory the fused table (fusedEntry, 32
// bytes per edge) may take. When it fits, it is the engine's one alias
// table: weighted DeepWalk and PPR walk on it (a step reads one random
// cache line instead of the packed table's two; the packed table takes 12
// bytes per edge), Node2Vec draws its proposals from it, and uniform
// DeepWalk reads targets and their edge ranges from it. When it does not,
// the packed table serves the weighted walks. 0 turns it off. The default, DefaultFusedTableLimit, is a quarter of the memory the
// process may use.
func WithFusedTableLimit(bytes int64) Option { return func(c *config) { c.fusedLimit = bytes } }

// DefaultFusedTableLimit is a quarter of the memory this process may use:
// physical memory, or the cgroup's limit where that is lower.
func DefaultFusedTableLimit() int64 { return sysmem.Limit() / 4 }

// Engine is the multi-core engine and the reference for every other engine.
// Workers pull units of chunkSize walks from a shared cursor (dynamic
// chunked scheduling), so skewed walks (a high-degree start, a long PPR tail)
// do not leave cores idle, and results do not depend on the schedule because
// every random word is keyed by (seed, walk, step, draw).
type Engine struct {
	g   *graph.Graph
	cfg config

	aliasOnce  sync.Once
	alias      []aliasEntry
	tableBuild time.Duration

	fusedOnce sync.Once
	fused     []fusedEntry
	// fusedOK: the graph is weighted, fits fusedEntry and the fused table
	// fits the limit.
	fusedOK bool
	// overlaySlow walks jobs on an overlay one unit at a time
	// (walkOverlayUnit) rather than on the ring: the reference the ring's
	// walks are compared with in tests.
	overlaySlow bool

	fenceOnce sync.Once
	fence     *fenceIndex

	labelOnce sync.Once
	labels    *labelTables
	// labelSums are the label segments' weight sums, for weighted MetaPath
	// on a live graph's delta (labelWeightSums).
	labelSumOnce sync.Once
	labelSums    []float64

	coarseOnce sync.Once
	coarse     []int64 // Temporal's coarse time index (coarseIndex)
	cumwOnce   sync.Once
	cumw       []float64 // Temporal's per-vertex prefix sums of weights (windowWeights)
	recOnce    sync.Once
	recs       []timeRec // Temporal's records for the uniform and linear biases (timeRecords)
	// nextOnce and nextRecs: the uniform and linear biases' records with
	// nx, forward and backward (timeNextRecords).
	nextOnce [2]sync.Once
	nextRecs [2][]timeRec
	// expTabs are the exponential bias's cell sums by scale, direction
	// and weighting (expSums), least recently used first; guarded by mu.
	expTabs []*expTable

	mu    sync.Mutex
	stats walk.RunStats

	// chunks keeps the memory of chunks given back (Release).
	chunks chunkPool
	// scratch is the workers' memory of the last run (takeScratch); guarded
	// by mu.
	scratch []*unitScratch
}

var _ walk.Engine = (*Engine)(nil)
var _ walk.StatsReporter = (*Engine)(nil)
var _ walk.ChunkReleaser = (*Engine)(nil)

// New builds a CPU engine for g. Sampling tables are built on first use.
func New(g *graph.Graph, opts ...Option) (*Engine, error) {
	if g == nil || g.NumVertices() <= 0 {
		return nil, errors.New("cpu engine: empty graph")
	}
	cfg := config{workers: runtime.GOMAXPROCS(0), chunkSize: 1024, fusedLimit: DefaultFusedTableLimit()}
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.workers < 1 || cfg.chunkSize < 1 {
		return nil, fmt.Errorf("cpu engine: workers (%d) and chunk size (%d) must be positive", cfg.workers, cfg.chunkSize)
	}
	if cfg.fusedLimit < 0 {
		return nil, fmt.Errorf("cpu engine: fused table limit %d must be 0 (off) or more", cfg.fusedLimit)
	}
	e := &Engine{g: g, cfg: cfg}
	e.fusedOK = g.Weighted() && int64(g.NumEdges())*fusedBytesPerEdge <= cfg.fusedLimit && fusable(g)
	return e, nil
}

func (e *Engine) Name() string { return "cpu" }
func (e *Engine) Close() error { return nil }

// Release takes back a chunk this engine emitted, once its receiver reads
// none of its slices any more: later units write their walks into its
// memory (chunkPool). A chunk not given back is left to the collector.
func (e *Engine) Release(c walk.Chunk) { e.chunks.put(c) }

// LastRunStats reports the last completed Run.
func (e *Engine) LastRunStats() walk.RunStats {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.stats
}

// unit is one unit of scheduling: walks [lo, hi) of job.
type unit struct {
	job    int
	lo, hi int
}

// Run walks the jobs on all workers and emits one chunk per unit.
func (e *Engine) Run(ctx context.Context, jobs []walk.Job, emit walk.EmitFunc) error {
	t0 := time.Now()
	if err := walk.ValidateOverlayJobs(e.g, jobs); err != nil {
		return err
	}
	steppers, units, maxLen := e.plan(jobs)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	workers := min(e.cfg.workers, max(len(units), 1))
	out := e.startWorkers(ctx, workers, jobs, steppers, units)

	var walks, steps int64
	var emitErr error
	for c := range out {
		if emitErr != nil {
			continue // drain so workers can exit
		}
		walks += int64(c.Len())
		steps += c.Steps()
		if err := emit(c); err != nil {
			emitErr = err
			cancel()
		}
	}
	if emitErr != nil {
		return emitErr
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	wall := time.Since(t0)
	e.mu.Lock()
	e.stats = walk.RunStats{Walks: walks, Steps: steps, Wall: wall, Compute: wall,
		MemoryBytes: int64(3*workers*e.cfg.chunkSize) * int64(maxLen+1) * 4,
		TableBytes:  e.tableBytes(), TableBuild: e.tableBuild}
	e.mu.Unlock()
	return nil
}

// plan gives every job a stepper with the tables it walks on (built on
// first use) and cuts the jobs into units of chunkSize walks (fewer when
// the run is too small to give every worker one). maxLen is the
// longest walk length, for the memory estimate.
func (e *Engine) plan(jobs []walk.Job) (steppers []*stepper, units []unit, maxLen int) {
	steppers = make([]*stepper, len(jobs))
	// A run of fewer walks than fill a unit per worker is cut finer, so
	// every worker walks: the stage's slices of an expensive request
	// (issue 32) are a few dozen walks of thousands of slow steps, which
	// in one unit of chunkSize left all cores but one idle.
	size, total := e.cfg.chunkSize, 0
	for _, j := range jobs {
		total += len(j.Starts)
	}
	if w := e.cfg.workers; total < w*size {
		size = max(1, (total+w-1)/w)
	}
	for i, j := range jobs {
		var tab []aliasEntry
		live := j.Overlay != nil && !j.Overlay.Empty()
		// A walk on a live graph's delta takes the ring (walkRingOverlay),
		// which reads the fused table as the base's ring does, but only
		// its low offset words; the per-walk path (walkOverlayUnit, kept
		// for tests) draws from the packed table.
		useFused := e.fusedFor(j.Algorithm) && (!live || !e.overlaySlow && uint64(e.g.NumEdges()) < 1<<32)
		if needsAlias(j.Algorithm) && !useFused {
			tab = e.packedTable()
		}
		steppers[i] = newStepper(e.g, j.Algorithm, j.Seed, tab)
		if live {
			steppers[i].ov = j.Overlay
			if !e.overlaySlow {
				steppers[i].ovIdx = walk.IndexOf(j.Overlay)
			}
		}
		if useFused {
			steppers[i].fused = e.fusedTable()
		}
		if steppers[i].lockstepNode2Vec() {
			steppers[i].fence = e.fences()
		}
		if walk.UsesLabelTables(j.Algorithm, e.g) {
			steppers[i].segs = e.labelTables()
			if live && j.Algorithm.Weighted {
				steppers[i].segSums = e.labelWeightSums()
			}
		}
		if j.Algorithm.Kind == walk.Temporal {
			var cumw []float64
			var rec []timeRec
			var exp *expTable
			next := false
			if j.Algorithm.Time.Bias == walk.TimeExponential {
				exp = e.expTable(j.Algorithm)
			} else {
				if j.Algorithm.Weighted {
					cumw = e.windowWeights()
				}
				switch {
				case steppers[i].ov != nil: // a live graph's delta walks on the arrays (walkOverlayTemporalUnit)
				default:
					// The records with nx, where the graph's size allows
					// (walkTemporalNextGroup; temporal Node2Vec, one walk at
					// a time, reads its targets and windows' near ends).
					rec = e.timeNextRecords(j.Algorithm.Time.Backward)
					if next = rec != nil; !next {
						rec = e.timeRecords()
					}
				}
			}
			steppers[i].tmp = temporalGraph(e.g, j.Algorithm, cumw, rec, exp, e.coarseIndex())
			steppers[i].tmp.recNext = next
			if steppers[i].ov != nil {
				steppers[i].tcache = newOverlayTemporalCache(steppers[i].ovIdx)
			}
		}
		for lo := 0; lo < len(j.Starts); lo += size {
			units = append(units, unit{job: i, lo: lo, hi: min(lo+size, len(j.Starts))})
		}
		maxLen = max(maxLen, j.Algorithm.Length)
	}
	return steppers, units, maxLen
}

// startWorkers starts the walking goroutines: each takes the next unit from
// a shared cursor until none is left or ctx is done, and sends its chunk on
// the returned channel, which is closed when all of them have returned.
func (e *Engine) startWorkers(ctx context.Context, workers int, jobs []walk.Job, steppers []*stepper, units []unit) <-chan walk.Chunk {
	out := make(chan walk.Chunk, 2*workers)
	var next atomic.Int64
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// The tables the steppers walk on live outside the Go heap and
			// are unmapped once e is unreachable (hugemem.Alloc); a caller
			// may drop the engine while its stream is still being walked.
			defer runtime.KeepAlive(e)
			sc := e.takeScratch()
			defer e.keepScratch(sc)
			for ctx.Err() == nil {
				u := int(next.Add(1) - 1)
				if u >= len(units) {
					return
				}
				un := units[u]
				c := walkUnit(steppers[un.job], jobs[un.job], un.lo, un.hi, sc, &e.chunks)
				select {
				case out <- c:
				case <-ctx.Done():
					return
				}
			}
		}()
	}
	go func() { wg.Wait(); close(out) }()
	return out
}

// unitScratch is a worker's memory, reused from unit to unit: the rows the
// walks are written to and the ring walker's state (6 KiB, a sixth of what a
// unit of PPR walks allocated when it came new with each unit).
type unitScratch struct {
	rows []uint32
	ring ring
}

// takeScratch gives a worker the scratch memory of an earlier run's worker,
// or new memory. A unit of 1,024 walks of 80 steps writes 332 KiB of rows:
// new with each run, on 16 workers, that was 5 MiB of pages faulted in and
// cleared by the kernel at the start of every run, while a PPR run of a
// million walks lasts about 12 ms there.
func (e *Engine) takeScratch() *unitScratch {
	e.mu.Lock()
	defer e.mu.Unlock()
	if n := len(e.scratch); n > 0 {
		sc := e.scratch[n-1]
		e.scratch = e.scratch[:n-1]
		return sc
	}
	return new(unitScratch)
}

// keepScratch keeps a worker's scratch memory for the next run's workers,
// as many as the engine has workers.
func (e *Engine) keepScratch(sc *unitScratch) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.scratch) < e.cfg.workers {
		e.scratch = append(e.scratch, sc)
	}
}

// walkUnit walks job walks [lo, hi) and returns them as one chunk, in
// memory from pool where chunks were given back. The walks are written at a
// fixed stride into the worker's rows (sc, grown if need be): writing walks
// into freshly allocated memory, at a stride, faults in a page per 4 KiB in
// the middle of the walk, where the chunk's exact-size copy is written in
// order (docs/design/performance-notes.md has the cost).
func walkUnit(s *stepper, j walk.Job, lo, hi int, sc *unitScratch, pool *chunkPool) walk.Chunk {
	n := hi - lo
	stride := s.alg.Length + 1
	if cap(sc.rows) < n*stride+n {
		sc.rows = make([]uint32, n*stride+n)
	}
	buf, lens := sc.rows[:n*stride], sc.rows[n*stride:n*stride+n]
	first := j.FirstWalk + uint64(lo)
	var times []int64
	if s.tmp != nil {
		if j.WithTimes {
			times = make([]int64, n*stride)
		}
		if s.ov != nil {
			s.walkOverlayTemporalUnit(j.Starts[lo:hi], first, buf, times, lens)
		} else {
			s.walkTemporalUnit(j.Starts[lo:hi], first, buf, times, lens)
		}
	} else if s.ov != nil && (s.alg.Kind == walk.Node2Vec || s.alg.Kind == walk.MetaPath) {
		s.walkOverlayOneByOne(j.Starts[lo:hi], first, buf, lens)
	} else if s.ovIdx != nil {
		s.walkRingOverlay(&sc.ring, j.Starts[lo:hi], first, buf, lens)
	} else if s.ov != nil {
		s.walkOverlayUnit(j.Starts[lo:hi], first, buf, lens)
	} else if s.ring() {
		s.walkRingIn(&sc.ring, j.Starts[lo:hi], first, buf, lens)
	} else if s.lockstep() {
		s.walkLockstep(j.Starts[lo:hi], first, buf, lens)
	} else if s.lockstepNode2Vec() {
		s.walkNode2VecLockstep(j.Starts[lo:hi], first, buf, lens)
	} else {
		for k := 0; k < n; k++ {
			lens[k] = uint32(s.walk(first+uint64(k), j.Starts[lo+k], buf[k*stride:(k+1)*stride]))
		}
	}
	total := 0
	for _, l := range lens {
		total += int(l)
	}
	c := pool.get(n, total)
	c.Tag = j.Tag
	pos := uint32(0)
	c.Offsets[0] = 0
	for k := 0; k < n; k++ {
		c.WalkIDs[k] = first + uint64(k)
		pos += lens[k]
		c.Offsets[k+1] = pos
	}
	packWalks(c.Vertices, c.Offsets, buf, stride)
	if times != nil {
		c.Times = make([]int64, pos)
		for k := 0; k < n; k++ {
			copy(c.Times[c.Offsets[k]:], times[k*stride:k*stride+int(lens[k])])
		}
	}
	return c
}

// packWalks copies the walks from their rows of buf (stride apart) to
// their places in dst (offsets[k] to offsets[k+1]). A walk of up to eight
// vertices is moved as one block of eight, which may run into the next
// walk's place, written next: PPR's walks have five vertices on average,
// and a memmove call for each cost 7% of a PPR run
// (docs/design/cpu-engine.md).
func packWalks(dst, offsets, buf []uint32, stride int) {
	n := len(offsets) - 1
	for k := 0; k < n; k++ {
		a, b := int(offsets[k]), int(offsets[k+1])
		src := buf[k*stride:]
		if b-a <= 8 && a+8 <= len(dst) && len(src) >= 8 {
			// Through a value: a copy between two slices may overlap
			// for all the compiler knows, and it made this a memmove call.
			v := *(*[8]uint32)(src)
			*(*[8]uint32)(dst[a:]) = v
			continue
		}
		copy(dst[a:b], src[:b-a])
	}
}

// lockstep reports whether the walks can advance all together, one step at a
