package walk

import (
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/walkstage/walkstage/graph"
)

// Temporal walks (issue 38; CTDNE, Nguyen et al., "Continuous-Time Dynamic
// Network Embeddings", WWW'18 companion) run on a timed graph, which holds
// each vertex's edge times in time order (Graph.Times) with the permutation
// to its target-sorted edges (Graph.ByTime): position k of vertex v's time
// order is edge Offsets[v] + ByTime[Offsets[v]+k], ties in time in target
// order. A forward walk takes, at each
// step, an edge whose time is at or after the time of the edge it arrived
// by, and, with a maximum gap, at most that much later; a backward walk
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
// ranked by target, as the time order has them. Measuring the exponential from the
// window's first edge rather than from the bound keeps the weights in
// (0, 1] and the nearest edge at 1, so no window underflows to all zeros.
//
// The draw of step k of walk id uses Philox draws (seed, id, k, d):
//
//	uniform, unweighted   d=0: k = lo + index(x0, n)
//	linear, unweighted    d=0: i = index(x0, n+1), j = index(x1, n), j++ if j >= i;
//	                      p = min(i, j): the smaller of a uniform pair of distinct
//	                      values of 0..n, which is p with probability (n-p)/(n(n+1)/2)
//	uniform, weighted     d=0: r = unit53(x0, x1) * W, W the window's weight, found
//	                      by binary search in the per-vertex prefix sums of weights
//	                      in time order (the first k in [lo, hi) with cumw[k] > r)
//	otherwise             rejection: attempt a < maxRejections uses d=a: proposal
//	                      as uniform (unweighted, x0) or weighted (x0, x1) above,
//	                      accepted when x2 < accept(k) * 2^32: linear
//	                      x2 * n < (n-p) << 32, exponential
//	                      float64(x2) < exp(-|t(k)-t(near)|/s) * 2^32; after
//	                      maxRejections failed attempts, the exact one-lane
//	                      reservoir scan over the window in time order with word
//	                      i%4 of draw fallbackDraw+i/4 (scan) decides.
//
// Each of these is exact (the rejection's fallback makes the bounded loop
// exact, as for Node2Vec), and each is a binary search plus O(1) or
// O(log d) work, which is what a GPU kernel can do in a thread.

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
	byTime []uint32 // Graph.ByTime: time order position -> local edge index
	// cumw[Offsets[v]+k] is the sum of the weights of positions 0..k of
	// v's time order (weighted walks only): a window's weight is a
	// difference of two entries, and its weighted draw a binary search.
	cumw []float64
	// rejections bounds the rejection loop (maxRejections; tests set 0
	// to check the exact fallback on its own).
	rejections uint32
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
// step bounded by time t may take.
func (s *stepper) window(a, b uint64, t int64) (lo, hi uint64) {
	tp := &s.alg.Time
	lo, hi = a, b
	if !tp.Backward {
		if t != math.MinInt64 {
			lo = lowerTime(s.tmp.times, a, b, t)
			if tp.HasMaxGap {
				hi = upperTime(s.tmp.times, lo, b, satAdd(t, tp.MaxGap))
			}
		}
	} else if t != math.MaxInt64 {
		hi = upperTime(s.tmp.times, a, b, t)
		if tp.HasMaxGap {
			lo = lowerTime(s.tmp.times, a, hi, satAdd(t, -tp.MaxGap))
		}
	}
	return lo, hi
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
	cur, n := start, 1
	for step := uint32(0); step < uint32(s.alg.Length); step++ {
		k, ok := s.temporalStep(id, step, cur, t)
		if !ok {
			break
		}
		cur, t = s.tgt[s.off[cur]+uint64(s.tmp.byTime[k])], s.tmp.times[k]
		out[n] = cur
		if times != nil {
			times[n] = t
		}
		n++
	}
	return n
}

// temporalStep picks the edge of step from cur, bounded by time t, as its
// position in cur's time order; ok is false when the window is empty (the
// walk ends).
func (s *stepper) temporalStep(id uint64, step, cur uint32, t int64) (k uint64, ok bool) {
	a := s.off[cur]
	lo, hi := s.window(a, s.off[cur+1], t)
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
	for att := uint32(0); att < s.tmp.rejections; att++ {
		x0, x1, x2, _ := s.draw(id, step, att)
		var c uint64
		if s.weighted {
			c = s.weightedPick(a, lo, hi, x0, x1)
		} else {
			c = lo + uint64(index(x0, uint32(n)))
		}
		if s.accept(c, lo, hi, x2) {
			return c, true
		}
	}
	r := &elementWords{s: s, id: id, step: step, base: fallbackDraw}
	i := zprs(int(n), 1, func(i int) float64 { return s.temporalBias(a, lo+uint64(i), lo, hi) }, r.word)
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
	r := base + unit53(x0, x1)*(c[hi-1]-base)
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

// accept decides a rejection attempt for candidate position k of window
// [lo, hi) with word x: the time bias relative to its maximum (1, at the
// near end).
func (s *stepper) accept(k, lo, hi uint64, x uint32) bool {
	n := hi - lo
	switch s.alg.Time.Bias {
	case TimeLinear:
		return uint64(x)*n < (n-s.rank(k, lo, hi))<<32
	case TimeExponential:
		return float64(x) < s.expBias(k, lo, hi)*(1<<32)
	}
	return true
}

// expBias is exp(-|t(k) - t(near)| / scale).
func (s *stepper) expBias(k, lo, hi uint64) float64 {
	t := s.tmp.times
	ref := t[s.near(lo, hi, 0)]
	d := float64(t[k]) - float64(ref)
	if d < 0 {
		d = -d
	}
	return math.Exp(-d / s.alg.Time.Scale)
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
	for k := range starts {
		var tk []int64
		if times != nil {
			tk = times[k*stride : (k+1)*stride]
		}
		lens[k] = uint32(s.walkTemporal(firstID+uint64(k), starts[k], buf[k*stride:(k+1)*stride], tk))
	}
}

// temporalGraph is the part of g a Temporal stepper reads.
func temporalGraph(g *graph.Graph, cumw []float64) *temporal {
	return &temporal{times: g.Times, byTime: g.ByTime, cumw: cumw, rejections: maxRejections}
}
