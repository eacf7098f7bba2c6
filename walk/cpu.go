package walk

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/walkstage/walkstage/graph"
	"github.com/walkstage/walkstage/internal/hugemem"
	"github.com/walkstage/walkstage/internal/sysmem"
)

// CPUOption configures the CPU engine.
type CPUOption func(*cpuConfig)

type cpuConfig struct {
	workers    int
	chunkSize  int
	fusedLimit int64
}

// WithWorkers sets the number of walking goroutines (default GOMAXPROCS).
func WithWorkers(n int) CPUOption { return func(c *cpuConfig) { c.workers = n } }

// WithChunkSize sets how many walks form one emitted chunk and one unit of
// scheduling (default 1024). Walking memory in flight is bounded by about
// 3 * workers * chunkSize * (Length+1) * 4 bytes: one buffer being filled per
// worker and up to two finished chunks per worker queued for emit.
func WithChunkSize(n int) CPUOption { return func(c *cpuConfig) { c.chunkSize = n } }

// WithFusedTableLimit sets the most memory the fused table (fusedEntry, 32
// bytes per edge) may take. When it fits, it is the engine's one alias
// table: weighted DeepWalk and PPR walk on it (about 20% faster than on
// the packed table, 12 bytes per edge) and Node2Vec draws its proposals
// from it. When it does not, the packed table serves them all. 0 turns it
// off. The default, DefaultFusedTableLimit, is a quarter of the memory the
// process may use.
func WithFusedTableLimit(bytes int64) CPUOption { return func(c *cpuConfig) { c.fusedLimit = bytes } }

// DefaultFusedTableLimit is a quarter of the memory this process may use:
// physical memory, or the cgroup's limit where that is lower.
func DefaultFusedTableLimit() int64 { return sysmem.Limit() / 4 }

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

	fusedOnce sync.Once
	fused     []fusedEntry
	// fusedOK: the graph is weighted, fits fusedEntry and the fused table
	// fits the limit.
	fusedOK bool

	fenceOnce sync.Once
	fence     *fenceIndex

	labelOnce sync.Once
	labels    *labelTables

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
	cfg := cpuConfig{workers: runtime.GOMAXPROCS(0), chunkSize: 1024, fusedLimit: DefaultFusedTableLimit()}
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.workers < 1 || cfg.chunkSize < 1 {
		return nil, fmt.Errorf("cpu engine: workers (%d) and chunk size (%d) must be positive", cfg.workers, cfg.chunkSize)
	}
	if cfg.fusedLimit < 0 {
		return nil, fmt.Errorf("cpu engine: fused table limit %d must be 0 (off) or more", cfg.fusedLimit)
	}
	e := &CPU{g: g, cfg: cfg}
	e.fusedOK = g.Weighted() && int64(g.NumEdges())*fusedBytesPerEdge <= cfg.fusedLimit && fusable(g)
	return e, nil
}

func (e *CPU) Name() string { return "cpu" }
func (e *CPU) Close() error { return nil }

// LastRunStats reports the last completed Run.
func (e *CPU) LastRunStats() RunStats {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.stats
}

// PrepareTables builds the alias table of a weighted graph now rather than
// on first use: the fused table when it fits its limit, else the packed one.
func (e *CPU) PrepareTables() {
	if e.fusedOK {
		e.fusedTable()
	} else {
		e.packedTable()
	}
}

// TableBytes is the memory the sampling tables built so far take.
func (e *CPU) TableBytes() int64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.tableBytes()
}

func (e *CPU) tableBytes() int64 {
	return int64(len(e.alias))*int64(unsafe.Sizeof(aliasEntry{})) + int64(len(e.fused))*fusedBytesPerEdge +
		e.fence.bytes() + e.labels.bytes()
}

// fusedFor reports whether a walks on the fused table: every walk that
// would otherwise draw from the packed table.
func (e *CPU) fusedFor(a Algorithm) bool {
	return e.fusedOK && needsAlias(a) && (a.Kind == DeepWalk || a.Kind == PPR || a.Kind == Node2Vec)
}

// recordBuild publishes a table built since t0 (set stores it) and adds its
// build time, under the lock that LastRunStats and TableBytes read under.
func (e *CPU) recordBuild(t0 time.Time, set func()) {
	e.mu.Lock()
	defer e.mu.Unlock()
	set()
	e.tableBuild += time.Since(t0)
}

// fusedTable returns the fused table, built on first use.
func (e *CPU) fusedTable() []fusedEntry {
	e.fusedOnce.Do(func() {
		t0 := time.Now()
		tab := buildFused(e.g)
		e.recordBuild(t0, func() { e.fused = tab })
	})
	return e.fused
}

// packedTable returns the packed alias table, built on first use.
func (e *CPU) packedTable() []aliasEntry {
	e.aliasOnce.Do(func() {
		if !e.g.Weighted() {
			return
		}
		t0 := time.Now()
		tab := buildPacked(e.g)
		e.recordBuild(t0, func() { e.alias = tab })
	})
	return e.alias
}

// fenceStride is the edges per fence: 16 targets are one 64-byte cache line
// (edge arrays start on 64-byte boundaries).
const fenceStride = 16

// fenceIndex is Node2Vec's index for the neighbour test: f1 holds every
// fenceStride-th target of the graph (E/16 words), f2 every fenceStride-th
// entry of f1 (E/256 words, small enough to stay in L2). The test searches
// f2, then one cache line of f1, then reads one line of targets: for a hub
// of 64K neighbours that is two lines from outside L2, where a binary
// search of f1 alone touches about eight lines and one of the targets about
// twelve. (Measured: the second level, the conditional move and the
// prefetch of the f1 line took Node2Vec from 15-16 to 19-20 M steps/s.)
type fenceIndex struct {
	f1, f2 []uint32
}

func (f *fenceIndex) bytes() int64 {
	if f == nil {
		return 0
	}
	return int64(len(f.f1)+len(f.f2)) * 4
}

// everyStride returns every fenceStride-th element of s.
func everyStride(s []uint32) []uint32 {
	f := make([]uint32, (len(s)+fenceStride-1)/fenceStride)
	hugemem.Advise(f)
	for i := range f {
		f[i] = s[i*fenceStride]
	}
	return f
}

// fences returns the fence index, built on first use.
func (e *CPU) fences() *fenceIndex {
	e.fenceOnce.Do(func() {
		f1 := everyStride(e.g.Targets)
		fi := &fenceIndex{f1: f1, f2: everyStride(f1)}
		e.mu.Lock()
		e.fence = fi
		e.mu.Unlock()
	})
	return e.fence
}

// fenceSearch runs the binary searches of the walks in todo over f, one
// probe per walk per pass, for the last entry <= cand[k] in [lo[k],
// lo[k]+hi[k]) (lo[k] itself when there is none): lo[k] is the base and
// hi[k] the width left. The select is written as a conditional move: a
// mispredicted branch would throw away the other walks' loads in flight.
// todo is used as scratch.
func fenceSearch(f []uint32, todo []int32, lo, hi []uint64, cand []uint32) {
	j := 0
	for _, k := range todo {
		if hi[k] > 1 {
			todo[j] = k
			j++
		}
	}
	todo = todo[:j]
	for len(todo) > 0 {
		j := 0
		for _, k := range todo {
			l, w := lo[k], hi[k]
			half := w / 2
			move := uint64(0)
			if f[l+half] <= cand[k] {
				move = half
			}
			lo[k], hi[k] = l+move, w-half
			todo[j] = k
			if w-half > 1 {
				j++
			}
		}
		todo = todo[:j]
	}
}

// PrepareLabelTables builds MetaPath's label tables now rather than on the
// first MetaPath run, and reports whether the graph has them (labels, no
// more than MaxTableLabels of them).
func (e *CPU) PrepareLabelTables() bool {
	if e.g.NumLabels == 0 || !UsesLabelTables(Algorithm{Kind: MetaPath, Schema: []uint8{0}}, e.g) {
		return false
	}
	e.labelTables()
	return true
}

// labelTables returns MetaPath's label tables, built on first use.
func (e *CPU) labelTables() *labelTables {
	e.labelOnce.Do(func() {
		t0 := time.Now()
		lt := buildLabelTables(e.g)
		e.recordBuild(t0, func() { e.labels = lt })
	})
	return e.labels
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
		useFused := e.fusedFor(j.Algorithm)
		if needsAlias(j.Algorithm) && !useFused {
			tab = e.packedTable()
		}
		steppers[i] = newStepper(e.g, j.Algorithm, j.Seed, tab)
		if useFused {
			steppers[i].fused = e.fusedTable()
		}
		if steppers[i].lockstepNode2Vec() {
			steppers[i].fence = e.fences()
		}
		if UsesLabelTables(j.Algorithm, e.g) {
			steppers[i].segs = e.labelTables()
		}
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
			var scratch []uint32
			for ctx.Err() == nil {
				u := int(next.Add(1) - 1)
				if u >= len(units) {
					return
				}
				un := units[u]
				var c Chunk
				c, scratch = walkUnit(steppers[un.job], jobs[un.job], un.lo, un.hi, scratch)
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
		TableBytes:  e.tableBytes(), TableBuild: e.tableBuild}
	e.mu.Unlock()
	return nil
}

// walkUnit walks job walks [lo, hi) and returns them as one chunk. The walks
// are written at a fixed stride into scratch, the worker's buffer, which is
// returned (grown if need be) for the next unit: writing into freshly
// allocated memory cost a page fault per 4 KiB, a sixth of a weighted walk's
// time, where the chunk's exact-size copy is written in order.
func walkUnit(s *stepper, j Job, lo, hi int, scratch []uint32) (Chunk, []uint32) {
	n := hi - lo
	stride := s.alg.Length + 1
	if cap(scratch) < n*stride+n {
		scratch = make([]uint32, n*stride+n)
	}
	buf, lens := scratch[:n*stride], scratch[n*stride:n*stride+n]
	if s.fused != nil && !s.lockstepNode2Vec() {
		s.walkFused(j.Starts[lo:hi], uint64(lo), buf, lens)
	} else if s.lockstep() {
		s.walkLockstep(j.Starts[lo:hi], uint64(lo), buf, lens)
	} else if s.lockstepNode2Vec() {
		s.walkNode2VecLockstep(j.Starts[lo:hi], uint64(lo), buf, lens)
	} else {
		for k := 0; k < n; k++ {
			lens[k] = uint32(s.walk(uint64(lo+k), j.Starts[lo+k], buf[k*stride:(k+1)*stride]))
		}
	}
	c := Chunk{Tag: j.Tag, WalkIDs: make([]uint64, n), Offsets: make([]uint32, n+1)}
	pos := uint32(0)
	for k := 0; k < n; k++ {
		c.WalkIDs[k] = uint64(lo + k)
		pos += lens[k]
		c.Offsets[k+1] = pos
	}
	c.Vertices = make([]uint32, pos)
	for k := 0; k < n; k++ {
		copy(c.Vertices[c.Offsets[k]:], buf[k*stride:k*stride+int(lens[k])])
	}
	return c, scratch
}

// lockstep reports whether the walks can advance all together, one step at a
// time across the unit: first-order walks with a static sampler. Advancing
// many independent walks in one loop lets the processor overlap their cache
// misses, which is where a random walk spends its time.
func (s *stepper) lockstep() bool {
	return (s.alg.Kind == DeepWalk || s.alg.Kind == PPR) && (s.sampler == SamplerUniform || s.sampler == SamplerAlias) ||
		s.segs != nil
}

func (s *stepper) walkLockstep(starts []uint32, firstID uint64, buf []uint32, lens []uint32) {
	stride := s.alg.Length + 1
	n := len(starts)
	cur := make([]uint32, n)
	active := make([]int32, 0, n)
	next := make([]int32, n)
	idx := make([]uint64, n) // by position: the drawn target or alias entry
	coin := make([]uint32, n)
	rows := make([]uint64, n) // by position: the chosen vertex's offsets row
	off, tgt, tab := s.off, s.tgt, s.alias
	// MetaPath reads the segment of the step's label: row v*nl+label of
	// the label tables' offsets; other walks read row v.
	var nl uint64
	schema := s.alg.Schema
	if lt := s.segs; lt != nil {
		off, tgt, tab, nl = lt.off, lt.tgt, s.segAlias(), uint64(lt.numLabels)
	}
	rowOf := func(step uint32) (scale, row uint64) {
		if nl == 0 {
			return 1, 0
		}
		return nl, uint64(schema[int(step)%len(schema)])
	}
	scale, row := rowOf(0)
	for k, v := range starts {
		buf[k*stride] = v
		lens[k] = 1
		cur[k] = v
		active = append(active, int32(k))
		rows[k] = uint64(v)*scale + row
	}
	prefetchRows(unsafe.Pointer(&off[0]), rows[:n], 8, 16)
	var nscale, nrow uint64
	// decide takes the step of position i and computes the offsets row the
	// chosen vertex reads at the next step.
	decide := func(i int) {
		k := next[i]
		var nx uint32
		if tab == nil {
			nx = tgt[idx[i]]
		} else {
			e := &tab[idx[i]]
			nx = e.alt
			if Unit24(coin[i]) < e.prob {
				nx = e.keep
			}
		}
		buf[int(k)*stride+int(lens[k])] = nx
		lens[k]++
		cur[k] = nx
		rows[i] = uint64(nx)*nscale + nrow
	}
	// A step is one loop over blocks of eight walks (see walkFused, whose
	// pipeline this is): read the walks' offsets, prefetched when their
	// vertex was chosen; do their Philox arithmetic (philox8: one AVX2
	// pass where the processor has it, the same words philox gives one by
	// one); issue the prefetches of their targets or alias entries; and
	// decide the steps prefetched pipelineLag positions earlier, issuing
	// the prefetches of the offsets their next step reads.
	var words [4][8]uint32
	for step := uint32(0); step < uint32(s.alg.Length) && len(active) > 0; step++ {
		scale, row = rowOf(step)
		nscale, nrow = rowOf(step + 1)
		j, done := 0, 0
		for base := 0; base < len(active); base += 8 {
			block := active[base:min(base+8, len(active))]
			s.draw8(block, firstID, step, 0, &words)
			first := j
			for l, k := range block {
				r := uint64(cur[k])*scale + row
				a := off[r]
				d := uint32(off[r+1] - a)
				if d == 0 {
					continue
				}
				x0, x1, stop := s.columnWords(&words, l)
				if stop {
					continue
				}
				idx[j] = a + (uint64(x0)*uint64(d))>>32
				coin[j] = x1
				next[j] = k
				j++
			}
			if tab != nil {
				prefetchRows(unsafe.Pointer(&tab[0]), idx[first:j], unsafe.Sizeof(tab[0]), unsafe.Sizeof(tab[0]))
			} else {
				prefetchRows(unsafe.Pointer(&tgt[0]), idx[first:j], 4, 4)
			}
			from := done
			for ; done < j-pipelineLag; done++ {
				decide(done)
			}
			prefetchRows(unsafe.Pointer(&off[0]), rows[from:done], 8, 16)
		}
		for ; done < j; done++ {
			decide(done)
		}
		active, next = next[:j], active[:cap(active)]
	}
}

// lockstepNode2Vec reports whether Node2Vec can use the lockstep walker: the
// rejection sampler (the reservoir samplers scan whole adjacencies and gain
// nothing from it).
func (s *stepper) lockstepNode2Vec() bool {
	return s.alg.Kind == Node2Vec && s.sampler == SamplerRejection
}

// walkNode2VecLockstep is stepper.walk for Node2Vec's rejection sampler,
// advancing every walk of the unit together. A walk alone spends most of a
// step waiting: on its offsets, on the proposal's alias entry, then on each
// probe of the binary search in the previous vertex's adjacency, every load
// depending on the one before. Here each of those loads is one pass over
// all the walks that need it, so the processor has many misses in flight.
// The draws are keyed exactly as in stepper.step, so the walks are the
// same, vertex for vertex (a test holds the two together).
func (s *stepper) walkNode2VecLockstep(starts []uint32, firstID uint64, buf []uint32, lens []uint32) {
	stride := s.alg.Length + 1
	n := len(starts)
	cur := make([]uint32, n)
	prev := make([]uint32, n)
	// [pLo, pHi): the previous vertex's adjacency, kept from the step that
	// left it, so the neighbour test needs no second offsets load.
	pLo, pHi := make([]uint64, n), make([]uint64, n)
	cLo, cHi := make([]uint64, n), make([]uint64, n)
	active := make([]int32, 0, n)
	live := make([]int32, 0, n)
	pend := make([]int32, 0, n)
	retry := make([]int32, 0, n)
	search := make([]int32, 0, n)
	todo := make([]int32, 0, n)
	rows := make([]uint64, 0, n) // addresses to prefetch
	cand := make([]uint32, n)
	accept := make([]uint32, n) // the draw compared with the class threshold
	lo, hi := make([]uint64, n), make([]uint64, n)
	lo2, hi2 := make([]uint64, n), make([]uint64, n) // second-level fence search
	wide := make([]int32, 0, n)
	// On the fused table a candidate's entry also gives its adjacency
	// [nLo, nHi), which becomes cur's at the next step: only the start
	// vertices and the exact scan's picks (reload) read the offsets.
	fz := s.fused
	nLo, nHi := make([]uint64, n), make([]uint64, n)
	reload := make([]bool, n)
	for k, v := range starts {
		buf[k*stride] = v
		lens[k] = 1
		cur[k] = v
		prev[k] = graph.NoVertex
		active = append(active, int32(k))
		reload[k] = true
	}
	off, tgt, tab := s.off, s.tgt, s.alias
	tLow, tHigh := min(s.acceptT[1], s.acceptT[2]), max(s.acceptT[1], s.acceptT[2])
	var words [4][8]uint32
	advance := func(k int32, x uint32) {
		buf[int(k)*stride+int(lens[k])] = x
		lens[k]++
		prev[k], cur[k] = cur[k], x
		pLo[k], pHi[k] = cLo[k], cHi[k]
		cLo[k], cHi[k] = nLo[k], nHi[k]
		live = append(live, k)
	}
	for step := uint32(0); step < uint32(s.alg.Length) && len(active) > 0; step++ {
		pend = pend[:0]
		rows = rows[:0]
		for _, k := range active {
			if fz == nil || reload[k] {
				rows = append(rows, uint64(cur[k]))
			}
		}
		prefetchRows(unsafe.Pointer(&off[0]), rows, 8, 16)
		for _, k := range active {
			if fz == nil || reload[k] {
				v := cur[k]
				cLo[k], cHi[k] = off[v], off[v+1]
				reload[k] = false
			}
			if cLo[k] != cHi[k] {
				pend = append(pend, k)
			}
		}
		live = live[:0]
		for att := uint32(0); att < maxRejections && len(pend) > 0; att++ {
			// Draw a proposal for every pending walk (x0: the column, x1:
			// the alias coin, x2: the acceptance word), eight at a time,
			// prefetch its entry, and resolve it through the alias table
			// or the targets pipelineLag walks later (see walkFused).
			resolve := func(k int32) {
				c := lo[k]
				if fz != nil {
					e := &fz[c]
					if Unit24(cand[k]) < e.prob {
						cand[k], nLo[k], nHi[k] = e.keep, e.keepLo64(), uint64(e.keepDeg)
					} else {
						cand[k], nLo[k], nHi[k] = e.alt, e.altLo64(), uint64(e.altDeg)
					}
					nHi[k] += nLo[k]
				} else if tab == nil {
					cand[k] = tgt[c]
				} else if e := &tab[c]; Unit24(cand[k]) < e.prob {
					cand[k] = e.keep
				} else {
					cand[k] = e.alt
				}
			}
			done := 0
			for base := 0; base < len(pend); base += 8 {
				group := pend[base:min(base+8, len(pend))]
				s.draw8(group, firstID, step, att, &words)
				rows = rows[:0]
				for l, k := range group {
					lo[k] = cLo[k] + uint64(Index(words[0][l], uint32(cHi[k]-cLo[k])))
					cand[k], accept[k] = words[1][l], words[2][l]
					rows = append(rows, lo[k])
				}
				switch {
				case fz != nil:
					prefetchRows(unsafe.Pointer(&fz[0]), rows, unsafe.Sizeof(fz[0]), unsafe.Sizeof(fz[0]))
				case tab != nil:
					prefetchRows(unsafe.Pointer(&tab[0]), rows, unsafe.Sizeof(tab[0]), unsafe.Sizeof(tab[0]))
				default:
					prefetchRows(unsafe.Pointer(&tgt[0]), rows, 4, 4)
				}
				for ; done < base+len(group)-pipelineLag; done++ {
					resolve(pend[done])
				}
			}
			for ; done < len(pend); done++ {
				resolve(pend[done])
			}
			// Decide what can be decided without the neighbour test: first
			// steps take the proposal, a return compares with its own
			// threshold, and for the rest a word below both the neighbour
			// and the outward threshold accepts (above both rejects)
			// whichever class the candidate is in. Only the walks in
			// between search prev's adjacency (about half for p=2, q=0.5).
			// The decision is the one stepper.step makes, just made sooner.
			search = search[:0]
			retry = retry[:0]
			for _, k := range pend {
				x, w := cand[k], uint64(accept[k])
				switch {
				case prev[k] == graph.NoVertex:
					advance(k, x)
				case x == prev[k]:
					if w < s.acceptT[0] {
						advance(k, x)
					} else {
						retry = append(retry, k)
					}
				case w < tLow:
					advance(k, x)
				case w >= tHigh:
					retry = append(retry, k)
				default:
					// Fences inside prev's adjacency [a, b): i0 .. i1. With
					// none, the adjacency is under a cache line: scan it.
					a, b := pLo[k], pHi[k]
					i0, i1 := (a+fenceStride-1)/fenceStride, (b-1)/fenceStride
					if i0 > i1 {
						lo[k], hi[k] = a, 0 // width 0: no fence, the line is [a, b)
					} else {
						lo[k], hi[k] = i0, i1-i0+1 // base and width
					}
					search = append(search, k)
				}
			}
			// Find the last fence <= the candidate. Where the fences span
			// more than one line, the second level narrows them to the
			// line that holds it (or to the fences before the first
			// second-level one, when the candidate precedes it).
			fence, f2 := s.fence.f1, s.fence.f2
			wide = wide[:0]
			for _, k := range search {
				if hi[k] > fenceStride {
					i0, i1 := lo[k], lo[k]+hi[k]-1
					j0, j1 := (i0+fenceStride-1)/fenceStride, i1/fenceStride
					lo2[k], hi2[k] = j0, j1-j0+1
					wide = append(wide, k)
				}
			}
			fenceSearch(f2, append(todo[:0], wide...), lo2, hi2, cand)
			for _, k := range wide {
				j, i0, end := lo2[k], lo[k], lo[k]+hi[k]
				if f2[j] <= cand[k] {
					lo[k], hi[k] = j*fenceStride, min(end, j*fenceStride+fenceStride)-j*fenceStride
				} else {
					hi[k] = max(1, j*fenceStride-i0)
				}
			}
			rows = rows[:0]
			for _, k := range search {
				if hi[k] > 1 {
					rows = append(rows, lo[k])
				}
			}
			if len(rows) > 0 {
				prefetchRows(unsafe.Pointer(&fence[0]), rows, 4, fenceStride*4)
			}
			fenceSearch(fence, append(todo[:0], search...), lo, hi, cand)
			// The candidate can only be in the cache line that the found
			// fence starts, or before the first fence. Scan it, then
			// accept or try again with the next draw.
			rows = rows[:0]
			for _, k := range search {
				i, a, b := lo[k], pLo[k], pHi[k]
				if hi[k] == 0 {
					lo[k], hi[k] = a, b
				} else if fence[i] <= cand[k] {
					lo[k], hi[k] = i*fenceStride, min(b, i*fenceStride+fenceStride)
				} else {
					lo[k], hi[k] = a, min(b, i*fenceStride)
				}
				rows = append(rows, lo[k])
			}
			if len(rows) > 0 {
				prefetchRows(unsafe.Pointer(&tgt[0]), rows, 4, 64)
			}
			for _, k := range search {
				x, c := cand[k], 2
				for _, t := range tgt[lo[k]:hi[k]] {
					if t == x {
						c = 1
					}
				}
				if uint64(accept[k]) < s.acceptT[c] {
					advance(k, x)
				} else {
					retry = append(retry, k)
				}
			}
			pend, retry = retry, pend[:0]
		}
		// Walks rejected maxRejections times: the exact scan, as in step.
		for _, k := range pend {
			id := firstID + uint64(k)
			x, ok := s.scan(id, step, fallbackDraw, cLo[k], cHi[k], s.node2vecBias(prev[k]))
			if ok {
				reload[k] = true
				advance(k, x)
			}
		}
		// live is in acceptance order, not walk order: harmless, since every
		// draw is keyed by walk id, not by position.
		active, live = live, active[:0]
	}
}
