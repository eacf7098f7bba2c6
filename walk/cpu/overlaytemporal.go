package cpu

import (
	"cmp"
	"slices"

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

// tedge is one live edge of a window gathered from base and delta.
type tedge struct {
	t int64
	x uint32
	w float32
}

// overlayTemporalScratch is a unit's reusable memory for gathering windows
// (a stepper is shared by the job's workers).
type overlayTemporalScratch struct {
	edges, merge []tedge
	cum          []float64
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
			var ok bool
			next, at, ok = s.overlayTemporalStep(tov, sc, dv, id, step, prev, cur, t, bounded)
			if !ok {
				break
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

// overlayTemporalStep draws walk id's step from cur (whose delta is dv, nil
// when it has none) over the window bounded by t: the edge's target and
// time; ok is false when the window holds no live edge (or none of
// positive bias).
func (s *stepper) overlayTemporalStep(tov walk.TimedOverlay, sc *overlayTemporalScratch, dv *walk.DeltaVertex, id uint64, step, prev, cur uint32, t int64, bounded bool) (uint32, int64, bool) {
	win := s.overlayWindow(tov, sc, dv, cur, t, bounded)
	n := len(win)
	if n == 0 {
		return 0, 0, false
	}
	tp := &s.alg.Time
	sc.cum = slices.Grow(sc.cum[:0], n)[:n]
	near := win[0].t
	if tp.Backward {
		near = win[n-1].t
	}
	var sum float64
	for i, e := range win {
		b := 1.0
		switch tp.Bias {
		case walk.TimeLinear:
			r := uint64(i) // rank from the near end
			if tp.Backward {
				r = uint64(n - 1 - i)
			}
			b = float64(uint64(n) - r)
		case walk.TimeExponential:
			d := float64(e.t) - float64(near)
			if d < 0 {
				d = -d
			}
			b = walk.DetExp(-d / tp.Scale)
		}
		if s.weighted {
			b *= float64(e.w)
		}
		if prev != graph.NoVertex && s.alg.P != 0 {
			b *= s.biasN2V[s.overlayN2VClass(prev, e.x)]
		}
		sum += b
		sc.cum[i] = sum
	}
	if !(sum > 0) {
		return 0, 0, false
	}
	x0, x1, _, _ := s.draw(id, step, 0)
	r := float64(unit53(x0, x1) * sum) // float64(): never an FMA
	i, _ := slices.BinarySearchFunc(sc.cum, r, func(c, r float64) int {
		if c <= r {
			return -1
		}
		return 1
	})
	if i >= n {
		// Rounding left no sum above r: the last edge of positive bias.
		i = n - 1
		for i > 0 && sc.cum[i] == sc.cum[i-1] {
			i--
		}
	}
	return win[i].x, win[i].t, true
}

// overlayWindow gathers the live edges of cur's window bounded by t (every
// live edge when not bounded) in (time, target) order, into the stepper's
// scratch sc.
func (s *stepper) overlayWindow(tov walk.TimedOverlay, sc *overlayTemporalScratch, dv *walk.DeltaVertex, cur uint32, t int64, bounded bool) []tedge {
	tp := &s.alg.Time
	// The window's time range [from, to].
	from, to := int64(-1<<63), int64(1<<63-1)
	if bounded {
		if !tp.Backward {
			from = t
			if tp.HasMaxGap {
				to = satAdd(t, tp.MaxGap)
			}
		} else {
			to = t
			if tp.HasMaxGap {
				from = satAdd(t, -tp.MaxGap)
			}
		}
	}
	win := sc.edges[:0]
	if int(cur) < len(s.off)-1 {
		a, b := s.off[cur], s.off[cur+1]
		lo, hi := lowerTime(s.tmp.times, a, b, from), upperTime(s.tmp.times, a, b, to)
		for k := lo; k < hi; k++ {
			e := a + uint64(s.tmp.byTime[k])
			x := s.tgt[e]
			if dv != nil && dv.BaseDead(x) {
				continue
			}
			var w float32 = 1
			if s.weighted {
				w = s.w[e]
			}
			win = append(win, tedge{t: s.tmp.times[k], x: x, w: w})
		}
	}
	if dv != nil {
		nb := len(win)
		dt := tov.DeltaTimes(cur)
		for i, de := range dv.Edges {
			if i >= len(dt) || dt[i] < from || dt[i] > to || dv.DeltaDead(i) {
				continue
			}
			w := de.Weight
			if !s.weighted {
				w = 1
			}
			win = append(win, tedge{t: dt[i], x: de.Target, w: w})
		}
		if len(win) > nb {
			// The base's part is in (time, target) order already.
			byTimeTarget := func(p, q tedge) int {
				return cmp.Or(cmp.Compare(p.t, q.t), cmp.Compare(p.x, q.x))
			}
			slices.SortStableFunc(win[nb:], byTimeTarget)
			if nb > 0 {
				merged := slices.Grow(sc.merge[:0], len(win))
				i, j := 0, nb
				for i < nb && j < len(win) {
					if byTimeTarget(win[j], win[i]) < 0 {
						merged = append(merged, win[j])
						j++
					} else {
						merged = append(merged, win[i])
						i++
					}
				}
				merged = append(append(merged, win[i:nb]...), win[j:]...)
				sc.merge, win = win, merged
			}
		}
	}
	sc.edges = win
	return win
}
