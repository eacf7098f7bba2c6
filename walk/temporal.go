package walk

import (
	"fmt"
	"math"
	"strings"
	"time"
	"unsafe"

	"github.com/walkstage/walkstage/graph"
)

// Temporal walks (issue 38; CTDNE, Nguyen et al., "Continuous-Time Dynamic
// Network Embeddings", WWW'18 companion) run on a timed graph, which holds
// each vertex's edge times in time order (Graph.Times) with the permutation
// to its target-sorted edges (Graph.ByTime): position k of vertex v's time
// order is edge Offsets[v] + ByTime[Offsets[v]+k], ties in time in target
// order. A forward walk takes, at each step, an edge whose time is at or
// after the time of the edge it arrived by, and, with a maximum gap, at most that much later; a backward walk
// takes edges at or before it (and at most the gap earlier), still along
// out-edges: a CSR of out-edges has no in-edges to walk, so "backward" is
// time running backward, not the edge direction reversed (reverse the
// edges at import for that). The first step's bound is the start time when
// one is given, otherwise none: any edge of the start vertex.
//
// The edges a step may take are its window: a contiguous range [lo, hi) of
// positions of the vertex's time order (indices into Times) found by binary
// search. The rank p of position k counts from the window's near end, the
// end closest in time to the bound: p = k-lo forward, hi-1-k backward. The
// time bias weighs position k of a window of n by
//
//	uniform      1
//	linear       n - p                        (CTDNE's linear: the nearest in time weighs most)
//	exponential  exp(-|t(k) - t(near)| / s)   (t(near): the time at the window's near end)
//
// times its edge's weight when the walk is weighted. Ties in time are
// ranked by target, as the time order has them. Measuring the exponential
// from the window's nearest edge rather than from the bound keeps the
// weights in (0, 1] and the nearest edge at 1, so no window underflows to
// all zeros.
//
// The draw of step k of walk id uses Philox draws (seed, id, k, d), words
// x0..x3 (index is Bounded, the multiply-high map to [0, n); unit53(x, y)
// = (x<<21 | y>>11) * 2^-53):
//
//	uniform, unweighted   d=0: k = lo + index(x0, n)
//	linear, unweighted    d=0: i = index(x0, n+1), j = index(x1, n), j++ if j >= i;
//	                      p = min(i, j): the smaller of a uniform pair of distinct
//	                      values of 0..n, which is p with probability (n-p)/(n(n+1)/2)
//	uniform, weighted     d=0: r = cumw[lo-1] + unit53(x0, x1) * W (cumw[lo-1] = 0
//	                      at the vertex's first position), W the window's weight;
//	                      k = the first position in [lo, hi) with cumw[k] > r, else
//	                      hi-1 (cumw: per-vertex inclusive prefix sums, in float64,
//	                      of the weights in time order)
//	linear, weighted      rejection: attempt a < maxRejections uses d=a: k drawn as
//	                      "uniform, weighted" from (x0, x1), accepted when
//	                      uint64(x2) * n < (n-p) << 32
//	exponential           d=0: the window's cell sums S (temporalexp.go: per vertex,
//	                      per time cell of width G = expCell(s) = int64(256 s) in
//	                      [1, 2^63-1] by u(t) = uint64(t) ^ 2^63, the sums of
//	                      w * exp(-o/s) over the cell's positions from k to its
//	                      end forward, w * exp(-(G-1-o)/s) from its start to k
//	                      backward, o = u(t(k)) mod G, w the weight or 1).
//	                      The window's parts by cell from the near end, at most
//	                      maxExpCells, each weighing (its sums' difference) times
//	                      exp(±(near end's offset to the cell)/s), stopping at a
//	                      factor of 0; with one part no exp is computed. The part:
//	                      the first with positive mass whose cumulative mass exceeds
//	                      unit53(x2, x3) * total (else the last with mass); in it
//	                      r = base + unit53(x0, x1) * (part's sums), k = the last
//	                      position with S[k] > r forward, the first with S[k] > r
//	                      backward. A window whose sums are 0 goes to the fallback.
//	                      Exact up to the float64 rounding of the sums (as the
//	                      weighted draws are up to cumw's): a difference loses at
//	                      most about (edges within ~37 scales of the near end) *
//	                      2^-53 of the window's mass
//
// Temporal Node2Vec (P and Q set), from the second step on: ZPRS (32 lanes,
// zprs) over the window in time order, element i = position lo+i with bias
// temporalBias times the p/q factor of its target against the previous
// vertex, its word being word i%4 of draw reservoirDraw + i/4 (the zprs
// stepper's contract); its first step is the plain temporal draw above.
//
// exp is detExp (detexp.go), which the GPU engine computes to the same
// bits, and no product here is fused with a sum into an FMA (float64()
// around it), so both engines make every comparison alike.
//
// After maxRejections failed attempts (linear weighted), or for an
// exponential window whose sums are 0 (every weight zero, or rounded
// away), the exact one-lane reservoir scan over the window in time order
// (zprs with k = 1, the bias of temporalBias) with word i%4 of draw
// fallbackDraw+i/4 decides, as for Node2Vec: the bounded loop stays exact.
// Each draw is one binary search for the window plus O(1) work (uniform
// and linear, unweighted), a binary search in the prefix sums (weighted),
// or one galloping search in the cell sums from the window's near end,
// where its mass is (exponential; a window over several cells, rare with
// cells of 256 scales, adds a galloping search and an exp per cell), which
// is what a GPU thread can do; linear weighted has no acceptance bound
// (the mean of (n-p)/n under the weights).

// TimeBias weighs the edges of a temporal step's window.
type TimeBias uint8

const (
	TimeUniform     TimeBias = iota // every edge of the window alike
	TimeLinear                      // by rank from the window's near end: n, n-1, ..., 1
	TimeExponential                 // exp(-(time distance to the window's near end) / scale)
)

var timeBiasNames = map[TimeBias]string{TimeUniform: "uniform", TimeLinear: "linear", TimeExponential: "exponential"}

func (b TimeBias) String() string {
	if s, ok := timeBiasNames[b]; ok {
		return s
	}
	return fmt.Sprintf("time_bias(%d)", uint8(b))
}

// ParseTimeBias accepts the names String returns (case-insensitive).
func ParseTimeBias(s string) (TimeBias, error) {
	for k, n := range timeBiasNames {
		if strings.EqualFold(s, n) {
			return k, nil
		}
	}
	return 0, fmt.Errorf("%w: unknown time_bias %q (want uniform, linear or exponential)", ErrInvalidAlgorithm, s)
}

// TimeParams are a Temporal walk's parameters. Times are in the graph's
// time unit (whatever the edge list's time column held, e.g. Unix ms).
type TimeParams struct {
	Bias TimeBias
	// Scale is the exponential bias's decay scale: an edge Scale later
	// than the window's nearest weighs 1/e of it. Required (> 0) for
	// exponential, zero otherwise.
	Scale float64
	// Start bounds the first step when HasStart: forward walks take an
	// edge at or after it, backward walks one at or before it. Without
	// it the first step may take any edge of the start vertex.
	Start    int64
	HasStart bool
	// MaxGap, when HasMaxGap, bounds how far in time a step's edge may be
	// from the previous step's (or from Start, for the first step); >= 0.
	MaxGap    int64
	HasMaxGap bool
	// Backward walks time backward (non-increasing edge times) along
	// out-edges.
	Backward bool
}

func (t TimeParams) validate() error {
	if _, ok := timeBiasNames[t.Bias]; !ok {
		return invalid("unknown time_bias %d", t.Bias)
	}
	if t.Bias == TimeExponential {
		if !(t.Scale > 0) || math.IsInf(t.Scale, 0) {
			return invalid("exponential time_bias needs a time_scale > 0 (in the graph's time unit), got %v", t.Scale)
		}
	} else if t.Scale != 0 {
		return invalid("time_scale is only for the exponential time_bias, not %s", t.Bias)
	}
	if t.HasMaxGap && t.MaxGap < 0 {
		return invalid("max_time_gap %d must be 0 or more", t.MaxGap)
	}
	if !t.HasMaxGap && t.MaxGap != 0 || !t.HasStart && t.Start != 0 {
		return invalid("max_time_gap or start_time set without its flag")
	}
	return nil
}

// String renders the parameters for Algorithm.String.
func (t TimeParams) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "time_bias=%s", t.Bias)
	if t.Bias == TimeExponential {
		fmt.Fprintf(&b, " time_scale=%g", t.Scale)
	}
	if t.HasStart {
		fmt.Fprintf(&b, " start_time=%d", t.Start)
	}
	if t.HasMaxGap {
		fmt.Fprintf(&b, " max_time_gap=%d", t.MaxGap)
	}
	if t.Backward {
		b.WriteString(" direction=backward")
	}
	return b.String()
}

// Bound is the time a walk's first step is bounded by: Start when given,
// else the earliest (forward) or latest (backward) int64. It is the first
// entry of a walk's times (Chunk.Times).
func (t TimeParams) Bound() int64 {
	switch {
	case t.HasStart:
		return t.Start
	case t.Backward:
		return math.MaxInt64
	}
	return math.MinInt64
}

// temporal is what a stepper needs for Temporal walks.
type temporal struct {
	times  []int64  // Graph.Times: per vertex, in time order
	coarse []int64  // coarseTimes(times), for walkTemporalGroup's searches
	byTime []uint32 // Graph.ByTime: time order position -> local edge index
	// cumw[Offsets[v]+k] is the sum of the weights of positions 0..k of
	// v's time order (weighted walks only): a window's weight is a
	// difference of two entries, and its weighted draw a binary search.
	cumw []float64
	// rejections bounds the rejection loop (maxRejections; tests set 0
	// to check the exact fallback on its own).
	rejections uint32
	// expSums are the exponential bias's per-edge cell sums for this
	// walk's scale, direction and weighting (temporalexp.go), expCell the
	// cells' width G.
	expSums []float64
	expCell uint64
}

// coarseIndex builds the coarse time index once per engine (a quarter of
// a byte an edge).
func (e *CPU) coarseIndex() []int64 {
	e.coarseOnce.Do(func() {
		t0 := time.Now()
		c := coarseTimes(e.g.Times)
		e.recordBuild(t0, func() { e.coarse = c })
	})
	return e.coarse
}

// windowWeights builds the per-vertex prefix sums of the weights once per
// engine (8 bytes an edge).
func (e *CPU) windowWeights() []float64 {
	e.cumwOnce.Do(func() {
		g := e.g
		if !g.Weighted() {
			return
		}
		t0 := time.Now()
		c := make([]float64, g.NumEdges())
		for v := 0; v < g.NumVertices(); v++ {
			var sum float64
			a := g.Offsets[v]
			for k := a; k < g.Offsets[v+1]; k++ {
				sum += float64(g.Weights[a+uint64(g.ByTime[k])])
				c[k] = sum
			}
		}
		e.recordBuild(t0, func() { e.cumw = c })
	})
	return e.cumw
}

// window returns the positions [lo, hi) of the time order [a, b) that a
// step bounded by time t may take; an unbounded step (the first, without a
// start time) may take them all.
func (s *stepper) window(a, b uint64, t int64, bounded bool) (lo, hi uint64) {
	if !bounded {
		return a, b
	}
	return s.windowIn(a, b, t, a, b)
}

// windowIn is window for a bounded step whose first search (forward: the
// first time at or after t; backward: the first after t) is known to end
// in [fa, fb] (coarseRange).
func (s *stepper) windowIn(a, b uint64, t int64, fa, fb uint64) (lo, hi uint64) {
	tp := &s.alg.Time
	lo, hi = a, b
	if !tp.Backward {
		lo = lowerTime(s.tmp.times, fa, fb, t)
		if tp.HasMaxGap {
			hi = upperTime(s.tmp.times, lo, b, satAdd(t, tp.MaxGap))
		}
	} else {
		hi = upperTime(s.tmp.times, fa, fb, t)
		if tp.HasMaxGap {
			lo = lowerTime(s.tmp.times, a, hi, satAdd(t, -tp.MaxGap))
		}
	}
	return lo, hi
}

// coarseSpacing is the spacing of the coarse time index: coarse[j] =
// times[j*coarseSpacing] by global position (the GPU's kCoarse). At an
// eighth of times' bytes it stays in the caches where times cannot.
const coarseSpacing = 32

// coarseTimes builds the coarse time index of times.
func coarseTimes(times []int64) []int64 {
	c := make([]int64, (len(times)+coarseSpacing-1)/coarseSpacing)
	for j := range c {
		c[j] = times[j*coarseSpacing]
	}
	return c
}

// coarseRange narrows the search in [a, b) for the first time at or after
// t (upper: after t) to [fa, fb] by a binary search over the coarse
// entries inside [a, b): the answer is a position of [fa, fb), or fb, and
// fb-fa < coarseSpacing where the range had more than two entries' worth.
func coarseRange(coarse []int64, a, b uint64, t int64, upper bool) (fa, fb uint64) {
	fa, fb = a, b
	if b-a <= 2*coarseSpacing {
		return fa, fb
	}
	j0, j1 := (a+coarseSpacing-1)/coarseSpacing, (b+coarseSpacing-1)/coarseSpacing
	l, h := j0, j1
	for l < h {
		m := l + (h-l)/2
		if c := coarse[m]; c < t || upper && c == t {
			l = m + 1
		} else {
			h = m
		}
	}
	if l < j1 {
		fb = l * coarseSpacing // that position is not before t
	}
	if l > j0 {
		fa = (l-1)*coarseSpacing + 1 // the entry before it is
	}
	return fa, fb
}

// satAdd is t+d clamped to the int64 range.
func satAdd(t, d int64) int64 {
	r := t + d
	if d > 0 && r < t {
		return math.MaxInt64
	}
	if d < 0 && r > t {
		return math.MinInt64
	}
	return r
}

// lowerTime is the first k in [a, b) with times[k] >= t, or b.
func lowerTime(times []int64, a, b uint64, t int64) uint64 {
	for a < b {
		m := a + (b-a)/2
		if times[m] < t {
			a = m + 1
		} else {
			b = m
		}
	}
	return a
}

// upperTime is the first k in [a, b) with times[k] > t, or b.
func upperTime(times []int64, a, b uint64, t int64) uint64 {
	for a < b {
		m := a + (b-a)/2
		if times[m] <= t {
			a = m + 1
		} else {
			b = m
		}
	}
	return a
}

// walkTemporal writes the walk of id from start into out and the time of
// the edge that reached each vertex into times (when not nil; times[0] is
// the bound, TimeParams.Bound), and returns the number of vertices.
func (s *stepper) walkTemporal(id uint64, start uint32, out []uint32, times []int64) int {
	t := s.alg.Time.Bound()
	out[0] = start
	if times != nil {
		times[0] = t
	}
	prev, cur, n := uint32(graph.NoVertex), start, 1
	for step := uint32(0); step < uint32(s.alg.Length); step++ {
		var k uint64
		var ok bool
		if s.alg.P != 0 && prev != graph.NoVertex {
			k, ok = s.temporalNode2VecStep(id, step, prev, cur, t)
		} else {
			k, ok = s.temporalStep(id, step, cur, t, step > 0 || s.alg.Time.HasStart)
		}
		if !ok {
			break
		}
		prev, cur, t = cur, s.tgt[s.off[cur]+uint64(s.tmp.byTime[k])], s.tmp.times[k]
		out[n] = cur
		if times != nil {
			times[n] = t
		}
		n++
	}
	return n
}

// temporalStep picks the edge of step from cur, bounded by time t (when
// bounded), as its position in cur's time order; ok is false when the
// window is empty (the walk ends).
func (s *stepper) temporalStep(id uint64, step, cur uint32, t int64, bounded bool) (k uint64, ok bool) {
	a, b := s.off[cur], s.off[cur+1]
	lo, hi := s.window(a, b, t, bounded)
	return s.temporalDraw(id, step, a, b, lo, hi)
}

// temporalDraw is temporalStep's draw on window [lo, hi) of the time order
// [a, b): the position it picks, ok false when the window is empty.
func (s *stepper) temporalDraw(id uint64, step uint32, a, b, lo, hi uint64) (k uint64, ok bool) {
	if lo == hi {
		return 0, false
	}
	n := hi - lo
	tp := &s.alg.Time
	if tp.Bias == TimeUniform || tp.Bias == TimeLinear && !s.weighted {
		x0, x1, _, _ := s.draw(id, step, 0)
		switch {
		case tp.Bias == TimeLinear:
			return s.near(lo, hi, linearPos(x0, x1, n)), true
		case s.weighted:
			return s.weightedPick(a, lo, hi, x0, x1), true
		}
		return lo + uint64(index(x0, uint32(n))), true
	}
	if tp.Bias == TimeExponential {
		if s.tmp.rejections > 0 {
			if k, ok := s.expStep(id, step, a, b, lo, hi); ok {
				return k, true
			}
		}
	} else {
		// Linear, weighted: proposal by weight, accepted by rank.
		for att := uint32(0); att < s.tmp.rejections; att++ {
			x0, x1, x2, _ := s.draw(id, step, att)
			c := s.weightedPick(a, lo, hi, x0, x1)
			if uint64(x2)*n < (n-s.rank(c, lo, hi))<<32 {
				return c, true
			}
		}
	}
	r := &elementWords{s: s, id: id, step: step, base: fallbackDraw}
	i := zprs(int(n), 1, func(i int) float64 { return s.temporalBias(a, lo+uint64(i), lo, hi) }, r.word)
	if i < 0 {
		return 0, false
	}
	return lo + uint64(i), true
}

// gallopLower is lowerTime(times, a, b, t) searched from a outward: the
// cost is the log of the answer's distance from a.
func gallopLower(times []int64, a, b uint64, t int64) uint64 {
	if a >= b || times[a] >= t {
		return a
	}
	at, step := a, uint64(1) // times[at] < t
	for {
		next := at + step
		if next >= b {
			return lowerTime(times, at+1, b, t)
		}
		if times[next] >= t {
			return lowerTime(times, at+1, next, t)
		}
		at, step = next, 2*step
	}
}

// gallopUpperBack is upperTime(times, a, b, t) searched from b downward.
func gallopUpperBack(times []int64, a, b uint64, t int64) uint64 {
	if a >= b || times[b-1] <= t {
		return b
	}
	at, step := b-1, uint64(1) // times[at] > t
	for {
		if at < a+step {
			return upperTime(times, a, at, t)
		}
		next := at - step
		if times[next] <= t {
			return upperTime(times, next+1, at, t)
		}
		at, step = next, 2*step
	}
}

// temporalNode2VecStep is a temporal Node2Vec step (p and q set) after the
// first: the time bias (times the weight) times Node2Vec's factor of the
// edge's target against prev (1/p back to prev, 1 to a neighbour of prev,
// 1/q otherwise), drawn exactly by the ZPRS reservoir (32 lanes) over the
// window in time order, element i's word being word i%4 of draw
// reservoirDraw + i/4: the contract of the zprs stepper, so a GPU kernel
// can run it as its warp-parallel reservoir over the window.
func (s *stepper) temporalNode2VecStep(id uint64, step, prev, cur uint32, t int64) (uint64, bool) {
	a := s.off[cur]
	lo, hi := s.window(a, s.off[cur+1], t, true)
	if lo == hi {
		return 0, false
	}
	bias := func(i int) float64 {
		k := lo + uint64(i)
		return s.temporalBias(a, k, lo, hi) * s.biasN2V[s.n2vClass(prev, s.tgt[a+uint64(s.tmp.byTime[k])])]
	}
	r := &elementWords{s: s, id: id, step: step, base: reservoirDraw}
	i := zprs(int(hi-lo), lanes, bias, r.word)
	if i < 0 {
		return 0, false
	}
	return lo + uint64(i), true
}

// near maps rank p (from the near end) of window [lo, hi) to a position.
func (s *stepper) near(lo, hi, p uint64) uint64 {
	if s.alg.Time.Backward {
		return hi - 1 - p
	}
	return lo + p
}

// rank is position k's rank in [lo, hi), counted from the near end.
func (s *stepper) rank(k, lo, hi uint64) uint64 {
	if s.alg.Time.Backward {
		return hi - 1 - k
	}
	return k - lo
}

// linearPos draws p in [0, n) with probability (n-p)/(n(n+1)/2): the
// smaller of two distinct values drawn uniformly from 0..n (p is the
// smaller of exactly n-p of the n(n+1)/2 pairs).
func linearPos(x0, x1 uint32, n uint64) uint64 {
	i := uint64(index(x0, uint32(n+1)))
	j := uint64(index(x1, uint32(n)))
	if j >= i {
		j++
	}
	return min(i, j)
}

// unit53 maps two words to a float64 in [0, 1) with 53 random bits.
func unit53(x0, x1 uint32) float64 {
	return float64(uint64(x0)<<21|uint64(x1>>11)) * (1.0 / (1 << 53))
}

// weightedPick draws a position of [lo, hi) (of the time order of the
// vertex whose edges start at a) with probability proportional to its
// edge's weight.
func (s *stepper) weightedPick(a, lo, hi uint64, x0, x1 uint32) uint64 {
	c := s.tmp.cumw
	var base float64
	if lo > a {
		base = c[lo-1]
	}
	r := base + float64(unit53(x0, x1)*(c[hi-1]-base)) // float64(): never an FMA, as on the GPU
	// First k in [lo, hi) with c[k] > r; rounding may leave none, and the
	// last position then takes the draw.
	l, h := lo, hi
	for l < h {
		m := l + (h-l)/2
		if c[m] <= r {
			l = m + 1
		} else {
			h = m
		}
	}
	return min(l, hi-1)
}

// expBias is exp(-|t(k) - t(near)| / scale).
func (s *stepper) expBias(k, lo, hi uint64) float64 {
	t := s.tmp.times
	ref := t[s.near(lo, hi, 0)]
	d := float64(t[k]) - float64(ref)
	if d < 0 {
		d = -d
	}
	return detExp(-d / s.alg.Time.Scale)
}

// temporalBias is position k's unnormalised probability in window
// [lo, hi) of the time order starting at a: the time bias times its
// edge's weight.
func (s *stepper) temporalBias(a, k, lo, hi uint64) float64 {
	b := 1.0
	switch s.alg.Time.Bias {
	case TimeLinear:
		b = float64(hi - lo - s.rank(k, lo, hi))
	case TimeExponential:
		b = s.expBias(k, lo, hi)
	}
	if s.weighted {
		b *= float64(s.w[a+uint64(s.tmp.byTime[k])])
	}
	return b
}

// walkTemporalUnit is walkUnit's loop for Temporal walks; times, when not
// nil, has the stride of buf.
func (s *stepper) walkTemporalUnit(starts []uint32, firstID uint64, buf []uint32, times []int64, lens []uint32) {
	stride := s.alg.Length + 1
	if s.alg.P != 0 || len(s.off) == 0 {
		// Temporal Node2Vec's 32-lane step reads two vertices' windows:
		// one walk at a time.
		for k := range starts {
			var tk []int64
			if times != nil {
				tk = times[k*stride : (k+1)*stride]
			}
			lens[k] = uint32(s.walkTemporal(firstID+uint64(k), starts[k], buf[k*stride:(k+1)*stride], tk))
		}
		return
	}
	for lo := 0; lo < len(starts); lo += temporalGroup {
		hi := min(lo+temporalGroup, len(starts))
		s.walkTemporalGroup(starts[lo:hi], firstID+uint64(lo), buf[lo*stride:hi*stride], times, lo, lens[lo:hi])
	}
}

// temporalGroup is how many walks walkTemporalGroup advances together.
const temporalGroup = 32

// walkTemporalGroup walks up to temporalGroup walks a step at a time each,
// in rounds: a walk's step is a chain of dependent loads (its vertex's
// offsets, the binary search of its times, the draw's reads, the
// position's edge index, its target), so one walk alone waits on memory at
// every link. A round takes each link for every walk of the group before
// the next, prefetching what the next link reads for all of them first,
// so the misses of the group's walks overlap: the offsets; the middle of
// every walk's times (the search's first probes) and the windows; the
// draws' first reads (the exponential sums at the near end and the time at
// the far end, the weighted prefix sums' ends); the drawn positions' edge
// indexes and times; the targets. Each walk draws exactly as walkTemporal
// does (Philox keyed by walk and step): the walks are the same, byte for
// byte.
func (s *stepper) walkTemporalGroup(starts []uint32, firstID uint64, buf []uint32, times []int64, timesRow int, lens []uint32) {
	stride := s.alg.Length + 1
	n := len(starts)
	var (
		cur    [temporalGroup]uint32
		t      [temporalGroup]int64
		active [temporalGroup]int // indexes of the walks still going
		idx    [3 * temporalGroup]uint64
		idx2   [temporalGroup]uint64
		ab     [temporalGroup][2]uint64 // the vertex's time order [a, b)
		win    [temporalGroup][2]uint64 // the window [lo, hi), then the drawn position
	)
	bound := s.alg.Time.Bound()
	for k := range n {
		cur[k], t[k] = starts[k], bound
		buf[k*stride] = starts[k]
		if times != nil {
			times[(timesRow+k)*stride] = bound
		}
		lens[k] = 1
		active[k] = k
	}
	live := n
	tm := s.tmp.times
	if len(tm) == 0 {
		return // no edges: no walk takes a step
	}
	bt := s.tmp.byTime
	exp := s.alg.Time.Bias == TimeExponential && s.tmp.rejections > 0
	cumw := s.tmp.cumw
	for step := uint32(0); step < uint32(s.alg.Length) && live > 0; step++ {
		bounded := step > 0 || s.alg.Time.HasStart
		for i, k := range active[:live] {
			idx[i] = uint64(cur[k])
		}
		prefetchRows(unsafe.Pointer(&s.off[0]), idx[:live], 8, 16)
		// The searches' coarse steps (their entries mostly cached), then
		// the runs of times they leave.
		m := 0
		for _, k := range active[:live] {
			a, b := s.off[cur[k]], s.off[cur[k]+1]
			ab[k] = [2]uint64{a, b}
			fa, fb := a, b
			if bounded && b > a {
				fa, fb = coarseRange(s.tmp.coarse, a, b, t[k], s.alg.Time.Backward)
				if fb > fa {
					idx[m], idx[m+1], idx[m+2] = fa, fa+(fb-fa)/2, fb-1
					m += 3
				}
			}
			win[k] = [2]uint64{fa, fb}
		}
		if m > 0 {
			prefetchRows(unsafe.Pointer(&tm[0]), idx[:m], 8, 8)
		}
		// Windows, and the draws' first reads.
		m, m2 := 0, 0
		for _, k := range active[:live] {
			lo, hi := ab[k][0], ab[k][1]
			if bounded {
				lo, hi = s.windowIn(lo, hi, t[k], win[k][0], win[k][1])
			}
			win[k] = [2]uint64{lo, hi}
			if lo < hi {
				switch {
				case exp:
					idx[m], idx[m+1] = lo, hi-1
					m += 2
					if s.alg.Time.Backward {
						idx2[m2] = hi - 1
					} else {
						idx2[m2] = lo
					}
					m2++
				case cumw != nil:
					idx2[m2] = hi - 1
					m2++
				}
			}
		}
		if m > 0 {
			prefetchRows(unsafe.Pointer(&tm[0]), idx[:m], 8, 8)
		}
		if m2 > 0 {
			if exp {
				prefetchRows(unsafe.Pointer(&s.tmp.expSums[0]), idx2[:m2], 8, 8)
			} else {
				prefetchRows(unsafe.Pointer(&cumw[0]), idx2[:m2], 8, 8)
			}
		}
		// Draws.
		kept := 0
		for _, k := range active[:live] {
			e, ok := s.temporalDraw(firstID+uint64(k), step, ab[k][0], ab[k][1], win[k][0], win[k][1])
			if !ok {
				continue
			}
			win[k][0] = e
			idx[kept] = e
			active[kept] = k
			kept++
		}
		live = kept
		prefetchRows(unsafe.Pointer(&bt[0]), idx[:live], 4, 4)
		prefetchRows(unsafe.Pointer(&tm[0]), idx[:live], 8, 8)
		// Edge indexes, then the targets.
		for i, k := range active[:live] {
			idx[i] = ab[k][0] + uint64(bt[win[k][0]])
		}
		prefetchRows(unsafe.Pointer(&s.tgt[0]), idx[:live], 4, 4)
		for i, k := range active[:live] {
			e := win[k][0]
			cur[k], t[k] = s.tgt[idx[i]], tm[e]
			buf[k*stride+int(lens[k])] = cur[k]
			if times != nil {
				times[(timesRow+k)*stride+int(lens[k])] = t[k]
			}
			lens[k]++
		}
	}
}

// temporalGraph is the part of g a Temporal stepper of alg reads; cumw
// for weighted walks, expSums for the exponential bias.
func temporalGraph(g *graph.Graph, alg Algorithm, cumw, expSums []float64, coarse []int64) *temporal {
	t := &temporal{times: g.Times, coarse: coarse, byTime: g.ByTime, cumw: cumw, rejections: maxRejections, expSums: expSums}
	if alg.Time.Bias == TimeExponential {
		t.expCell = expCell(alg.Time.Scale)
	}
	return t
}
