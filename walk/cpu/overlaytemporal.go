package cpu

import (
	"math"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/walkstage/walkstage/graph"
	"github.com/walkstage/walkstage/walk"
)

// Temporal walks on a live graph's snapshot (issue 38 with issue 37). A
// vertex without a delta steps as on the base, with the base's draws
// (temporalStep), so a walk that meets no delta is the base's walk. A vertex
// with a delta has its live edges in two places: the base's time order less
// the tombstoned targets, and the appended edges (with their times, from
// walk.TimedOverlay) less the deleted ones. The first step at such a vertex
// in a job merges both into one list (tlist) in (time, target) order, the
// order a compaction gives the rebuilt graph's time order, kept for the
// job's other steps (by the vertex's rank in the overlay's DeltaIndex, up
// to maxTemporalCache edges). A step finds its window in the list by binary
// search and weighs each edge as temporalBias does on that order (rank from
// the near end, time distance to the near end, times the weight):
//
//	uniform, linear  the base's draws on the list's positions: O(1)
//	                 unweighted, a search in the list's prefix weight sums
//	                 (and linear's rejection) weighted
//	exponential      the base's cell-sum draw (expDrawn, walk/timeparams.go)
//	                 on the list's own records: when the list is built for
//	                 an exponential job it gets the cell sums of the job's
//	                 scale, direction and weighting, summed as fillExpRecs
//	                 sums a vertex's (suffix sums in a cell forward, prefix
//	                 sums backward), so the window's parts by cell, their
//	                 factors and the galloping search are the base's, with
//	                 the list's positions for the time order's: O(log d),
//	                 exact up to the sums' rounding as the base is. A
//	                 window whose sums are 0 goes to the scan below with
//	                 walk.FallbackDraw's words. The window's near end in
//	                 the next vertex's list is kept in the record of the
//	                 edge taken (its nx, as the base's records keep theirs)
//	                 by the first walk to search it, for the job's others.
//
// Draws on a delta take the base's Philox words (draw 0; the rejections'
// draws) over the list's positions: a walk is deterministic and distributed
// as on the rebuilt graph, but is not held equal to its walk there (the
// scan and the order of equal (time, target) edges differ). The scan
// (overlayTemporalScan, O(window)) sums the biases from the near end and
// picks by unit53(x0, x1).
//
// Temporal Node2Vec takes its class against the previous vertex in the
// snapshot (overlayN2VClass), by rejection as on the base: proposals by the
// time bias, kept by the class's factor over the largest. At a vertex
// without a delta the step is the base's (temporalNode2VecStep, its ZPRS
// fallback included) with those classes; at one with a delta it draws on
// the list (overlayTemporalN2V), the list's scan with bias times the
// factor deciding after MaxRejections rejections.

// maxTemporalCache bounds the edges a job keeps in its vertices' lists
// (12 to 36 bytes each): beyond it, a vertex's list is gathered for each
// step and not kept.
const maxTemporalCache = 16 << 20

// tlist is a vertex's live edges in a snapshot in (time, target) order:
// their times and targets in t and x, with the inclusive prefix sums of
// their weights on a weighted walk; on an exponential walk their times in
// t (the window's search and expDrawn read them there, as the graph's
// times) and their targets and cell sums in rec (timeRec), so that expDrawn
// draws on them as on the graph's records, with the weights in w for the
// scan.
type tlist struct {
	t  []int64
	x  []uint32
	w  []float32
	cw []float64
	// nx is each position's memo (timeRec.nx's, for the lists without
	// records: uniform and linear), on a kept list only.
	nx []uint32
	// rec and oneCell (every time of the list in one cell): exponential.
	rec     []timeRec
	oneCell bool
}

// time is position k's time.
func (l *tlist) time(k uint64) int64 { return l.t[k] }

// target is position k's target.
func (l *tlist) target(k uint64) uint32 {
	if l.rec != nil {
		return l.rec[k].tgt
	}
	return l.x[k]
}

// len is the list's length.
func (l *tlist) len() uint64 {
	return uint64(len(l.t))
}

// lower is the first position in [a, b) with time >= t, or b.
func (l *tlist) lower(a, b uint64, t int64) uint64 {
	return lowerTime(l.t, a, b, t)
}

// upper is the first position in [a, b) with time > t, or b.
func (l *tlist) upper(a, b uint64, t int64) uint64 {
	return upperTime(l.t, a, b, t)
}

// overlayTemporalCache holds a job's tlists by vertex (a stepper is shared by
// the job's workers): by the vertex's rank in the overlay's DeltaIndex when
// the stepper has one (a load where the map's lookup hashed a boxed key,
// a sixth of an exponential step), else in a map.
type overlayTemporalCache struct {
	byRank []atomic.Pointer[tlist]
	lists  sync.Map // uint32 -> *tlist
	edges  atomic.Int64
}

// newOverlayTemporalCache returns a job's empty cache for the overlay
// whose index is idx (nil: none).
func newOverlayTemporalCache(idx *walk.DeltaIndex) *overlayTemporalCache {
	c := new(overlayTemporalCache)
	if idx != nil {
		c.byRank = make([]atomic.Pointer[tlist], idx.Len())
	}
	return c
}

// overlayTemporalScratch is a unit's reusable memory: a list gathered and
// not kept, and the scan's sums.
type overlayTemporalScratch struct {
	list tlist
	tmp  []walk.TimedEdge
	cum  []float64
}

// walkOverlayTemporalUnit walks one unit's Temporal walks on the snapshot,
// one walk at a time; times, when not nil, has the stride of buf.
func (s *stepper) walkOverlayTemporalUnit(starts []uint32, firstID uint64, buf []uint32, times []int64, lens []uint32) {
	stride := s.alg.Length + 1
	tov, _ := s.ov.(walk.TimedOverlay)
	sc := new(overlayTemporalScratch)
	for k, start := range starts {
		var tk []int64
		if times != nil {
			tk = times[k*stride : (k+1)*stride]
		}
		lens[k] = uint32(s.walkOverlayTemporal(tov, sc, firstID+uint64(k), start, buf[k*stride:(k+1)*stride], tk))
	}
}

// walkOverlayTemporal is walkTemporal on the snapshot.
func (s *stepper) walkOverlayTemporal(tov walk.TimedOverlay, sc *overlayTemporalScratch, id uint64, start uint32, out []uint32, times []int64) int {
	t := s.alg.Time.Bound()
	out[0] = start
	if times != nil {
		times[0] = t
	}
	prev, cur, n := uint32(graph.NoVertex), start, 1
	node2vec := s.alg.P != 0
	// memo: the nx of the kept list record the walk arrived by, where the
	// window's near end in cur's list is kept once found (overlayTemporalDraw).
	var memo *uint32
	for step := uint32(0); step < uint32(s.alg.Length); step++ {
		bounded := step > 0 || s.alg.Time.HasStart
		var dv *walk.DeltaVertex
		rank := -1
		if s.ovIdx != nil {
			if rank = s.ovIdx.Rank(cur); rank >= 0 {
				dv = s.ovIdx.At(rank)
			}
		} else {
			dv = s.ov.Vertex(cur)
		}
		var next uint32
		var at int64
		if dv == nil {
			if int(cur) >= len(s.off)-1 {
				break // an added vertex that only edges point to
			}
			// The base's step; Node2Vec's with its classes in the
			// snapshot (prev's edges may have a delta).
			var k uint64
			var ok bool
			if node2vec && prev != graph.NoVertex {
				k, ok = s.temporalNode2VecStep(id, step, prev, cur, t, 0, false, true)
			} else {
				k, ok = s.temporalStep(id, step, cur, t, bounded)
			}
			if !ok {
				break
			}
			next, at = s.posTarget(s.off[cur], k), s.tmp.times[k]
			memo = nil
		} else {
			l := s.overlayList(tov, sc, dv, cur, rank)
			k, ok := s.overlayTemporalDraw(sc, l, id, step, prev, t, bounded, memo)
			if !ok {
				break
			}
			next, at = l.target(k), l.time(k)
			memo = nil
			switch {
			case l == &sc.list: // not kept: its records go with this step
			case l.rec != nil:
				memo = &l.rec[k].nx
			case l.nx != nil:
				memo = &l.nx[k]
			}
		}
		prev, cur, t = cur, next, at
		out[n] = cur
		if times != nil {
			times[n] = t
		}
		n++
	}
	return n
}

// overlayTemporalDraw draws walk id's step from list l over the window
// bounded by t: the edge's index in l; ok is false when the window holds no
// live edge of positive bias. memo, when not nil, is the nx of the kept
// list record the walk arrived by (time t, target l's vertex): 0, or 1 +
// the window's near end in l (forward its start, backward its end), which
// is the same for every walk of the job that takes that record, so the
// first to find it keeps it there and the others skip the search, as the
// base's records keep theirs (timeRec.nx). Workers store the same value,
// atomically.
func (s *stepper) overlayTemporalDraw(sc *overlayTemporalScratch, l *tlist, id uint64, step, prev uint32, t int64, bounded bool, memo *uint32) (uint64, bool) {
	tp := &s.alg.Time
	lo, hi := uint64(0), l.len()
	if bounded {
		var m uint32
		if memo != nil {
			m = atomic.LoadUint32(memo)
		}
		if !tp.Backward {
			if m != 0 {
				lo = uint64(m - 1)
			} else {
				lo = l.lower(lo, hi, t)
				if memo != nil && lo < math.MaxUint32 {
					atomic.StoreUint32(memo, uint32(lo+1))
				}
			}
			if tp.HasMaxGap {
				hi = l.upper(lo, hi, satAdd(t, tp.MaxGap))
			}
		} else {
			if m != 0 {
				hi = uint64(m - 1)
			} else {
				hi = l.upper(lo, hi, t)
				if memo != nil && hi < math.MaxUint32 {
					atomic.StoreUint32(memo, uint32(hi+1))
				}
			}
			if tp.HasMaxGap {
				lo = l.lower(lo, hi, satAdd(t, -tp.MaxGap))
			}
		}
	}
	if lo == hi {
		return 0, false
	}
	n := hi - lo
	if prev != graph.NoVertex && s.alg.P != 0 {
		return s.overlayTemporalN2V(sc, l, lo, hi, id, step, prev)
	}
	if l.rec == nil && tp.Bias == walk.TimeExponential {
		return s.overlayTemporalScan(sc, l, lo, hi, id, step, 0, prev)
	}
	if tp.Bias == walk.TimeExponential {
		// A window whose sums are 0 goes to the exact scan, as on the base.
		if k, ok := s.listExpDraw(l, id, step, 0, lo, hi); ok {
			return k, true
		}
		return s.overlayTemporalScan(sc, l, lo, hi, id, step, walk.FallbackDraw, prev)
	}
	if !s.weighted {
		x0, x1, _, _ := s.draw(id, step, 0)
		if tp.Bias == walk.TimeLinear {
			return s.near(lo, hi, linearPos(x0, x1, n)), true
		}
		return lo + uint64(walk.Bounded(x0, uint32(n))), true
	}
	var base float64
	if lo > 0 {
		base = l.cw[lo-1]
	}
	if !(l.cw[hi-1] > base) {
		return 0, false // every weight 0
	}
	for att := uint32(0); att < walk.MaxRejections; att++ {
		x0, x1, x2, _ := s.draw(id, step, att)
		k := pickPrefix(l.cw, base, lo, hi, x0, x1)
		if tp.Bias == walk.TimeUniform || uint64(x2)*n < (n-s.rank(k, lo, hi))<<32 {
			return k, true
		}
	}
	return s.overlayTemporalScan(sc, l, lo, hi, id, step, walk.MaxRejections, prev)
}

// listExpDraw is the base's exponential draw on list l's records from
// Philox draw number draw, its search from a guess (expHintFrom, with the
// window's far end); ok is false when the window's sums are 0.
func (s *stepper) listExpDraw(l *tlist, id uint64, step, draw uint32, lo, hi uint64) (uint64, bool) {
	var d expDraw
	d.x0, d.x1, d.x2, d.x3 = s.draw(id, step, draw)
	far := l.t[hi-1]
	if s.alg.Time.Backward {
		far = l.t[lo]
	}
	d.hint = s.expHintFrom(l.t, lo, hi, unit53(d.x0, d.x1), far, hi-lo-1)
	return s.expDrawn(l.rec, l.t, s.tmp.expCell, l.oneCell, &d, 0, l.len(), lo, hi)
}

// overlayTemporalN2V is temporal Node2Vec's step after the first on list
// l's window [lo, hi), by rejection as on the base (temporalNode2VecStep):
// attempt att proposes by the time bias on draw 2att (the list's draws, as
// overlayTemporalDraw takes them) and keeps the edge on draw 2att+1 with
// probability f/fmax of its class against prev in the snapshot; the exact
// scan (draw TemporalN2VFallbackDraw) after MaxRejections rejections, at
// once for an exponential list without records, and for a window whose
// exponential sums are zero.
func (s *stepper) overlayTemporalN2V(sc *overlayTemporalScratch, l *tlist, lo, hi uint64, id uint64, step, prev uint32) (uint64, bool) {
	tp := &s.alg.Time
	n := hi - lo
	exp := tp.Bias == walk.TimeExponential
	var base float64
	if s.weighted && !exp {
		if lo > 0 {
			base = l.cw[lo-1]
		}
		if !(l.cw[hi-1] > base) {
			return 0, false // every weight 0
		}
	}
	tries := s.tmp.rejections
	if exp && l.rec == nil {
		tries = 0
	}
	for att := uint32(0); att < tries; att++ {
		var k uint64
		switch x0, x1, _, _ := s.draw(id, step, 2*att); {
		case exp:
			var ok bool
			if k, ok = s.listExpDraw(l, id, step, 2*att, lo, hi); !ok {
				return s.overlayTemporalScan(sc, l, lo, hi, id, step, walk.TemporalN2VFallbackDraw, prev)
			}
		case s.weighted:
			k = pickPrefix(l.cw, base, lo, hi, x0, x1)
		case tp.Bias == walk.TimeLinear:
			k = s.near(lo, hi, linearPos(x0, x1, n))
		default:
			k = lo + uint64(walk.Bounded(x0, uint32(n)))
		}
		if s.n2vKeeps(id, step, att, k, lo, hi, prev, l.target(k), true) {
			return k, true
		}
	}
	return s.overlayTemporalScan(sc, l, lo, hi, id, step, walk.TemporalN2VFallbackDraw, prev)
}

// overlayTemporalScan draws over window [lo, hi) of l by its biases summed
// from the near end (temporalBias on the window, times Node2Vec's factor
// against prev where the walk has one), with draw d's unit53(x0, x1).
func (s *stepper) overlayTemporalScan(sc *overlayTemporalScratch, l *tlist, lo, hi uint64, id uint64, step, d, prev uint32) (uint64, bool) {
	tp := &s.alg.Time
	n := hi - lo
	sc.cum = slices.Grow(sc.cum[:0], int(n))[:0]
	near := l.time(s.near(lo, hi, 0))
	node2vec := prev != graph.NoVertex && s.alg.P != 0
	var sum float64
scan:
	for p := range n {
		k := s.near(lo, hi, p)
		b := 1.0
		switch tp.Bias {
		case walk.TimeLinear:
			b = float64(n - p)
		case walk.TimeExponential:
			dt := float64(l.time(k)) - float64(near)
			if dt < 0 {
				dt = -dt
			}
			if b = walk.DetExp(-dt / tp.Scale); b == 0 {
				break scan // every later edge of the window weighs 0 too
			}
		}
		if s.weighted {
			b *= float64(l.w[k])
		}
		if node2vec {
			b *= s.biasN2V[s.overlayN2VClass(prev, l.target(k))]
		}
		sum += b
		sc.cum = append(sc.cum, sum)
	}
	if !(sum > 0) {
		return 0, false
	}
	x0, x1, _, _ := s.draw(id, step, d)
	r := float64(unit53(x0, x1) * sum) // float64(): never an FMA
	p, _ := slices.BinarySearchFunc(sc.cum, r, func(c, r float64) int {
		if c <= r {
			return -1
		}
		return 1
	})
	if p >= len(sc.cum) {
		// Rounding left no sum above r: the last edge of positive bias.
		p = len(sc.cum) - 1
		for p > 0 && sc.cum[p] == sc.cum[p-1] {
			p--
		}
	}
	return s.near(lo, hi, uint64(p)), true
}

// overlayList returns cur's live edges in the snapshot (dv its delta, nil
// when it has none; rank its rank in the overlay's index, -1 without one)
// in (time, target) order: the job's kept list, or one gathered now, kept
// when the job's lists have room, else in sc.
func (s *stepper) overlayList(tov walk.TimedOverlay, sc *overlayTemporalScratch, dv *walk.DeltaVertex, cur uint32, rank int) *tlist {
	c := s.tcache
	byRank := rank >= 0 && c.byRank != nil
	if byRank {
		if l := c.byRank[rank].Load(); l != nil {
			return l
		}
	} else if l, ok := c.lists.Load(cur); ok {
		return l.(*tlist)
	}
	base := walk.TimedBase{Off: s.off, Tgt: s.tgt, W: s.w, Times: s.tmp.times, ByTime: s.tmp.byTime}
	var dt []int64
	if dv != nil {
		dt = tov.DeltaTimes(cur)
	}
	sc.tmp = walk.AppendTimed(sc.tmp[:0], base, cur, dv, dt, s.weighted)
	n := len(sc.tmp)
	keep := c.edges.Add(int64(n)) <= maxTemporalCache
	l := &sc.list
	if keep {
		l = new(tlist)
	} else {
		c.edges.Add(-int64(n))
	}
	if s.exp() {
		l.rec = slices.Grow(l.rec[:0], n)[:n]
		l.t = slices.Grow(l.t[:0], n)[:n]
		if s.weighted {
			l.w = slices.Grow(l.w[:0], n)[:n]
		}
		for i, e := range sc.tmp {
			l.rec[i], l.t[i] = timeRec{tgt: e.X}, e.T
			if s.weighted {
				l.w[i] = e.W
			}
		}
		l.oneCell = s.fillListExpSums(l)
	} else {
		l.t, l.x = slices.Grow(l.t[:0], n)[:n], slices.Grow(l.x[:0], n)[:n]
		if keep {
			l.nx = make([]uint32, n)
		}
		if s.weighted {
			l.w, l.cw = slices.Grow(l.w[:0], n)[:n], slices.Grow(l.cw[:0], n)[:n]
		}
		var sum float64
		for i, e := range sc.tmp {
			l.t[i], l.x[i] = e.T, e.X
			if s.weighted {
				sum += float64(e.W)
				l.w[i], l.cw[i] = e.W, sum
			}
		}
	}
	switch {
	case keep && byRank:
		if !c.byRank[rank].CompareAndSwap(nil, l) {
			c.edges.Add(-int64(n)) // another worker kept it first
			return c.byRank[rank].Load()
		}
	case keep:
		if prior, loaded := c.lists.LoadOrStore(cur, l); loaded {
			c.edges.Add(-int64(n))
			return prior.(*tlist)
		}
	}
	return l
}

// exp is true when the job's lists carry the exponential bias's records:
// its exponential draws run on them (tests that set no rejections check
// the scan alone).
func (s *stepper) exp() bool {
	return s.alg.Time.Bias == walk.TimeExponential && s.tmp.rejections > 0 && s.tmp.expCell > 0
}

// fillListExpSums sets the cell sums of l's records for the job's scale,
// direction and weighting, as fillExpRecs sets a vertex's in the graph's
// records (walk.BuildExpSums' recipe: each cell summed alone, forward from
// its last position down, backward from its first up, the same detExp and
// products), with the list's positions for the time order's. It returns
// whether every time of l falls in one cell.
func (s *stepper) fillListExpSums(l *tlist) bool {
	R := l.rec
	if len(R) == 0 {
		return true
	}
	scale, backward := s.alg.Time.Scale, s.alg.Time.Backward
	G := s.tmp.expCell
	n := uint64(len(R))
	var sum float64
	var cell uint64
	for i := range n {
		k := i
		if !backward {
			k = n - 1 - i
		}
		u := walk.TimeKey(l.t[k])
		c := u / G
		if i == 0 || c != cell {
			sum, cell = 0, c
		}
		o := u - c*G
		if backward {
			o = G - 1 - o
		}
		x := walk.DetExp(-float64(o) / scale)
		if s.weighted {
			x = float64(x * float64(l.w[k])) // float64(): never an FMA
		}
		sum += x
		R[k].s = sum
	}
	return walk.TimeKey(l.t[0])/G == walk.TimeKey(l.t[n-1])/G
}
