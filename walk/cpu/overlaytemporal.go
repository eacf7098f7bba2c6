package cpu

import (
	"cmp"
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
// walk.TimedOverlay) less the deleted ones. Its step gathers the window's
// live edges from both into one list in (time, target) order, the order a
// compaction gives the rebuilt graph's time order, weighs each as
// temporalBias does on that order (rank from the near end, time distance to
// the near end, times the weight), and draws by the prefix sums with
// unit53(x0, x1) of draw 0: exact, and O(window) per step, where the base's
// draws are O(1) or O(log d). A delta is short next to a vertex's base
// adjacency, and only vertices with one pay this.
//
// Temporal Node2Vec takes its class against the previous vertex in the
// snapshot (overlayN2VClass), so from the second step on every step draws
// this way, over the window's live edges with bias times the class's factor.

// maxTemporalCache bounds the edges a job keeps in its vertices' lists
// (24 to 32 bytes each): beyond it, a vertex's list is gathered for each
// step and not kept.
const maxTemporalCache = 16 << 20

// tlist is a vertex's live edges in a snapshot in (time, target) order,
// with the inclusive prefix sums of their weights on a weighted walk.
type tlist struct {
	t  []int64
	x  []uint32
	w  []float32
	cw []float64
}

// overlayTemporalCache holds a job's tlists by vertex (a stepper is shared by
// the job's workers).
type overlayTemporalCache struct {
	lists sync.Map // uint32 -> *tlist
	edges atomic.Int64
}

// overlayTemporalScratch is a unit's reusable memory: a list gathered and
// not kept, and the scan's sums.
type overlayTemporalScratch struct {
	list tlist
	tmp  []tedge
	cum  []float64
}

// tedge is one live edge, for sorting.
type tedge struct {
	t int64
	x uint32
	w float32
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
	for step := uint32(0); step < uint32(s.alg.Length); step++ {
		bounded := step > 0 || s.alg.Time.HasStart
		dv := s.ov.Vertex(cur)
		var next uint32
		var at int64
		if dv == nil && (!node2vec || prev == graph.NoVertex) {
			if int(cur) >= len(s.off)-1 {
				break // an added vertex that only edges point to
			}
			k, ok := s.temporalStep(id, step, cur, t, bounded)
			if !ok {
				break
			}
			next, at = s.tgt[s.off[cur]+uint64(s.tmp.byTime[k])], s.tmp.times[k]
		} else {
			l := s.overlayList(tov, sc, dv, cur)
			k, ok := s.overlayTemporalDraw(sc, l, id, step, prev, t, bounded)
			if !ok {
				break
			}
			next, at = l.x[k], l.t[k]
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
// live edge of positive bias.
func (s *stepper) overlayTemporalDraw(sc *overlayTemporalScratch, l *tlist, id uint64, step, prev uint32, t int64, bounded bool) (uint64, bool) {
	tp := &s.alg.Time
	lo, hi := uint64(0), uint64(len(l.t))
	if bounded {
		if !tp.Backward {
			lo = lowerTime(l.t, lo, hi, t)
			if tp.HasMaxGap {
				hi = upperTime(l.t, lo, hi, satAdd(t, tp.MaxGap))
			}
		} else {
			hi = upperTime(l.t, lo, hi, t)
			if tp.HasMaxGap {
				lo = lowerTime(l.t, lo, hi, satAdd(t, -tp.MaxGap))
			}
		}
	}
	if lo == hi {
		return 0, false
	}
	n := hi - lo
	if prev != graph.NoVertex && s.alg.P != 0 || tp.Bias == walk.TimeExponential {
		return s.overlayTemporalScan(sc, l, lo, hi, id, step, 0, prev)
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

// pickPrefix draws a position of [lo, hi) with probability proportional to
// its weight from the inclusive prefix sums c (base = c[lo-1], 0 at 0).
func pickPrefix(c []float64, base float64, lo, hi uint64, x0, x1 uint32) uint64 {
	r := base + float64(unit53(x0, x1)*(c[hi-1]-base)) // float64(): never an FMA
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

// overlayTemporalScan draws over window [lo, hi) of l by its biases summed
// from the near end (temporalBias on the window, times Node2Vec's factor
// against prev where the walk has one), with draw d's unit53(x0, x1).
func (s *stepper) overlayTemporalScan(sc *overlayTemporalScratch, l *tlist, lo, hi uint64, id uint64, step, d, prev uint32) (uint64, bool) {
	tp := &s.alg.Time
	n := hi - lo
	sc.cum = slices.Grow(sc.cum[:0], int(n))[:0]
	near := l.t[s.near(lo, hi, 0)]
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
			dt := float64(l.t[k]) - float64(near)
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
			b *= s.biasN2V[s.overlayN2VClass(prev, l.x[k])]
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
// when it has none) in (time, target) order: the job's kept list, or one
// gathered now, kept when the job's lists have room, else in sc.
func (s *stepper) overlayList(tov walk.TimedOverlay, sc *overlayTemporalScratch, dv *walk.DeltaVertex, cur uint32) *tlist {
	c := s.tcache
	if l, ok := c.lists.Load(cur); ok {
		return l.(*tlist)
	}
	sc.tmp = sc.tmp[:0]
	if int(cur) < len(s.off)-1 {
		a, b := s.off[cur], s.off[cur+1]
		for k := a; k < b; k++ {
			e := a + uint64(s.tmp.byTime[k])
			x := s.tgt[e]
			if dv != nil && dv.BaseDead(x) {
				continue
			}
			var w float32 = 1
			if s.weighted {
				w = s.w[e]
			}
			sc.tmp = append(sc.tmp, tedge{t: s.tmp.times[k], x: x, w: w})
		}
	}
	if nb := len(sc.tmp); dv != nil {
		dt := tov.DeltaTimes(cur)
		for i, de := range dv.Edges {
			if i >= len(dt) || dv.DeltaDead(i) {
				continue
			}
			w := de.Weight
			if !s.weighted {
				w = 1
			}
			sc.tmp = append(sc.tmp, tedge{t: dt[i], x: de.Target, w: w})
		}
		if len(sc.tmp) > nb {
			// The base's part is in (time, target) order already: a
			// stable sort of the whole keeps the merge simple.
			slices.SortStableFunc(sc.tmp, func(p, q tedge) int {
				return cmp.Or(cmp.Compare(p.t, q.t), cmp.Compare(p.x, q.x))
			})
		}
	}
	n := len(sc.tmp)
	keep := c.edges.Add(int64(n)) <= maxTemporalCache
	l := &sc.list
	if keep {
		l = new(tlist)
	} else {
		c.edges.Add(-int64(n))
	}
	l.t, l.x = slices.Grow(l.t[:0], n)[:n], slices.Grow(l.x[:0], n)[:n]
	if s.weighted {
		l.w, l.cw = slices.Grow(l.w[:0], n)[:n], slices.Grow(l.cw[:0], n)[:n]
	}
	var sum float64
	for i, e := range sc.tmp {
		l.t[i], l.x[i] = e.t, e.x
		if s.weighted {
			sum += float64(e.w)
			l.w[i], l.cw[i] = e.w, sum
		}
	}
	if keep {
		if prior, loaded := c.lists.LoadOrStore(cur, l); loaded {
			c.edges.Add(-int64(n)) // another worker kept it first
			return prior.(*tlist)
		}
	}
	return l
}
