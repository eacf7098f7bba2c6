package walk

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/walkstage/walkstage/graph"
)

// CPUOption configures the CPU engine.
type CPUOption func(*cpuConfig)

type cpuConfig struct {
	workers   int
	chunkSize int
}

// WithWorkers sets the number of walking goroutines (default GOMAXPROCS).
func WithWorkers(n int) CPUOption { return func(c *cpuConfig) { c.workers = n } }

// WithChunkSize sets how many walks form one emitted chunk and one unit of
// scheduling (default 1024). Walking memory in flight is bounded by about
// 3 * workers * chunkSize * (Length+1) * 4 bytes: one buffer being filled per
// worker and up to two finished chunks per worker queued for emit.
func WithChunkSize(n int) CPUOption { return func(c *cpuConfig) { c.chunkSize = n } }

// CPU is the multi-core engine and the reference for every other engine.
// Workers pull units of chunkSize walks from a shared cursor (dynamic
// chunked scheduling), so skewed walks (a high-degree start, a long PPR tail)
// do not leave cores idle, and results do not depend on the schedule because
// every random word is keyed by (seed, walk, step, draw).
type CPU struct {
	g   *graph.Graph
	cfg cpuConfig

	aliasOnce  sync.Once
	alias      []aliasEntry
	tableBuild time.Duration

	mu    sync.Mutex
	stats RunStats
}

var _ Engine = (*CPU)(nil)
var _ StatsReporter = (*CPU)(nil)

// NewCPU builds a CPU engine for g. Sampling tables are built on first use.
func NewCPU(g *graph.Graph, opts ...CPUOption) (*CPU, error) {
	if g == nil || g.NumVertices() <= 0 {
		return nil, errors.New("cpu engine: empty graph")
	}
	cfg := cpuConfig{workers: runtime.GOMAXPROCS(0), chunkSize: 1024}
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.workers < 1 || cfg.chunkSize < 1 {
		return nil, fmt.Errorf("cpu engine: workers (%d) and chunk size (%d) must be positive", cfg.workers, cfg.chunkSize)
	}
	return &CPU{g: g, cfg: cfg}, nil
}

func (e *CPU) Name() string { return "cpu" }
func (e *CPU) Close() error { return nil }

// LastRunStats reports the last completed Run.
func (e *CPU) LastRunStats() RunStats {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.stats
}

// PrepareTables builds the alias tables now rather than on first use.
func (e *CPU) PrepareTables() {
	e.aliasOnce.Do(func() {
		if !e.g.Weighted() {
			return
		}
		t0 := time.Now()
		e.alias = buildPacked(e.g)
		e.tableBuild = time.Since(t0)
	})
}

type unit struct {
	job    int
	lo, hi int
}

// Run walks the jobs on all workers and emits one chunk per unit.
func (e *CPU) Run(ctx context.Context, jobs []Job, emit EmitFunc) error {
	t0 := time.Now()
	if err := ValidateJobs(e.g, jobs); err != nil {
		return err
	}
	steppers := make([]*stepper, len(jobs))
	var units []unit
	maxLen := 0
	for i, j := range jobs {
		var tab []aliasEntry
		if needsAlias(j.Algorithm) {
			e.PrepareTables()
			tab = e.alias
		}
		steppers[i] = newStepper(e.g, j.Algorithm, j.Seed, tab)
		for lo := 0; lo < len(j.Starts); lo += e.cfg.chunkSize {
			units = append(units, unit{job: i, lo: lo, hi: min(lo+e.cfg.chunkSize, len(j.Starts))})
		}
		maxLen = max(maxLen, j.Algorithm.Length)
	}

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	workers := min(e.cfg.workers, max(len(units), 1))
	out := make(chan Chunk, 2*workers)
	var next atomic.Int64
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				u := int(next.Add(1) - 1)
				if u >= len(units) {
					return
				}
				un := units[u]
				c := walkUnit(steppers[un.job], jobs[un.job], un.lo, un.hi)
				select {
				case out <- c:
				case <-ctx.Done():
					return
				}
			}
		}()
	}
	go func() { wg.Wait(); close(out) }()

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
	e.stats = RunStats{Walks: walks, Steps: steps, Wall: wall, Compute: wall,
		MemoryBytes: int64(3*workers*e.cfg.chunkSize) * int64(maxLen+1) * 4,
		TableBytes:  int64(len(e.alias)) * 12, TableBuild: e.tableBuild}
	e.mu.Unlock()
	return nil
}

// walkUnit walks job walks [lo, hi) and returns them as one chunk.
func walkUnit(s *stepper, j Job, lo, hi int) Chunk {
	n := hi - lo
	stride := s.alg.Length + 1
	buf := make([]uint32, n*stride)
	lens := make([]uint32, n)
	if s.lockstep() {
		s.walkLockstep(j.Starts[lo:hi], uint64(lo), buf, lens)
	} else {
		for k := 0; k < n; k++ {
			lens[k] = uint32(s.walk(uint64(lo+k), j.Starts[lo+k], buf[k*stride:(k+1)*stride]))
		}
	}
	// Compact the fixed-stride buffer in place into the chunk layout.
	c := Chunk{Tag: j.Tag, WalkIDs: make([]uint64, n), Offsets: make([]uint32, n+1)}
	pos := uint32(0)
	for k := 0; k < n; k++ {
		c.WalkIDs[k] = uint64(lo + k)
		copy(buf[pos:], buf[k*stride:k*stride+int(lens[k])])
		pos += lens[k]
		c.Offsets[k+1] = pos
	}
	c.Vertices = buf[:pos:pos]
	return c
}

// lockstep reports whether the walks can advance all together, one step at a
// time across the unit: first-order walks with a static sampler. Advancing
// many independent walks in one loop lets the processor overlap their cache
// misses, which is where a random walk spends its time.
func (s *stepper) lockstep() bool {
	return (s.alg.Kind == DeepWalk || s.alg.Kind == PPR) && (s.sampler == SamplerUniform || s.sampler == SamplerAlias)
}

func (s *stepper) walkLockstep(starts []uint32, firstID uint64, buf []uint32, lens []uint32) {
	stride := s.alg.Length + 1
	n := len(starts)
	cur := make([]uint32, n)
	active := make([]int32, 0, n)
	next := make([]int32, n)
	lo := make([]uint64, n)
	deg := make([]uint32, n)
	coin := make([]uint32, n)
	for k, v := range starts {
		buf[k*stride] = v
		lens[k] = 1
		cur[k] = v
		active = append(active, int32(k))
	}
	off, tgt, tab := s.off, s.tgt, s.alias
	ppr := s.alg.Kind == PPR
	// Each step runs in three passes over the active walks. Passes 1 and 3
	// are short loops of independent loads (offsets, then targets), so
	// the processor keeps many cache misses in flight; pass 2 is the Philox
	// arithmetic, which would otherwise fill the reorder window and hide
	// only one or two misses at a time.
	for step := uint32(0); step < uint32(s.alg.Length) && len(active) > 0; step++ {
		lo, deg := lo[:len(active)], deg[:len(active)]
		for i, k := range active {
			v := cur[k]
			lo[i] = off[v]
			deg[i] = uint32(off[v+1] - off[v])
		}
		j := 0
		for i, k := range active {
			d := deg[i]
			if d == 0 {
				continue
			}
			id := firstID + uint64(k)
			x0, x1, x2, _ := philox(uint32(id), uint32(id>>32), step, 0, s.k0, s.k1)
			if ppr {
				if uint64(x0) < s.stopT {
					continue
				}
				x0, x1 = x1, x2
			}
			lo[j] = lo[i] + (uint64(x0)*uint64(d))>>32
			coin[j] = x1
			next[j] = k
			j++
		}
		nx := uint32(0)
		for i, k := range next[:j] {
			if tab == nil {
				nx = tgt[lo[i]]
			} else if e := &tab[lo[i]]; Unit24(coin[i]) < e.prob {
				nx = e.keep
			} else {
				nx = e.alt
			}
			buf[int(k)*stride+int(lens[k])] = nx
			lens[k]++
			cur[k] = nx
		}
		active, next = next[:j], active[:cap(active)]
	}
}
