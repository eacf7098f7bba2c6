package walk

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"time"

	"github.com/walkstage/walkstage/graph"
)

// Job is one batch of walks with one algorithm and one seed. Walk i of a job
// starts at Starts[i] and has walk id FirstWalk+i: its random stream is
// keyed by (Seed, id, step, draw), so the same job yields the same walks on
// the same engine, whatever else runs beside it. Callers expand "walks per
// seed" by repeating a start vertex.
type Job struct {
	// Tag is the caller's name for the job (the stage uses an index into its
	// micro-batch); engines echo it in every chunk and never interpret it.
	Tag       int
	Algorithm Algorithm
	Seed      uint64
	Starts    []uint32 // dense start vertices
	// FirstWalk is the id of walk 0 (usually 0). A job split over several
	// engines (gpu.Multi) gives each share the ids it has in the whole job,
	// so the walks are those of the unsplit job.
	FirstWalk uint64
	// WithTimes asks a Temporal job's chunks for their walks' times
	// (Chunk.Times).
	WithTimes bool
	// Overlay, when not nil, is the live graph snapshot the job walks on
	// (a delta over the engine's graph, overlay.go): starts may name the
	// vertices it added. Only engines that are an OverlayWalker take it.
	Overlay Overlay
}

// Chunk is a run of completed walks of one job. Walk k of the chunk has id
// WalkIDs[k] and visits Vertices[Offsets[k]:Offsets[k+1]] (dense ids, the
// start vertex first), so it took Offsets[k+1]-Offsets[k]-1 steps; fewer than
// the algorithm's Length means it stopped early (dead end, no edge with the
// wanted label, or a PPR stop). Walk ids within a chunk ascend; chunks of a
// job arrive in any order, each walk exactly once.
//
// The receiver owns a chunk's slices: engines never touch them again,
// unless the chunk is Lent.
type Chunk struct {
	Tag      int
	WalkIDs  []uint64
	Offsets  []uint32 // len(WalkIDs)+1, Offsets[0] == 0
	Vertices []uint32
	// Times, for a Temporal job with WithTimes, is parallel to Vertices:
	// the time of the edge that reached each vertex, a walk's first entry
	// being its bound (TimeParams.Bound). Nil otherwise.
	Times []int64
	// Starts, when not nil, holds the walks' start vertices:
	// Starts[k] == Vertices[Offsets[k]]. An engine that has them at hand
	// (the GPU engine, from its tasks) fills it so that a receiver needing
	// only the starts does not touch the walks for them: the sink's start
	// column read each walk's first vertex from memory not yet in cache,
	// 0.4-0.6 of 5.9 core-s of a scale-22 one-shot on the 16-core host.
	Starts []uint32
	// Lent says the engine lent Vertices out of its own buffers (the GPU
	// engine's pinned batch buffers, gpu.WithLentChunks): the receiver
	// must hand the chunk back to the engine (its Release) once it reads
	// it no more, without waiting for later chunks, since the engine's
	// later batches wait for that buffer. A receiver that keeps walks
	// until more arrive copies them first (sink.BatchWriter does).
	Lent bool
	// LentRunEnd, for a Lent chunk, is where (exclusive, a walk id) the
	// run of walks that the engine lends out of the same buffer, this
	// chunk's included, ends: it emits every walk of the chunk's job
	// below LentRunEnd without waiting for any lent chunk to come back.
	// So a receiver may keep the chunk while it waits for later walks
	// below it; only walks that wait for walks beyond it must be copied.
	// Zero promises nothing. (The GPU engine's chunks are 65,536 walks,
	// the one-shot's row groups 32,768: without the promise the writer
	// copied a part of nearly every chunk, 0.30 of the 0.37 s its one
	// emitting goroutine was busy in a scale-22 one-shot, while encoders
	// idled.)
	LentRunEnd uint64
}

// Len is the number of walks in the chunk.
func (c *Chunk) Len() int { return len(c.WalkIDs) }

// Walk returns the vertices of walk k.
func (c *Chunk) Walk(k int) []uint32 { return c.Vertices[c.Offsets[k]:c.Offsets[k+1]] }

// Steps is the total number of steps in the chunk.
func (c *Chunk) Steps() int64 { return int64(len(c.Vertices) - len(c.WalkIDs)) }

// EmitFunc receives completed chunks. Engines call it from one goroutine at a
// time. An error from it aborts the run and is returned by Run.
type EmitFunc func(Chunk) error

// Engine executes walks over the graph it was built for. Implementations keep
// graph-sized state (sampling tables, device copies) between runs, so one
// engine serves many runs; Run may be called again once the previous call has
// returned.
type Engine interface {
	// Name is "cpu" or "gpu", recorded in output metadata.
	Name() string
	// Run walks every job and streams completed walks to emit, in chunks,
	// without holding the whole output. Jobs may share a launch; their walks
	// are interleaved freely. It returns when every walk has been emitted,
	// or the first error (including ctx's) once the engine has stopped.
	Run(ctx context.Context, jobs []Job, emit EmitFunc) error
	// Close releases the engine's resources.
	Close() error
}

// What an engine can do beyond Engine is named by the interfaces below;
// callers find a capability with a type assertion to one of them, never to
// an anonymous interface, so each has one name and one contract, and each
// engine that has it says so at compile time next to its methods
// (var _ walk.ChunkReleaser = (*Engine)(nil)). They live here, beside
// Engine, because walk imports only graph and every package that builds or
// calls an engine (gpu, engines, stage, the commands) imports walk already:
// naming them adds no import and no cycle. The GPU engine's own
// capabilities, whose methods return gpu's types (its placement plan, its
// partitioned store, the host-read benchmark), are in gpu/capabilities.go:
// walk cannot name gpu's types, and gpu.Multi asks its engines for them,
// so they cannot live in a package that imports gpu.

// StatsReporter is implemented by engines that measure their runs; bench and
// the stage's metrics use it when present.
type StatsReporter interface {
	LastRunStats() RunStats
}

// ChunkReleaser is implemented by engines that take the chunks they
// emitted back for reuse (the GPU and CPU engines). Release gives a chunk back once
// its receiver reads none of its slices any more (sink.WithChunkRelease
// calls it after the chunk's walks are encoded). A Lent chunk must be given
// back, as the engine's later batches wait for its buffer; any other chunk
// may be, or be left to the garbage collector. Safe from any goroutine; a
// chunk is given back at most once.
type ChunkReleaser interface {
	Release(Chunk)
}

// AlgorithmChecker is implemented by engines that cannot walk every valid
// algorithm (the GPU engine: temporal Node2Vec, temporal walks of a graph
// not wholly in device memory). Check returns nil when the engine walks a,
// else an error wrapping ErrInvalidAlgorithm that says why, so a caller
// refuses such a request before it shares a run with others. An engine
// without it walks every algorithm ValidateJobs accepts.
type AlgorithmChecker interface {
	Check(a Algorithm) error
}

// CheckAlgorithm is e's AlgorithmChecker answer, or nil when e has none.
func CheckAlgorithm(e Engine, a Algorithm) error {
	if c, ok := e.(AlgorithmChecker); ok {
		return c.Check(a)
	}
	return nil
}

// SlotPreparer is implemented by engines that allocate per-run buffers
// sized by the walk length on first use (the GPU engine's batch slots in
// pinned host memory). PrepareSlots allocates them now for walks of up to
// length steps, so that a caller timing a run (walkstage walk) does not
// count the allocation, which a long-running stage pays once.
type SlotPreparer interface {
	PrepareSlots(length int) error
}

// ValidateJobs checks each job's algorithm against g and its start vertices
// against g's vertex range. It refuses a job on a live graph's snapshot
// (Job.Overlay): engines that walk one (OverlayWalker) check it themselves.
func ValidateJobs(g *graph.Graph, jobs []Job) error {
	for i := range jobs {
		if jobs[i].Overlay != nil {
			return fmt.Errorf("job %d: %w: this engine does not walk a live graph's delta yet (the cpu and gpu engines do)", jobs[i].Tag, ErrInvalidAlgorithm)
		}
	}
	return ValidateOverlayJobs(g, jobs)
}

// ValidateOverlayJobs is ValidateJobs for an engine that walks overlays: a job on
// one must have g as its base and a supported algorithm, and its starts
// are checked against the overlay's vertices.
func ValidateOverlayJobs(g *graph.Graph, jobs []Job) error {
	for i := range jobs {
		j := &jobs[i]
		if err := j.Algorithm.Validate(g); err != nil {
			return fmt.Errorf("job %d: %w", j.Tag, err)
		}
		n := uint32(g.NumVertices())
		if ov := j.Overlay; ov != nil {
			if ov.Base() != g {
				return fmt.Errorf("job %d: %w: its live graph snapshot is over graph %q version %s, not the engine's %q version %s",
					j.Tag, ErrInvalidAlgorithm, ov.Base().Name, ov.Base().Version, g.Name, g.Version)
			}
			if err := OverlaySupported(j.Algorithm); err != nil {
				return fmt.Errorf("job %d: %w", j.Tag, err)
			}
			if _, timed := ov.(TimedOverlay); j.Algorithm.Kind == Temporal && !ov.Empty() && !timed {
				return fmt.Errorf("job %d: %w: a temporal walk on a live graph needs its appended edges' times, which this snapshot does not give", j.Tag, ErrInvalidAlgorithm)
			}
			n = uint32(ov.NumVertices())
		}
		if j.WithTimes && j.Algorithm.Kind != Temporal {
			return fmt.Errorf("job %d: %w: walk times are only for temporal walks, not %s", j.Tag, ErrInvalidAlgorithm, j.Algorithm.Kind)
		}
		if k := firstBeyond(j.Starts, n); k >= 0 {
			return fmt.Errorf("job %d: %w: start %d is vertex %d, beyond %d vertices", j.Tag, ErrInvalidAlgorithm, k, j.Starts[k], n)
		}
	}
	return nil
}

// validateShare is the fewest starts firstBeyond gives a goroutine of its own.
const validateShare = 1 << 20

// firstBeyond returns the index of the first start not below n, or -1. A
// long list is checked in shares on all cores: a one-shot walk from every
// vertex of a scale-22 graph, 4 walks each (16.8 M starts), spent its first
// 12 ms checking them on one goroutine before the GPU had any work (an
// execution trace on the 16-core host).
func firstBeyond(starts []uint32, n uint32) int {
	shares := min(runtime.GOMAXPROCS(0), len(starts)/validateShare)
	if shares <= 1 {
		return scanBeyond(starts, n)
	}
	first := make([]int, shares)
	var wg sync.WaitGroup
	for i := range shares {
		lo, hi := i*len(starts)/shares, (i+1)*len(starts)/shares
		wg.Go(func() {
			first[i] = scanBeyond(starts[lo:hi], n)
			if first[i] >= 0 {
				first[i] += lo
			}
		})
	}
	wg.Wait()
	for _, k := range first {
		if k >= 0 {
			return k
		}
	}
	return -1
}

// scanBeyond is firstBeyond on one goroutine: the largest start of each
// block of 1,024 first (a loop without an early exit), and only a block
// that holds one beyond n searched for it.
func scanBeyond(starts []uint32, n uint32) int {
	for base := 0; base < len(starts); base += 1024 {
		block := starts[base:min(base+1024, len(starts))]
		var m0, m1, m2, m3 uint32
		i := 0
		for ; i+4 <= len(block); i += 4 {
			m0, m1, m2, m3 = max(m0, block[i]), max(m1, block[i+1]), max(m2, block[i+2]), max(m3, block[i+3])
		}
		for ; i < len(block); i++ {
			m0 = max(m0, block[i])
		}
		if max(m0, m1, m2, m3) < n {
			continue
		}
		for k, s := range block {
			if s >= n {
				return base + k
			}
		}
	}
	return -1
}

// RunStats is what an engine measured during its last Run. Engines that can
// tell compute time from copies (the GPU's kernel time) fill Compute; the rest
// leave it equal to Wall.
type RunStats struct {
	Walks   int64
	Steps   int64
	Wall    time.Duration // the whole Run, emit callbacks included
	Compute time.Duration // walking only (GPU: kernel time, events around launches)
	// MemoryBytes is the engine's working memory beyond the graph and its
	// tables (GPU: device bytes allocated for pools and results).
	MemoryBytes int64
	// TableBytes and TableBuild describe the sampling tables built once per
	// engine (alias tables); zero when none were needed.
	TableBytes int64
	TableBuild time.Duration
	// DeltaBytes and DeltaUpload are what copying live graph snapshots'
	// deltas (Job.Overlay) to the device cost this run: the GPU engine
	// copies a snapshot's when a run names one other than the last it
	// copied, so both are zero for a run on the same snapshot again, and
	// for the CPU engine, which reads the snapshot where it is.
	DeltaBytes  int64
	DeltaUpload time.Duration
}
