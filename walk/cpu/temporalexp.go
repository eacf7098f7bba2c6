package cpu

import (
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
}

// maxExpTables bounds the tables the CPU engine keeps (8 bytes an edge
// each): a run with a third scale drops the least recently used.
const maxExpTables = 2

// expSums returns the cell sums for alg's exponential bias, building them
// (on the engine's workers) the first time this scale, direction and
// weighting is asked for.
func (e *Engine) expSums(alg walk.Algorithm) []float64 {
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
		e.recordBuild(t0, func() { t.sums = s })
	})
	return t.sums
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

// expStep is the exponential bias's draw (temporal.go's specification) on
// window [lo, hi) of the time order [a, b): the window's cells from its
// near end, each cell's part weighed by its sums times the cell's factor to
// the near end, a part drawn by (x2, x3) when there are more than one, and
// a position in it by (x0, x1) through the sums. ok is false when the
// window's sums are zero (the caller's exact scan decides).
func (s *stepper) expStep(id uint64, step uint32, a, b, lo, hi uint64) (uint64, bool) {
	times, S, G := s.tmp.times, s.tmp.expSums, s.tmp.expCell
	x0, x1, x2, x3 := s.draw(id, step, 0)
	u := unit53(x0, x1)
	if !s.alg.Time.Backward {
		near := walk.TimeKey(times[lo])
		c0 := near / G
		if walk.TimeKey(times[hi-1])/G == c0 {
			return expPickForward(S, lo, hi, expBaseForward(S, times, b, hi, c0, G), u)
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
		i, ok := expPickCell(cum[:n], total, x2, x3)
		if !ok {
			return 0, false
		}
		return expPickForward(S, start[i], end[i], base[i], u)
	}
	near := walk.TimeKey(times[hi-1])
	c0 := near / G
	if walk.TimeKey(times[lo])/G == c0 {
		return expPickBackward(S, lo, hi, expBaseBackward(S, times, a, lo, c0, G), u)
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
	i, ok := expPickCell(cum[:n], total, x2, x3)
	if !ok {
		return 0, false
	}
	return expPickBackward(S, start[i], end[i], base[i], u)
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
// the last k with S[k] > r (S[k] - S[k+1] is k's weight), found by
// galloping from lo, where the mass is. ok is false when the part weighs
// nothing.
func expPickForward(S []float64, lo, hi uint64, base, u float64) (uint64, bool) {
	m := S[lo] - base
	if !(m > 0) {
		return 0, false
	}
	r := base + float64(u*m) // float64(): never an FMA
	// First j in [lo+1, hi) with S[j] <= r (S does not increase), or hi.
	at, step := lo, uint64(1) // S[at] > r, or at == lo
	l, h := lo+1, hi
	for {
		next := at + step
		if next >= hi {
			l = at + 1
			break
		}
		if S[next] <= r {
			l, h = at+1, next
			break
		}
		at, step = next, 2*step
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
// with S[k] > r, found by galloping down from hi-1.
func expPickBackward(S []float64, lo, hi uint64, base, u float64) (uint64, bool) {
	m := S[hi-1] - base
	if !(m > 0) {
		return 0, false
	}
	r := base + float64(u*m)
	// First j in [lo, hi-1) with S[j] > r (S does not decrease), or hi-1.
	at, step := hi-1, uint64(1) // S[at] > r, or at == hi-1
	l, h := lo, hi-1
	for {
		if at < lo+step {
			h = at
			break
		}
		next := at - step
		if S[next] <= r {
			l, h = next+1, at
			break
		}
		at, step = next, 2*step
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
