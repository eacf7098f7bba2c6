package cpu

import (
	"math"
	"time"
	"unsafe"

	"github.com/walkstage/walkstage/graph"
	"github.com/walkstage/walkstage/walk"
)

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
	// offsets[b] and env[b] are the exponential bands' cut offset b
	// (walk.ExpOffset) and its envelope exp(-offset/scale), the same for every
	// step.
	offsets [walk.MaxExpBands + 1]int64
	env     [walk.MaxExpBands + 1]float64
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
	tp := &s.alg.Time
	lo, hi = a, b
	if !bounded {
		return lo, hi
	}
	if !tp.Backward {
		lo = lowerTime(s.tmp.times, a, b, t)
		if tp.HasMaxGap {
			hi = upperTime(s.tmp.times, lo, b, satAdd(t, tp.MaxGap))
		}
	} else {
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
	a := s.off[cur]
	lo, hi := s.window(a, s.off[cur+1], t, bounded)
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
		if k, ok := s.expBandStep(id, step, a, lo, hi); ok {
			return k, true
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

// expBands cuts window [lo, hi) into bands by time distance d from the
// near end: band b holds the positions with d in [cut offset b, cut offset
// b+1), cut offset b = int64(b * scale) (saturating), for b < K, and the
// tail band K the rest. It returns the bands' position ranges
// [start[b], end[b]), their envelopes env[b] = exp(-(offset of cut b)/scale),
// the cut times and the number of bands (empty bands at the far end left
// out). Bands are found by galloping from the near end, so a band costs
// O(log of its size).
func (s *stepper) expBands(lo, hi uint64, start, end *[walk.MaxExpBands + 1]uint64, env *[walk.MaxExpBands + 1]float64,
	cut *[walk.MaxExpBands + 1]int64) int {
	times, scale, back := s.tmp.times, s.alg.Time.Scale, s.alg.Time.Backward
	k := walk.ExpBandCount(hi - lo)
	ref := times[lo]
	if back {
		ref = times[hi-1]
	}
	near := lo // forward: the next band starts here
	if back {
		near = hi // backward: the next band ends here
	}
	for b := 0; b <= k; b++ {
		off := s.tmp.offsets[b]
		c := satAdd(ref, off)
		if back {
			c = satAdd(ref, -off)
		}
		cut[b], env[b] = c, s.tmp.env[b]
		if d := c - ref; d != off && d != -off {
			// Saturated at the end of the int64 range: the envelope is
			// that of the cut there.
			env[b] = walk.DetExp(-math.Abs(float64(c)-float64(ref)) / scale)
		}
		var far uint64
		switch {
		case b == k && back:
			far = lo
		case b == k:
			far = hi
		case back:
			// Band b: times in (cut b+1, cut b], found below near.
			far = gallopUpperBack(times, lo, near, satAdd(ref, -s.tmp.offsets[b+1]))
		default:
			far = gallopLower(times, near, hi, satAdd(ref, s.tmp.offsets[b+1]))
		}
		if back {
			start[b], end[b] = far, near
		} else {
			start[b], end[b] = near, far
		}
		near = far
		if back && far == lo || !back && far == hi {
			return b + 1
		}
	}
	return k + 1
}

// expBandStep is the exponential bias's rejection sampler over the bands
// of expBands: attempt a uses draw a; x0 picks a band with probability
// proportional to its mass (edges, or their weight) times its envelope,
// x1 (and x3, weighted) an edge of the band uniformly (by weight), and
// the edge at time t is accepted when float64(x2) < exp(-|t - cut b|/scale)
// * 2^32. Envelope times acceptance is the edge's bias, so the draw is
// exact, and each attempt accepts with probability at least about 1/(e +
// e^-1): within a band the bias varies by at most e, and the tail's
// envelope is at most e^-2 of the window's mass. ok is false after
// s.tmp.rejections failed attempts (the caller's exact scan decides).
func (s *stepper) expBandStep(id uint64, step uint32, a, lo, hi uint64) (uint64, bool) {
	var start, end [walk.MaxExpBands + 1]uint64
	var env [walk.MaxExpBands + 1]float64
	var cut [walk.MaxExpBands + 1]int64
	var cum [walk.MaxExpBands + 1]float64
	nb := s.expBands(lo, hi, &start, &end, &env, &cut)
	var total float64
	for b := range nb {
		m := float64(end[b] - start[b])
		if s.weighted && end[b] > start[b] {
			m = s.tmp.cumw[end[b]-1]
			if start[b] > a {
				m -= s.tmp.cumw[start[b]-1]
			}
		}
		total += float64(m * env[b]) // float64(): never an FMA, as on the GPU
		cum[b] = total
	}
	times, scale := s.tmp.times, s.alg.Time.Scale
	for att := uint32(0); att < s.tmp.rejections; att++ {
		x0, x1, x2, x3 := s.draw(id, step, att)
		r := float64(x0) * (1.0 / (1 << 32)) * total
		b := 0
		for b < nb-1 && !(cum[b] > r && end[b] > start[b]) {
			b++
		}
		if end[b] == start[b] {
			continue // rounding put r past every non-empty band
		}
		var k uint64
		if s.weighted {
			k = s.weightedPick(a, start[b], end[b], x1, x3)
		} else {
			k = start[b] + uint64(walk.Bounded(x1, uint32(end[b]-start[b])))
		}
		if float64(x2) < walk.DetExp(-math.Abs(float64(times[k])-float64(cut[b]))/scale)*(1<<32) {
			return k, true
		}
	}
	return 0, false
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
	r := &elementWords{s: s, id: id, step: step, base: walk.ReservoirDraw}
	i := zprs(int(hi-lo), walk.Lanes, bias, r.word)
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
// offsets, then the binary search of its times), so one walk alone waits
// on memory at every link. A round first prefetches every walk's offsets,
// then the middle of every walk's times (the search's first probe, and
// the two after it), then steps each walk, so the misses of the group's
// walks overlap. Each walk draws exactly as walkTemporal does (Philox keyed
// by walk and step): the walks are the same, byte for byte.
func (s *stepper) walkTemporalGroup(starts []uint32, firstID uint64, buf []uint32, times []int64, timesRow int, lens []uint32) {
	stride := s.alg.Length + 1
	n := len(starts)
	var (
		cur    [temporalGroup]uint32
		t      [temporalGroup]int64
		active [temporalGroup]int // indexes of the walks still going
		idx    [3 * temporalGroup]uint64
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
	for step := uint32(0); step < uint32(s.alg.Length) && live > 0; step++ {
		bounded := step > 0 || s.alg.Time.HasStart
		if bounded && len(tm) > 0 {
			for i, k := range active[:live] {
				idx[i] = uint64(cur[k])
			}
			prefetchRows(unsafe.Pointer(&s.off[0]), idx[:live], 8, 16)
			m := 0
			for _, k := range active[:live] {
				a, b := s.off[cur[k]], s.off[cur[k]+1]
				if b-a > 1 {
					h := (b - a) / 2
					idx[m], idx[m+1], idx[m+2] = a+h, a+h/2, a+h+h/2
					m += 3
				}
			}
			prefetchRows(unsafe.Pointer(&tm[0]), idx[:m], 8, 8)
		}
		kept := 0
		for _, k := range active[:live] {
			id := firstID + uint64(k)
			e, ok := s.temporalStep(id, step, cur[k], t[k], bounded)
			if !ok {
				continue
			}
			cur[k], t[k] = s.tgt[s.off[cur[k]]+uint64(s.tmp.byTime[e])], tm[e]
			buf[k*stride+int(lens[k])] = cur[k]
			if times != nil {
				times[(timesRow+k)*stride+int(lens[k])] = t[k]
			}
			lens[k]++
			active[kept] = k
			kept++
		}
		live = kept
	}
}

// temporalGraph is the part of g a Temporal stepper of alg reads.
func temporalGraph(g *graph.Graph, alg walk.Algorithm, cumw []float64) *temporal {
	t := &temporal{times: g.Times, byTime: g.ByTime, cumw: cumw, rejections: walk.MaxRejections}
	if alg.Time.Bias == walk.TimeExponential {
		t.offsets, t.env = walk.ExpBandTable(alg.Time.Scale)
	}
	return t
}
