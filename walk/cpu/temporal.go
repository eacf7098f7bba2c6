package cpu

import (
	"math"
	"time"

	"github.com/walkstage/walkstage/graph"
	"github.com/walkstage/walkstage/walk"
)

// temporal is what a stepper needs for Temporal walks.
type temporal struct {
	times  []int64  // Graph.Times: per vertex, in time order
	coarse []int64  // walk.CoarseTimes(times), for walkTemporalGroup's searches
	byTime []uint32 // Graph.ByTime: time order position -> local edge index
	// cumw[Offsets[v]+k] is the sum of the weights of positions 0..k of
	// v's time order (weighted walks only): a window's weight is a
	// difference of two entries, and its weighted draw a binary search.
	cumw []float64
	// rejections bounds the rejection loop (maxRejections; tests set 0
	// to check the exact fallback on its own).
	rejections uint32
	// rec are the time order's records (timeRec): targets, with the
	// exponential bias's cell sums for this walk's scale, direction and
	// weighting (temporalexp.go); expCell the cells' width G.
	rec        []timeRec
	expCell    uint64
	expOneCell bool // every edge time in one cell (expTable.oneCell)
	// expNext: rec's nx are filled (expTable.next), and expVerts has
	// the vertices' ranges and time densities (expTable.verts).
	expNext  bool
	expVerts []vertRec
	// recNext: rec are the uniform and linear biases' records with nx for
	// this walk's direction (timeNextRecords).
	recNext bool
	// invScale is 1 / the exponential bias's scale, for the draws'
	// guesses (expHintFrom), which need no exact division.
	invScale float64
}

// nextFilled says the records' nx are filled for this walk's direction
// (and, exponential, scale): a record names its target's next window.
func (t *temporal) nextFilled() bool {
	return len(t.rec) > 0 && (t.expNext || t.recNext)
}

// coarseIndex builds the coarse time index once per engine (a quarter of
// a byte an edge).
func (e *Engine) coarseIndex() []int64 {
	e.coarseOnce.Do(func() {
		t0 := time.Now()
		c := walk.CoarseTimes(e.g.Times)
		e.recordBuild(t0, func() { e.coarse = c })
	})
	return e.coarse
}

// windowWeights builds the per-vertex prefix sums of the weights once per
// engine (8 bytes an edge).
func (e *Engine) windowWeights() []float64 {
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
	fa, fb, g := coarseRange(s.tmp.coarse, a, b, t, s.alg.Time.Backward)
	return s.windowIn(a, b, t, fa, fb, g)
}

// windowFrom is window for a bounded step whose near end nx is known
// (a record's nx): only a gap's far end is searched.
func (s *stepper) windowFrom(a, b uint64, t int64, nx uint64) (lo, hi uint64) {
	tp := &s.alg.Time
	if !tp.Backward {
		lo, hi = nx, b
		if tp.HasMaxGap {
			hi = upperTime(s.tmp.times, lo, b, satAdd(t, tp.MaxGap))
		}
		return lo, hi
	}
	lo, hi = a, nx
	if tp.HasMaxGap {
		lo = lowerTime(s.tmp.times, a, hi, satAdd(t, -tp.MaxGap))
	}
	return lo, hi
}

// posTarget is the target of time-order position k of the vertex whose
// edges start at a: its record's where there are records (one line
// already read by an exponential draw), else through ByTime.
func (s *stepper) posTarget(a, k uint64) uint32 {
	if len(s.tmp.rec) > 0 {
		return s.tmp.rec[k].tgt
	}
	return s.tgt[a+uint64(s.tmp.byTime[k])]
}

// windowIn is window for a bounded step whose first search (forward: the
// first time at or after t; backward: the first after t) is known to end
// in [fa, fb], near g (coarseRange).
func (s *stepper) windowIn(a, b uint64, t int64, fa, fb, g uint64) (lo, hi uint64) {
	tp := &s.alg.Time
	lo, hi = a, b
	if !tp.Backward {
		lo = timeFrom(s.tmp.times, fa, fb, t, false, g)
		if tp.HasMaxGap {
			hi = upperTime(s.tmp.times, lo, b, satAdd(t, tp.MaxGap))
		}
	} else {
		hi = timeFrom(s.tmp.times, fa, fb, t, true, g)
		if tp.HasMaxGap {
			lo = lowerTime(s.tmp.times, a, hi, satAdd(t, -tp.MaxGap))
		}
	}
	return lo, hi
}

// coarseSpacing is walk.CoarseSpacing, by the name this package's searches
// use.
const coarseSpacing = walk.CoarseSpacing

// coarseRange narrows the search in [a, b) for the first time at or after
// t (upper: after t) to [fa, fb] by a search over the coarse entries
// inside [a, b): the answer is a position of [fa, fb), or fb, and fb-fa <
// coarseSpacing where the range had more than two entries' worth. g in
// [fa, fb] is a guess of the answer (timeFrom starts there): where the
// times between the two coarse entries around t run evenly.
//
// The search over the entries interpolates too: it probes first where t
// would fall if the vertex's times ran evenly between its first and last
// entries, then gallops from there. Edge times that run about evenly
// (a hub's steady stream of events) put that probe a few entries from
// the answer, where a binary search over a hub's thousands of entries
// takes a dozen mispredicted probes; any times give the same answer.
func coarseRange(coarse []int64, a, b uint64, t int64, upper bool) (fa, fb, g uint64) {
	fa, fb = a, b
	if b-a <= 2*coarseSpacing {
		return fa, fb, a + (b-a)/2
	}
	j0, j1, _ := coarseEntries(a, b)
	after := func(c int64) bool { return c > t || !upper && c == t } // the answer is not after c's position
	// l: the first entry of [j0, j1) that is after, or j1.
	var l uint64
	switch {
	case after(coarse[j0]):
		l = j0
	case !after(coarse[j1-1]):
		l = j1
	default: // the answer is in (j0, j1-1]
		lo, hi := j0, j1-1 // !after(coarse[lo]), after(coarse[hi])
		jg := coarseProbe(coarse, j0, j1, t)
		if after(coarse[jg]) {
			hi = jg
			for step := uint64(1); hi-lo > 1; step *= 2 {
				next := hi - min(step, hi-lo-1)
				if !after(coarse[next]) {
					lo = next
					break
				}
				hi = next
			}
		} else {
			lo = jg
			for step := uint64(1); hi-lo > 1; step *= 2 {
				next := lo + min(step, hi-lo-1)
				if after(coarse[next]) {
					hi = next
					break
				}
				lo = next
			}
		}
		for hi-lo > 1 {
			m := lo + (hi-lo)/2
			if after(coarse[m]) {
				hi = m
			} else {
				lo = m
			}
		}
		l = hi
	}
	if l < j1 {
		fb = l * coarseSpacing // that position is not before t
	}
	if l > j0 {
		fa = (l-1)*coarseSpacing + 1 // the entry before it is
	}
	g = fa + (fb-fa)/2
	if l > j0 && l < j1 {
		g = fa + uint64(lerp(coarse[l-1], coarse[l], t)*float64(fb-fa))
	}
	return fa, fb, g
}

// coarseEntries are the coarse entries [j0, j1) inside [a, b); ok is
// false where coarseRange does not search them (b-a <= 2*coarseSpacing).
func coarseEntries(a, b uint64) (j0, j1 uint64, ok bool) {
	return (a + coarseSpacing - 1) / coarseSpacing, (b + coarseSpacing - 1) / coarseSpacing, b-a > 2*coarseSpacing
}

// coarseProbe is coarseRange's first probe inside (j0, j1-1]: where t
// would fall if the times ran evenly between entries j0 and j1-1.
func coarseProbe(coarse []int64, j0, j1 uint64, t int64) uint64 {
	return j0 + 1 + uint64(lerp(coarse[j0], coarse[j1-1], t)*float64(j1-j0-2))
}

// lerp is where t lies between x <= t and y >= t, in [0, 1) (0 when x and
// y are equal).
func lerp(x, y, t int64) float64 {
	f := (float64(t) - float64(x)) / (float64(y) - float64(x)) // float64: no overflow
	if !(f >= 0) {
		return 0
	}
	return min(f, 0x1.fffffffffffffp-1)
}

// timeFrom is lowerTime(times, a, b, t) (upper: upperTime) searched from
// the guess g in [a, b]: galloping toward the answer, so a good guess
// costs a probe or two in its own cache line.
func timeFrom(times []int64, a, b uint64, t int64, upper bool, g uint64) uint64 {
	after := func(c int64) bool { return c > t || !upper && c == t }
	// The answer is the first k of [a, b) with after(times[k]), or b; it
	// is in [l, h].
	l, h := a, b
	switch {
	case g >= b || g < a:
	case after(times[g]):
		h = g
		for step := uint64(1); h > l; step *= 2 {
			next := h - min(step, h-l)
			if !after(times[next]) {
				l = next + 1
				break
			}
			h = next
		}
	default:
		at := g // !after(times[at])
		for step := uint64(1); ; step *= 2 {
			next := at + step
			if next >= h {
				break
			}
			if after(times[next]) {
				h = next
				break
			}
			at = next
		}
		l = at + 1
	}
	for l < h {
		m := l + (h-l)/2
		if after(times[m]) {
			h = m
		} else {
			l = m + 1
		}
	}
	return l
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
	// With records whose nx are filled, the record of the position taken
	// names the next vertex and its window's near end (nx, known): the
	// Node2Vec step then searches no window.
	recs := s.tmp.nextFilled()
	var nx uint64
	known := false
	for step := uint32(0); step < uint32(s.alg.Length); step++ {
		var k uint64
		var ok bool
		if s.alg.P != 0 && prev != graph.NoVertex {
			k, ok = s.temporalNode2VecStep(id, step, prev, cur, t, nx, known, false)
		} else {
			k, ok = s.temporalStep(id, step, cur, t, step > 0 || s.alg.Time.HasStart)
		}
		if !ok {
			break
		}
		var next uint32
		if recs {
			r := s.tmp.rec[k]
			next, nx, known = r.tgt, uint64(r.nx), true
		} else {
			next = s.tgt[s.off[cur]+uint64(s.tmp.byTime[k])]
		}
		prev, cur, t = cur, next, s.tmp.times[k]
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
	if tp.Bias == walk.TimeUniform || tp.Bias == walk.TimeLinear && !s.weighted {
		x0, x1, _, _ := s.draw(id, step, 0)
		switch {
		case tp.Bias == walk.TimeLinear:
			return s.near(lo, hi, linearPos(x0, x1, n)), true
		case s.weighted:
			return s.weightedPick(a, lo, hi, x0, x1), true
		}
		return lo + uint64(walk.Bounded(x0, uint32(n))), true
	}
	if tp.Bias == walk.TimeExponential {
		if s.tmp.rejections > 0 {
			if k, ok := s.expStep(id, step, 0, a, b, lo, hi); ok {
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
	r := &elementWords{s: s, id: id, step: step, base: walk.FallbackDraw}
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
// 1/q otherwise). Drawn by rejection (walk's draw contract): attempt att
// proposes an edge by the time bias alone with draw 2att, as the temporal
// step draws (temporalPropose), and keeps it on draw 2att+1 with
// probability f/fmax, so a step costs a few proposals, each O(log window),
// instead of a pass over the window with a search of prev's adjacency an
// edge (a hub's window under the exponential bias is long and stays long:
// the bias holds the walk near its time). A window whose exponential sums
// are zero, and MaxRejections rejections, fall back to the exact ZPRS
// reservoir (32 lanes) over the window in time order, element i's word
// being word i%4 of draw TemporalN2VFallbackDraw + i/4: the contract of the
// zprs stepper, which a GPU kernel runs as its warp-parallel reservoir.
// Either way the step is exact: a rejection loop cut off by an exact draw
// is distributed as the exact draw.
//
// known says nx is the window's near end in cur's time order (the record
// of the edge that reached cur), so only a gap's far end is searched.
// overlay takes the classes in the live graph's snapshot (a walk on a
// delta, at a vertex without one: walkOverlayTemporal).
func (s *stepper) temporalNode2VecStep(id uint64, step, prev, cur uint32, t int64, nx uint64, known, overlay bool) (uint64, bool) {
	a, b := s.off[cur], s.off[cur+1]
	var lo, hi uint64
	if known {
		lo, hi = s.windowFrom(a, b, t, nx)
	} else {
		lo, hi = s.window(a, b, t, true)
	}
	if lo == hi {
		return 0, false
	}
	for att := uint32(0); att < s.tmp.rejections; att++ {
		k, ok := s.temporalPropose(id, step, 2*att, a, b, lo, hi)
		if !ok {
			break
		}
		if s.n2vKeeps(id, step, att, k, lo, hi, prev, s.posTarget(a, k), overlay) {
			return k, true
		}
	}
	class := s.n2vClass
	if overlay {
		class = s.overlayN2VClass
	}
	bias := func(i int) float64 {
		k := lo + uint64(i)
		return s.temporalBias(a, k, lo, hi) * s.biasN2V[class(prev, s.posTarget(a, k))]
	}
	r := &elementWords{s: s, id: id, step: step, base: walk.TemporalN2VFallbackDraw}
	i := zprs(int(hi-lo), walk.Lanes, bias, r.word)
	if i < 0 {
		return 0, false
	}
	return lo + uint64(i), true
}

// n2vKeeps is temporal Node2Vec's acceptance of attempt att's proposal,
// position k of window [lo, hi) with target x, on draw 2att+1: for the
// weighted linear bias (proposed by weight) the rank's acceptance on x0
// first, then n2vAccepts on the next word.
func (s *stepper) n2vKeeps(id uint64, step, att uint32, k, lo, hi uint64, prev, x uint32, overlay bool) bool {
	z0, z1, _, _ := s.draw(id, step, 2*att+1)
	if s.alg.Time.Bias == walk.TimeLinear && s.weighted {
		n := hi - lo
		if uint64(z0)*n >= (n-s.rank(k, lo, hi))<<32 {
			return false
		}
		z0 = z1
	}
	return s.n2vAccepts(prev, x, z0, overlay)
}

// n2vAccepts says whether word z accepts a proposal of target x against
// prev (z < Threshold(f/fmax) of its class; overlay: the class in the
// live graph's snapshot). The class's search of prev's adjacency runs only
// for a word between the neighbour's and the outward threshold: a return
// is known without it, and a word under both thresholds accepts, one at or
// over both rejects, whatever the class (with p 0.5 and q 2, three words
// in four).
func (s *stepper) n2vAccepts(prev, x, z uint32, overlay bool) bool {
	if x == prev {
		return uint64(z) < s.acceptT[0]
	}
	t1, t2 := s.acceptT[1], s.acceptT[2]
	switch {
	case uint64(z) < min(t1, t2):
		return true
	case uint64(z) >= max(t1, t2):
		return false
	case overlay:
		return uint64(z) < s.acceptT[s.overlayN2VClass(prev, x)]
	}
	return uint64(z) < s.acceptT[s.n2vClass(prev, x)]
}

// temporalPropose is temporal Node2Vec's proposal on window [lo, hi) of
// the time order [a, b), from Philox draw number draw: temporalDraw's
// single draw for the uniform, unweighted linear and exponential biases
// (time bias times weight), by weight alone for the weighted linear bias
// (the caller accepts by rank). ok is false when an exponential window's
// sums are zero.
func (s *stepper) temporalPropose(id uint64, step, draw uint32, a, b, lo, hi uint64) (uint64, bool) {
	tp := &s.alg.Time
	if tp.Bias == walk.TimeExponential {
		return s.expStep(id, step, draw, a, b, lo, hi)
	}
	x0, x1, _, _ := s.draw(id, step, draw)
	switch {
	case s.weighted:
		return s.weightedPick(a, lo, hi, x0, x1), true
	case tp.Bias == walk.TimeLinear:
		return s.near(lo, hi, linearPos(x0, x1, hi-lo)), true
	}
	return lo + uint64(walk.Bounded(x0, uint32(hi-lo))), true
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
	i := uint64(walk.Bounded(x0, uint32(n+1)))
	j := uint64(walk.Bounded(x1, uint32(n)))
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
	return pickPrefix(c, base, lo, hi, x0, x1)
}

// pickPrefix draws a position of [lo, hi) with probability proportional to
// its weight from the inclusive prefix sums c (base = c[lo-1], or 0 where
// lo starts the sums): the first k with c[k] > base + unit53(x0, x1) *
// (c[hi-1] - base); rounding may leave none, and the last position then
// takes the draw.
func pickPrefix(c []float64, base float64, lo, hi uint64, x0, x1 uint32) uint64 {
	r := base + float64(unit53(x0, x1)*(c[hi-1]-base)) // float64(): never an FMA, as on the GPU
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
	return walk.DetExp(-d / s.alg.Time.Scale)
}

// temporalBias is position k's unnormalised probability in window
// [lo, hi) of the time order starting at a: the time bias times its
// edge's weight.
func (s *stepper) temporalBias(a, k, lo, hi uint64) float64 {
	b := 1.0
	switch s.alg.Time.Bias {
	case walk.TimeLinear:
		b = float64(hi - lo - s.rank(k, lo, hi))
	case walk.TimeExponential:
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
	if s.alg.P != 0 || len(s.off) == 0 || len(s.tmp.rec) == 0 {
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
	if s.tmp.recNext && s.alg.Time.Bias != walk.TimeExponential {
		for lo := 0; lo < len(starts); lo += temporalExpGroup {
			hi := min(lo+temporalExpGroup, len(starts))
			s.walkTemporalNextGroup(starts[lo:hi], firstID+uint64(lo), buf[lo*stride:hi*stride], times, lo, lens[lo:hi])
		}
		return
	}
	if s.tmp.expNext && s.alg.Time.Bias == walk.TimeExponential && s.tmp.rejections > 0 {
		for lo := 0; lo < len(starts); lo += temporalExpGroup {
			hi := min(lo+temporalExpGroup, len(starts))
			s.walkTemporalExpGroup(starts[lo:hi], firstID+uint64(lo), buf[lo*stride:hi*stride], times, lo, lens[lo:hi])
		}
		return
	}
	for lo := 0; lo < len(starts); lo += temporalGroup {
		hi := min(lo+temporalGroup, len(starts))
		s.walkTemporalGroup(starts[lo:hi], firstID+uint64(lo), buf[lo*stride:hi*stride], times, lo, lens[lo:hi])
	}
}

// temporalGraph is the part of g a Temporal stepper of alg reads; cumw
// for weighted walks, rec the records (timeRecords) for the uniform and
// linear biases, exp (records with the cell sums) for the exponential
// bias. Without records the walks go one at a time (walkTemporal).
func temporalGraph(g *graph.Graph, alg walk.Algorithm, cumw []float64, rec []timeRec, exp *expTable, coarse []int64) *temporal {
	t := &temporal{times: g.Times, coarse: coarse, byTime: g.ByTime, cumw: cumw, rec: rec, rejections: walk.MaxRejections}
	if alg.Time.Bias == walk.TimeExponential && exp != nil { // nil: tests of the exact fallback alone
		t.rec, t.expOneCell = exp.rec, exp.oneCell
		t.expNext, t.expVerts = exp.next, exp.verts
		t.invScale = 1 / alg.Time.Scale
		t.expCell = walk.ExpCell(alg.Time.Scale)
	}
	return t
}
