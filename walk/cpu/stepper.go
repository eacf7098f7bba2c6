package cpu

import (
	"slices"
	"sync"

	"github.com/walkstage/walkstage/graph"
	"github.com/walkstage/walkstage/walk"
)

// This file holds the CPU engine's steppers, the per-step choice of the
// next vertex for each algorithm. They follow the draw contract of
// walk/draws.go word for word, as the GPU kernels (kernels/samplers.cuh) do.

// stepper holds what one algorithm needs to take steps on one graph.
type stepper struct {
	off   []uint64
	tgt   []uint32
	w     []float32
	lab   []uint8
	alias []aliasEntry
	// fused, when set, serves DeepWalk and PPR (walkRing),
	// weighted or uniform (a uniform step takes the entry's keep), and
	// Node2Vec's proposals (walkNode2VecLockstep), in place of alias.
	fused []fusedEntry
	fence *fenceIndex // Node2Vec's neighbour-test index, for its lockstep walker
	// goRounds and vecRounds choose the ring's Go or vector rounds where
	// the processor can run both, whatever its default (tests compare them).
	goRounds, vecRounds bool
	// MetaPath on label tables (UsesLabelTables): segments, their targets
	// and, for weighted walks, their alias entries.
	segs *labelTables
	// segSums are the segments' weight sums (labelWeightSums), for a
	// weighted MetaPath job on a live graph's delta.
	segSums []float64
	// tmp holds a Temporal walk's edge times and window weights.
	tmp *temporal
	// ov is the live graph snapshot a job walks on, when its delta is not
	// empty (overlay.go).
	ov walk.Overlay
	// ovIdx is ov's flat index: set, the job walks on the ring
	// (walkRingOverlay), else one unit at a time (walkOverlayUnit).
	ovIdx *walk.DeltaIndex
	// tcache keeps a Temporal job's vertex lists on a delta
	// (overlaytemporal.go).
	tcache *overlayTemporalCache

	alg      walk.Algorithm
	sampler  walk.StepperKind
	weighted bool
	k0, k1   uint32
	stopT    uint64
	// zprsPool recycles ZPRS's per-step scratch across the workers.
	zprsPool *sync.Pool
	// Node2Vec acceptance thresholds for f/fmax: [return, neighbour, outward].
	acceptT [3]uint64
	biasN2V [3]float64
}

func newStepper(g *graph.Graph, alg walk.Algorithm, seed uint64, alias []aliasEntry) *stepper {
	s := &stepper{off: g.Offsets, tgt: g.Targets, w: g.Weights, lab: g.Labels, alias: alias,
		alg: alg, sampler: alg.ResolvedStepper(), weighted: alg.Weighted,
		k0: uint32(seed), k1: uint32(seed >> 32), zprsPool: new(sync.Pool)}
	if !s.weighted {
		s.w = nil
	}
	if alg.Kind == walk.PPR {
		s.stopT = walk.Threshold(alg.StopProb)
	}
	if alg.Kind == walk.Node2Vec || alg.Kind == walk.Temporal && alg.P != 0 {
		s.biasN2V, s.acceptT = walk.Node2VecFactors(alg)
	}
	return s
}

// needsAlias reports whether the stepper draws from the packed alias table.
func needsAlias(a walk.Algorithm) bool {
	sm := a.ResolvedStepper()
	return a.Weighted && (sm == walk.StepperAlias || sm == walk.StepperRejection)
}

func (s *stepper) draw(id uint64, step, d uint32) (uint32, uint32, uint32, uint32) {
	return walk.Philox(uint32(id), uint32(id>>32), step, d, s.k0, s.k1)
}

// static picks an edge of v's adjacency [a, b) from the static bias (uniform
// or alias) with words x (column) and y (coin).
func (s *stepper) static(a, b uint64, x, y uint32) uint32 {
	return pickStatic(s.tgt, s.alias, a, b, x, y)
}

// pickStatic draws from [a, b) of tgt uniformly, or through the alias
// entries when tab is not nil (the GPU's pick_static).
func pickStatic(tgt []uint32, tab []aliasEntry, a, b uint64, x, y uint32) uint32 {
	col := uint64(walk.Bounded(x, uint32(b-a)))
	if tab == nil {
		return tgt[a+col]
	}
	e := &tab[a+col]
	if walk.Unit24(y) < e.prob {
		return e.keep
	}
	return e.alt
}

// segAlias is the label tables' alias entries for weighted MetaPath, nil
// (uniform inside the segment) otherwise.
func (s *stepper) segAlias() []aliasEntry {
	if s.alg.Weighted {
		return s.segs.alias
	}
	return nil
}

// walk writes the walk of id from start into out (len >= Length+1) and
// returns the number of vertices written.
func (s *stepper) walk(id uint64, start uint32, out []uint32) int {
	out[0] = start
	prev, cur := uint32(graph.NoVertex), start
	n := 1
	for step := uint32(0); step < uint32(s.alg.Length); step++ {
		next, ok := s.step(id, step, prev, cur)
		if !ok {
			break
		}
		out[n] = next
		n++
		prev, cur = cur, next
	}
	return n
}

// step takes one step from cur; ok is false when the walk ends here.
func (s *stepper) step(id uint64, step, prev, cur uint32) (next uint32, ok bool) {
	a, b := s.off[cur], s.off[cur+1]
	if a == b {
		return 0, false
	}
	switch s.alg.Kind {
	case walk.DeepWalk:
		if s.sampler == walk.StepperZPRS || s.sampler == walk.StepperDPRS {
			return s.reservoir(id, step, a, b, s.weightBias())
		}
		x0, x1, _, _ := s.draw(id, step, 0)
		return s.static(a, b, x0, x1), true
	case walk.PPR:
		x0, x1, x2, _ := s.draw(id, step, 0)
		if uint64(x0) < s.stopT {
			return 0, false
		}
		if s.sampler == walk.StepperZPRS || s.sampler == walk.StepperDPRS {
			return s.reservoir(id, step, a, b, s.weightBias())
		}
		return s.static(a, b, x1, x2), true
	case walk.Node2Vec:
		if s.sampler == walk.StepperZPRS || s.sampler == walk.StepperDPRS {
			return s.reservoir(id, step, a, b, s.node2vecBias(prev))
		}
		if prev == graph.NoVertex {
			x0, x1, _, _ := s.draw(id, step, 0)
			return s.static(a, b, x0, x1), true
		}
		for att := uint32(0); att < walk.MaxRejections; att++ {
			x0, x1, x2, _ := s.draw(id, step, att)
			x := s.static(a, b, x0, x1)
			if s.n2vAccepts(prev, x, x2, false) {
				return x, true
			}
		}
		return s.scan(id, step, walk.FallbackDraw, a, b, s.node2vecBias(prev))
	case walk.MetaPath:
		want := s.alg.Schema[int(step)%len(s.alg.Schema)]
		if lt := s.segs; lt != nil {
			i := uint64(cur)*uint64(lt.numLabels) + uint64(want)
			a, b := lt.off[i], lt.off[i+1]
			if a == b {
				return 0, false
			}
			x0, x1, _, _ := s.draw(id, step, 0)
			return pickStatic(lt.tgt, s.segAlias(), a, b, x0, x1), true
		}
		lab, w := s.lab, s.w
		bias := func(e uint64) float64 {
			if lab[e] != want {
				return 0
			}
			if w == nil {
				return 1
			}
			return float64(w[e])
		}
		return s.reservoir(id, step, a, b, bias)
	}
	return 0, false
}

// n2vClass classifies candidate x against the previous vertex t: 0 return,
// 1 neighbour of t, 2 outward.
func (s *stepper) n2vClass(t, x uint32) int {
	if x == t {
		return 0
	}
	if hasEdge(s.off, s.tgt, t, x) {
		return 1
	}
	return 2
}

func hasEdge(off []uint64, tgt []uint32, u, v uint32) bool {
	lo, hi := off[u], off[u+1]
	for lo < hi {
		m := lo + (hi-lo)/2
		if tgt[m] < v {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo < off[u+1] && tgt[lo] == v
}

func (s *stepper) weightBias() func(e uint64) float64 {
	if w := s.w; w != nil {
		return func(e uint64) float64 { return float64(w[e]) }
	}
	return func(uint64) float64 { return 1 }
}

func (s *stepper) node2vecBias(prev uint32) func(e uint64) float64 {
	base := s.weightBias()
	if prev == graph.NoVertex {
		return base
	}
	return func(e uint64) float64 { return base(e) * s.biasN2V[s.n2vClass(prev, s.tgt[e])] }
}

// reservoir runs the forced or default reservoir sampler.
func (s *stepper) reservoir(id uint64, step uint32, a, b uint64, bias func(e uint64) float64) (uint32, bool) {
	var i int
	if s.sampler == walk.StepperDPRS {
		r := &elementWords{s: s, id: id, step: step, base: walk.ReservoirDraw}
		i = dprs(int(b-a), walk.Lanes, func(i int) float64 { return bias(a + uint64(i)) }, r.word)
	} else {
		// ZPRS visits the elements lane by lane (i, i+32, ...) and asks
		// for each bias twice, so elementWords' one-draw cache would miss
		// every time: compute the biases and words once, in element order
		// (a Philox call per four elements instead of one per element).
		n := int(b - a)
		sc, _ := s.zprsPool.Get().(*zprsScratch)
		if sc == nil {
			sc = new(zprsScratch)
		}
		sc.bias, sc.words = slices.Grow(sc.bias[:0], n)[:n], slices.Grow(sc.words[:0], n+3)[:n+3]
		for j := range n {
			sc.bias[j] = bias(a + uint64(j))
		}
		for d := 0; d < n; d += 4 {
			w0, w1, w2, w3 := s.draw(id, step, walk.ReservoirDraw+uint32(d/4))
			sc.words[d], sc.words[d+1], sc.words[d+2], sc.words[d+3] = w0, w1, w2, w3
		}
		bv, wv := sc.bias, sc.words
		i = zprs(n, walk.Lanes, func(i int) float64 { return bv[i] }, func(i int) uint32 { return wv[i] })
		s.zprsPool.Put(sc)
	}
	if i < 0 {
		return 0, false
	}
	return s.tgt[a+uint64(i)], true
}

// zprsScratch holds one ZPRS step's biases and words (reservoir).
type zprsScratch struct {
	bias  []float64
	words []uint32
}

// scan is the exact sequential fallback (one-lane reservoir).
func (s *stepper) scan(id uint64, step, base uint32, a, b uint64, bias func(e uint64) float64) (uint32, bool) {
	r := &elementWords{s: s, id: id, step: step, base: base}
	i := zprs(int(b-a), 1, func(i int) float64 { return bias(a + uint64(i)) }, r.word)
	if i < 0 {
		return 0, false
	}
	return s.tgt[a+uint64(i)], true
}

// elementWords hands out word i%4 of draw base+i/4, caching one draw.
type elementWords struct {
	s      *stepper
	id     uint64
	step   uint32
	base   uint32
	cached uint32
	valid  bool
	w      [4]uint32
}

func (r *elementWords) word(i int) uint32 {
	d := r.base + uint32(i/4)
	if !r.valid || r.cached != d {
		r.w[0], r.w[1], r.w[2], r.w[3] = r.s.draw(r.id, r.step, d)
		r.cached, r.valid = d, true
	}
	return r.w[i%4]
}

// zprs is the zig-zag parallel reservoir sampler of FlowWalker (Algorithm 4)
// with k lanes, run lane after lane: lane j owns elements i ≡ j (mod k).
// A first pass sums each lane's bias; an exclusive prefix over lanes gives
// each lane the weight that precedes it in the zig-zag order; a second pass
// lets each lane keep element i with probability bias(i)/(running sum), and
// the highest lane that kept anything wins. It returns -1 when every bias is
// zero. word(i) is element i's uniform 32-bit word.
func zprs(n, k int, bias func(i int) float64, word func(i int) uint32) int {
	if k > n {
		k = max(n, 1)
	}
	// The lanes run interleaved, in element order, each with its own
	// running sum and last kept element: the same additions in the same
	// order per lane as running them one after the other, so the same
	// result to the bit, but the 32 lanes' dependency chains overlap and
	// the elements are read in order.
	var sumsA, runA [walk.Lanes]float64
	var keptA [walk.Lanes]int
	var sums, run []float64
	var kept []int
	if k <= walk.Lanes {
		sums, run, kept = sumsA[:k], runA[:k], keptA[:k]
	} else {
		sums, run, kept = make([]float64, k), make([]float64, k), make([]int, k)
	}
	for i, j := 0, 0; i < n; i++ {
		sums[j] += bias(i)
		if j++; j == k {
			j = 0
		}
	}
	var before float64
	for j := range k {
		run[j], kept[j] = before, -1
		before += sums[j]
	}
	for i, j := 0, 0; i < n; i++ {
		if w := bias(i); w > 0 {
			run[j] += w
			if float64(word(i))*(1.0/(1<<32))*run[j] < w {
				kept[j] = i
			}
		}
		if j++; j == k {
			j = 0
		}
	}
	// The highest lane that kept anything wins.
	for j := k - 1; j >= 0; j-- {
		if kept[j] >= 0 {
			return kept[j]
		}
	}
	return -1
}

// dprs is FlowWalker's direct parallel reservoir sampler (Algorithm 3): k
// consecutive elements per iteration; element i is kept with probability
// bias(i) / (inclusive prefix within the iteration + weight of earlier
// iterations), and the largest kept index of an iteration replaces the
// selection. Returns -1 when every bias is zero.
func dprs(n, k int, bias func(i int) float64, word func(i int) uint32) int {
	pick := -1
	var wb float64
	for i0 := 0; i0 < n; i0 += k {
		var prefix float64
		c := -1
		for i := i0; i < min(i0+k, n); i++ {
			w := bias(i)
			prefix += w
			if w > 0 && float64(word(i))*(1.0/(1<<32))*(prefix+wb) < w {
				c = i
			}
		}
		if c >= 0 {
			pick = c
		}
		wb += prefix
	}
	return pick
}
