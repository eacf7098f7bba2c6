package cpu

import (
	"math"
	"sync"
	"time"

	"github.com/walkstage/walkstage/graph"
	"github.com/walkstage/walkstage/internal/hugemem"
	"github.com/walkstage/walkstage/walk"
)

// expTable is one scale's (and direction's, and weighting's) cell sums,
// built once on first use.
type expTable struct {
	scale              float64
	backward, weighted bool
	once               sync.Once
	sums               []float64
	// oneCell is true when every edge time of the graph falls in one time
	// cell: a window is then never cut by a cell boundary, and a step
	// needs neither its far end's time nor a cell check.
	oneCell bool
}

// maxExpTables bounds the tables the CPU engine keeps (8 bytes an edge
// each): a run with a third scale drops the least recently used.
const maxExpTables = 2

// expSums returns the cell sums for alg's exponential bias (expTable).
func (e *Engine) expSums(alg walk.Algorithm) []float64 { return e.expTable(alg).sums }

// expTable returns the cell sums for alg's exponential bias, building them
// (on the engine's workers) the first time this scale, direction and
// weighting is asked for.
func (e *Engine) expTable(alg walk.Algorithm) *expTable {
	tp := alg.Time
	e.mu.Lock()
	var t *expTable
	for i, x := range e.expTabs {
		if x.scale == tp.Scale && x.backward == tp.Backward && x.weighted == alg.Weighted {
			t = x
			e.expTabs = append(append(e.expTabs[:i:i], e.expTabs[i+1:]...), x) // most recent last
			break
		}
	}
	if t == nil {
		t = &expTable{scale: tp.Scale, backward: tp.Backward, weighted: alg.Weighted}
		e.expTabs = append(e.expTabs, t)
		if len(e.expTabs) > maxExpTables {
			// A stepper still walking on the dropped table keeps it
			// alive until it is done.
			e.expTabs = e.expTabs[1:]
		}
	}
	e.mu.Unlock()
	t.once.Do(func() {
		t0 := time.Now()
		g := e.g
		// Outside the Go heap, on huge pages (hugemem.Alloc): the steps
		// read it at random, and a table of the graph's size in the heap
		// paces the collector by it. A dropped table is unmapped once e
		// is; the workers keep e alive while they walk.
		s := hugemem.Alloc[float64](e, int(g.NumEdges()))
		ranges := vertexRangesByEdges(g, e.cfg.workers*4)
		var wg sync.WaitGroup
		for _, r := range ranges {
			wg.Add(1)
			go func() {
				defer wg.Done()
				walk.BuildExpSums(g, tp.Scale, tp.Backward, alg.Weighted, s, r[0], r[1])
			}()
		}
		wg.Wait()
		tlo, thi := g.TimeRange()
		G := walk.ExpCell(tp.Scale)
		one := walk.TimeKey(tlo)/G == walk.TimeKey(thi)/G
		e.recordBuild(t0, func() { t.sums, t.oneCell = s, one })
	})
	return t
}

// vertexRangesByEdges cuts the vertices into at most n contiguous ranges of
// about equal edge counts.
func vertexRangesByEdges(g *graph.Graph, n int) [][2]int {
	nv := g.NumVertices()
	E := uint64(g.NumEdges())
	var out [][2]int
	v := 0
	for i := 1; i <= n && v < nv; i++ {
		target := E * uint64(i) / uint64(n)
		w := v + 1
		for w < nv && g.Offsets[w] < target {
			w++
		}
		if i == n {
			w = nv
		}
		out = append(out, [2]int{v, w})
		v = w
	}
	if v < nv {
		out = append(out, [2]int{v, nv})
	}
	return out
}

// expDraw is what an exponential step draws before it reads the sums: the
// Philox words of its draw and a guess of the position they pick
// (expHint), which walkTemporalGroup computes a phase ahead so that it can
// prefetch the sums there.
type expDraw struct {
	x0, x1, x2, x3 uint32
	hint           uint64
}

// expStep is the exponential bias's draw (temporal.go's specification) on
// window [lo, hi) of the time order [a, b); ok is false when the window's
// sums are zero (the caller's exact scan decides).
func (s *stepper) expStep(id uint64, step uint32, a, b, lo, hi uint64) (uint64, bool) {
	var d expDraw
	s.expPrepare(&d, id, step, lo, hi)
	return s.expDrawn(&d, a, b, lo, hi)
}

// expPrepare fills d for the step of walk id on window [lo, hi).
func (s *stepper) expPrepare(d *expDraw, id uint64, step uint32, lo, hi uint64) {
	d.x0, d.x1, d.x2, d.x3 = s.draw(id, step, 0)
	d.hint = s.expHint(lo, hi, unit53(d.x0, d.x1))
}

// expHintMin is the least window (positions) whose draw starts its search
// at a guess rather than at the near end: below it the whole search spans
// a few cache lines anyway.
const expHintMin = 2 * coarseSpacing

// expHint guesses the position of window [lo, hi) that the draw u picks
// when the window is one cell's part, so that the search in the sums
// starts next to it instead of galloping from the near end (the gallop's
// probes are dependent misses, about 2 log2 of the distance). Any guess in
// [lo, hi) gives the same position (the search is exact); a good one saves
// the misses. It models the window as times spread evenly between the near
// end and the coarse index's entry farthest inside the window, cached for
// the hubs where windows are long: weights exp(-x) at x scales from the
// near end, the window X scales long, the mass from x on is (e^-x - e^-X)
// / (1 - e^-X), and the draw's position is where that equals u.
func (s *stepper) expHint(lo, hi uint64, u float64) uint64 {
	n := hi - lo
	back := s.alg.Time.Backward
	if n <= expHintMin {
		if back {
			return hi - 1
		}
		return lo
	}
	times, coarse := s.tmp.times, s.tmp.coarse
	var near, far int64
	var span uint64 // positions from the near end to the coarse entry
	if !back {
		j := (hi - 1) / coarseSpacing
		near, far, span = times[lo], coarse[j], j*coarseSpacing-lo
	} else {
		j := (lo + coarseSpacing - 1) / coarseSpacing
		near, far, span = times[hi-1], coarse[j], hi-1-j*coarseSpacing
	}
	X := math.Abs(float64(far)-float64(near)) / s.alg.Time.Scale
	var p float64
	if !(X > 0) {
		p = (1 - u) * float64(span) // equal times: equal weights
	} else {
		var e float64
		if X < 40 {
			e = math.Exp(-X)
		}
		x := X
		if y := u + (1-u)*e; y > 0 {
			x = -math.Log(y)
		}
		p = x / X * float64(span)
	}
	off := min(uint64(max(p, 0)), n-1)
	if back {
		return hi - 1 - off
	}
	return lo + off
}

// expDrawn is expStep's draw from d on window [lo, hi) of the time order
// [a, b): the window's cells from its near end, each cell's part weighed
// by its sums times the cell's factor to the near end, a part drawn by
// (x2, x3) when there are more than one, and a position in it by (x0, x1)
// through the sums.
func (s *stepper) expDrawn(d *expDraw, a, b, lo, hi uint64) (uint64, bool) {
	times, S, G := s.tmp.times, s.tmp.expSums, s.tmp.expCell
	one := s.tmp.expOneCell
	u := unit53(d.x0, d.x1)
	if !s.alg.Time.Backward {
		if one {
			var base float64
			if hi < b {
				base = S[hi]
			}
			return expPickForward(S, lo, hi, base, u, d.hint)
		}
		near := walk.TimeKey(times[lo])
		c0 := near / G
		if walk.TimeKey(times[hi-1])/G == c0 {
			return expPickForward(S, lo, hi, expBaseForward(S, times, b, hi, c0, G), u, d.hint)
		}
		var start, end [walk.MaxExpCells]uint64
		var base, cum [walk.MaxExpCells]float64
		var total float64
		n := 0
		for p := lo; p < hi && n < walk.MaxExpCells; n++ {
			c := walk.TimeKey(times[p]) / G
			var e uint64
			var bs float64
			if walk.TimeKey(times[hi-1])/G == c {
				e, bs = hi, expBaseForward(S, times, b, hi, c, G)
			} else {
				e = gallopLower(times, p, hi, walk.KeyTime((c+1)*G))
			}
			var f float64
			if n == 0 {
				f = walk.DetExp(float64(near-c*G) / s.alg.Time.Scale)
			} else {
				f = walk.DetExp(-float64(c*G-near) / s.alg.Time.Scale)
			}
			if f == 0 {
				break // this cell and every later one weigh nothing
			}
			total += float64((S[p] - bs) * f) // float64(): never an FMA, as on the GPU
			start[n], end[n], base[n], cum[n] = p, e, bs, total
			p = e
		}
		i, ok := expPickCell(cum[:n], total, d.x2, d.x3)
		if !ok {
			return 0, false
		}
		return expPickForward(S, start[i], end[i], base[i], u, start[i])
	}
	if one {
		var base float64
		if lo > a {
			base = S[lo-1]
		}
		return expPickBackward(S, lo, hi, base, u, d.hint)
	}
	near := walk.TimeKey(times[hi-1])
	c0 := near / G
	if walk.TimeKey(times[lo])/G == c0 {
		return expPickBackward(S, lo, hi, expBaseBackward(S, times, a, lo, c0, G), u, d.hint)
	}
	var start, end [walk.MaxExpCells]uint64
	var base, cum [walk.MaxExpCells]float64
	var total float64
	n := 0
	for p := hi; p > lo && n < walk.MaxExpCells; n++ {
		c := walk.TimeKey(times[p-1]) / G
		var st uint64
		var bs float64
		if walk.TimeKey(times[lo])/G == c {
			st, bs = lo, expBaseBackward(S, times, a, lo, c, G)
		} else {
			// The first position of [lo, p) in cell c: c > the cell of
			// times[lo] >= 0, so c*G-1 does not wrap.
			st = gallopUpperBack(times, lo, p, walk.KeyTime(c*G-1))
		}
		var f float64
		if n == 0 {
			f = walk.DetExp(float64(G-1-(near-c*G)) / s.alg.Time.Scale)
		} else {
			f = walk.DetExp(-float64(near-(c*G+G-1)) / s.alg.Time.Scale)
		}
		if f == 0 {
			break
		}
		total += float64((S[p-1] - bs) * f)
		start[n], end[n], base[n], cum[n] = st, p, bs, total
		p = st
	}
	i, ok := expPickCell(cum[:n], total, d.x2, d.x3)
	if !ok {
		return 0, false
	}
	return expPickBackward(S, start[i], end[i], base[i], u, end[i]-1)
}

// expBaseForward is the forward sums' value past a window part ending at
// hi in cell c: S[hi] when position hi is in the same vertex and cell,
// else 0 (the cell's sums end there).
func expBaseForward(S []float64, times []int64, b, hi, c, G uint64) float64 {
	if hi < b && walk.TimeKey(times[hi])/G == c {
		return S[hi]
	}
	return 0
}

// expBaseBackward is the backward sums' value before a part starting at lo
// in cell c: S[lo-1] when position lo-1 is in the same vertex and cell.
func expBaseBackward(S []float64, times []int64, a, lo, c, G uint64) float64 {
	if lo > a && walk.TimeKey(times[lo-1])/G == c {
		return S[lo-1]
	}
	return 0
}

// expPickCell picks part i with probability cum-difference / total from
// (x2, x3): the first part whose cumulative mass exceeds the draw and whose
// own mass is positive, else the last part with mass (rounding). ok is
// false when no part has mass.
func expPickCell(cum []float64, total float64, x2, x3 uint32) (int, bool) {
	if !(total > 0) {
		return 0, false
	}
	if len(cum) == 1 {
		return 0, true
	}
	r := float64(unit53(x2, x3) * total)
	last, prev := -1, 0.0
	for i, c := range cum {
		if c > prev {
			last = i
			if c > r {
				return i, true
			}
		}
		prev = c
	}
	return last, last >= 0
}

// expPickForward draws a position of [lo, hi) (one cell's part) from the
// forward suffix sums: r = base + u * (S[lo] - base), and the position is
// the last k with S[k] > r (S[k] - S[k+1] is k's weight; lo when there is
// none past it), found by galloping from the guess g in [lo, hi) (lo: from
// the near end, where the mass is) toward it. S does not increase inside a
// cell, so the position does not depend on g. ok is false when the part
// weighs nothing.
func expPickForward(S []float64, lo, hi uint64, base, u float64, g uint64) (uint64, bool) {
	m := S[lo] - base
	if !(m > 0) {
		return 0, false
	}
	r := base + float64(u*m) // float64(): never an FMA
	// l: the first j in [lo+1, hi) with S[j] <= r, or hi; it is in [l, h]
	// (h == hi or S[h] <= r).
	var l, h uint64
	if g <= lo || S[g] > r {
		at, step := max(g, lo), uint64(1) // S[at] > r, or at == lo
		for {
			next := at + step
			if next >= hi {
				l, h = at+1, hi
				break
			}
			if S[next] <= r {
				l, h = at+1, next
				break
			}
			at, step = next, 2*step
		}
	} else {
		at, step := g, uint64(1) // S[at] <= r, at > lo
		for {
			if at <= lo+step {
				l, h = lo+1, at
				break
			}
			next := at - step
			if S[next] > r {
				l, h = next+1, at
				break
			}
			at, step = next, 2*step
		}
	}
	for l < h {
		mid := l + (h-l)/2
		if S[mid] <= r {
			h = mid
		} else {
			l = mid + 1
		}
	}
	return l - 1, true
}

// expPickBackward draws a position of [lo, hi) from the backward prefix
// sums: r = base + u * (S[hi-1] - base), and the position is the first k
// with S[k] > r (hi-1 when there is none before it), found by galloping
// from the guess g in [lo, hi) (hi-1: from the near end) toward it.
func expPickBackward(S []float64, lo, hi uint64, base, u float64, g uint64) (uint64, bool) {
	m := S[hi-1] - base
	if !(m > 0) {
		return 0, false
	}
	r := base + float64(u*m)
	// l: the first j in [lo, hi-1) with S[j] > r, or hi-1; it is in
	// [l, h] (h == hi-1 or S[h] > r).
	var l, h uint64
	if g >= hi-1 || S[g] > r {
		at, step := min(g, hi-1), uint64(1) // S[at] > r, or at == hi-1
		for {
			if at < lo+step {
				l, h = lo, at
				break
			}
			next := at - step
			if S[next] <= r {
				l, h = next+1, at
				break
			}
			at, step = next, 2*step
		}
	} else {
		at, step := g, uint64(1) // S[at] <= r, at < hi-1
		for {
			next := at + step
			if next >= hi-1 {
				l, h = at+1, hi-1
				break
			}
			if S[next] > r {
				l, h = at+1, next
				break
			}
			at, step = next, 2*step
		}
	}
	for l < h {
		mid := l + (h-l)/2
		if S[mid] > r {
			h = mid
		} else {
			l = mid + 1
		}
	}
	return l, true
}
