package cpu

import (
	"math"
	"runtime"
	"sort"
	"sync"
	"time"
	"unsafe"

	"github.com/walkstage/walkstage/graph"
	"github.com/walkstage/walkstage/internal/hugemem"
	"github.com/walkstage/walkstage/internal/prefetch"
	"github.com/walkstage/walkstage/walk"
)

// timeRec is position k of the time order as a grouped temporal step
// reads it: the exponential bias's cell sum (walk.BuildExpSums; 0 in the
// records of the other biases), its edge's target and the next step's
// window bound, in 16 bytes, four to a line. A step's reads (the sums
// around the drawn position, the target it takes and where its next window
// starts) fall on a few positions close together, so one or two cache
// lines of records serve what took a line of each of four arrays (the
// sums, ByTime, Targets and the search in Times), each a miss at the hubs
// where temporal walks stay. The position's time is not in the record: it
// is Graph.Times[k] (the time order's own array), which a step reads only
// where it needs it (a gap, cells, the walk's output times, a search), so
// the records of the steps that need none are a third smaller than with
// the time in them, and the lines they touch fewer.
//
// nx is the next step's window bound: the position, in tgt's time order
// (absolute, as k is), of the first time at or after this position's time
// t (forward; backward the first after t), where a walk that takes this
// edge has its window's near end; it saves the step after this one its
// search (walkTemporalExpGroup). It is filled in the exponential bias's
// records when the graph has fewer than 2^32 edges (expTable.next), else 0.
type timeRec struct {
	s   float64
	tgt uint32
	nx  uint32
}

// timeRecords builds the records of the uniform and linear biases (no
// sums) once per engine, 16 bytes an edge outside the Go heap.
func (e *Engine) timeRecords() []timeRec {
	e.recOnce.Do(func() {
		t0 := time.Now()
		g := e.g
		rec := hugemem.Alloc[timeRec](e, int(g.NumEdges()))
		var wg sync.WaitGroup
		for _, r := range vertexRangesByEdges(g, e.cfg.workers*4) {
			wg.Add(1)
			go func() {
				defer wg.Done()
				fillTimeRecs(g, rec, r[0], r[1])
			}()
		}
		wg.Wait()
		e.recordBuild(t0, func() { e.recs = rec })
	})
	return e.recs
}

// fillTimeRecs fills the records of vertices [v0, v1), without sums.
func fillTimeRecs(g *graph.Graph, rec []timeRec, v0, v1 int) {
	for v := v0; v < v1; v++ {
		a := g.Offsets[v]
		for k := a; k < g.Offsets[v+1]; k++ {
			rec[k] = timeRec{tgt: g.Targets[a+uint64(g.ByTime[k])]}
		}
	}
}

// fillExpRecs fills the records of vertices [v0, v1) with the cell sums
// of walk.BuildExpSums, computed here as there (the same order of
// additions, the same detExp and products: TestTemporalExpSums compares
// the bits) so that no scratch table of 8 bytes an edge is needed. With
// verts (not nil) it fills verts[v] (vertRec) too and marks every nx
// unknown (noNext), for fillNextTwins and fillNext.
func fillExpRecs(g *graph.Graph, scale float64, backward, weighted bool, rec []timeRec, verts []vertRec, v0, v1 int) {
	G := walk.ExpCell(scale)
	times := g.Times
	for v := v0; v < v1; v++ {
		a, b := g.Offsets[v], g.Offsets[v+1]
		var sum float64
		var cell uint64
		for i := uint64(0); i < b-a; i++ {
			k := a + i // backward: positions in order
			if !backward {
				k = b - 1 - i // forward: from the last position down
			}
			u := walk.TimeKey(times[k])
			c := u / G
			if i == 0 || c != cell {
				sum, cell = 0, c
			}
			o := u - c*G
			if backward {
				o = G - 1 - o
			}
			x := walk.DetExp(-float64(o) / scale)
			e := a + uint64(g.ByTime[k])
			if weighted {
				x = float64(x * float64(g.Weights[e])) // float64(): never an FMA
			}
			sum += x
			rec[k] = timeRec{s: sum, tgt: g.Targets[e]}
			if verts != nil {
				rec[k].nx = noNext
			}
		}
		if verts != nil {
			verts[v] = vertRec{a: uint32(a), b: uint32(b), dens: vertDensity(times, a, b, scale)}
		}
	}
}

// noNext marks a record whose nx is not known yet while its table is built.
const noNext = math.MaxUint32

// maxTieScan bounds fillNextTwins' scan over a run of equal times: a
// longer run is left to the search.
const maxTieScan = 16

// fillNextTwins sets nx of the records of vertices [u0, u1) from their
// reverse edges, without a search: the record of u -> v at time t has its
// window bound where v's time order holds v -> u at time t, or next to it
// across a run of equal times. The reverse edges are paired in the
// adjacency's target order: v ascending, each u's edges to v are met in
// order, so a cursor per u names its next unpaired edge (the transpose of
// a CSR). A pair counts only when both edges have the same time; every
// record it does not set (a directed graph's, a multigraph's paired at
// other times, a long run of ties) keeps noNext for fillNext. inv is the
// inverse of ByTime: edge Offsets[v]+j sits at position Offsets[v]+inv[..]
// of v's time order. Each call writes only its own vertices' records, so
// calls on disjoint ranges run in parallel; each reads the whole adjacency.
func fillNextTwins(g *graph.Graph, backward bool, rec []timeRec, inv []uint32, u0, u1 int) {
	off, tgt, times := g.Offsets, g.Targets, g.Times
	// cursor[u-u0]: u's next unpaired edge, its end and its start (one
	// line of 32 bytes).
	cursor := make([][4]uint64, u1-u0)
	for u := u0; u < u1; u++ {
		cursor[u-u0] = [4]uint64{off[u], off[u+1], off[u]}
	}
	U0, U1 := uint32(u0), uint32(u1)
	last := uint64(len(tgt) - 1)
	// A batch of edges v -> u (u in [u0, u1)) goes through phases, each
	// prefetching what the next reads for the whole batch: the cursors;
	// the edges they name (target and inverse); the two records. Only the
	// cursors' advance runs in the edges' order.
	var (
		ev  [nextBatch]uint32    // v
		ei  [nextBatch]uint64    // the edge v -> u
		eu  [nextBatch]uint32    // u
		ep  [nextBatch][2]uint64 // v's and u's positions of the pair
		idx [2 * nextBatch]uint64
	)
	n := 0
	flush := func() {
		if n == 0 {
			return
		}
		for j := range n {
			idx[j] = uint64(eu[j] - U0)
		}
		prefetch.Rows(unsafe.Pointer(&cursor[0]), idx[:n], 32, 32)
		for j := range n {
			idx[j] = min(cursor[eu[j]-U0][0], last) // an exhausted cursor names the end
		}
		prefetch.Rows(unsafe.Pointer(&tgt[0]), idx[:n], 4, 4)
		prefetch.Rows(unsafe.Pointer(&inv[0]), idx[:n], 4, 4)
		for j := range n {
			idx[j] = uint64(ei[j])
		}
		prefetch.Rows(unsafe.Pointer(&inv[0]), idx[:n], 4, 4)
		m := 0
		for j := range n {
			u, v := eu[j], ev[j]
			c := &cursor[u-U0][0]
			end := cursor[u-U0][1]
			for *c < end && tgt[*c] < v { // u's edges with no reverse edge
				*c++
			}
			if *c >= end || tgt[*c] != v {
				continue
			}
			q := *c
			*c++
			ep[m] = [2]uint64{off[v] + uint64(inv[ei[j]]), cursor[u-U0][2] + uint64(inv[q])}
			ev[m] = v
			idx[m], idx[nextBatch+m] = ep[m][1], ep[m][0]
			m++
		}
		prefetch.Rows(unsafe.Pointer(&rec[0]), idx[:m], unsafe.Sizeof(timeRec{}), unsafe.Sizeof(timeRec{}))
		prefetch.Rows(unsafe.Pointer(&times[0]), idx[:m], 8, 8)
		prefetch.Rows(unsafe.Pointer(&times[0]), idx[nextBatch:nextBatch+m], 8, 8)
		for j := range m {
			a, b := off[ev[j]], off[ev[j]+1]
			pv, pu := ep[j][0], ep[j][1]
			t := times[pv]
			if times[pu] != t {
				continue
			}
			if n, ok := tieEnd(times, a, b, pv, backward); ok {
				rec[pu].nx = uint32(n)
			}
		}
		n = 0
	}
	for v := range g.NumVertices() {
		a, b := off[v], off[v+1]
		i := a
		if b-a > 16 { // targets ascend: skip to u0
			i = a + uint64(sort.Search(int(b-a), func(j int) bool { return tgt[a+uint64(j)] >= U0 }))
		}
		for ; i < b; i++ {
			u := tgt[i]
			if u < U0 {
				continue
			}
			if u >= U1 {
				break
			}
			ev[n], ei[n], eu[n] = uint32(v), i, u
			if n++; n == nextBatch {
				flush()
			}
		}
	}
	flush()
}

// tieEnd is the window bound next to position p of [a, b), whose time is
// t: forward the first position of p's run of equal times, backward the
// one past its last. ok is false when the run goes on past maxTieScan.
func tieEnd(times []int64, a, b, p uint64, backward bool) (uint64, bool) {
	t := times[p]
	if !backward {
		for range maxTieScan {
			if p == a || times[p-1] != t {
				return p, true
			}
			p--
		}
		return 0, false
	}
	for range maxTieScan {
		if p+1 == b || times[p+1] != t {
			return p + 1, true
		}
		p++
	}
	return 0, false
}

// fillInverse sets inv for vertices [v0, v1): the inverse of ByTime.
func fillInverse(g *graph.Graph, inv []uint32, v0, v1 int) {
	for v := v0; v < v1; v++ {
		a := g.Offsets[v]
		for k := a; k < g.Offsets[v+1]; k++ {
			inv[a+uint64(g.ByTime[k])] = uint32(k - a)
		}
	}
}

// nextBatch is how many records fillNext searches for at once: each search
// is a chain of misses (the target's offsets, its coarse entries, the
// entry between them, its times), and a batch takes each link for all its
// records, prefetched a phase ahead, so that their misses overlap.
const nextBatch = 32

// fillNext sets nx of the records of [p0, p1) still marked noNext: the
// window bound in the record's target's time order for a step bounded by
// the record's time, found as walkTemporalGroup's step finds it
// (coarseRange, then timeFrom from its guess) and in the same phases, a
// batch of records at a time.
func fillNext(g *graph.Graph, backward bool, rec []timeRec, coarse []int64, p0, p1 uint64) {
	times, off := g.Times, g.Offsets
	var (
		pos  [nextBatch]uint64
		idx  [2 * nextBatch]uint64
		idx2 [nextBatch]uint64
		ab   [nextBatch][2]uint64
		run  [nextBatch][3]uint64 // coarseRange's fa, fb, guess
	)
	lastT := uint64(max(len(times)-9, 0))
	for p := p0; p < p1; {
		n := 0
		for ; p < p1 && n < nextBatch; p++ {
			if rec[p].nx == noNext {
				pos[n] = p
				n++
			}
		}
		for i := range n {
			idx[i] = uint64(rec[pos[i]].tgt)
		}
		prefetch.Rows(unsafe.Pointer(&off[0]), idx[:n], 8, 16)
		m := 0
		for i := range n {
			v := rec[pos[i]].tgt
			ab[i] = [2]uint64{off[v], off[v+1]}
			if j0, j1, ok := coarseEntries(ab[i][0], ab[i][1]); ok {
				idx[m], idx[m+1] = j0, j1-1
				m += 2
			}
		}
		if m > 0 {
			prefetch.Rows(unsafe.Pointer(&coarse[0]), idx[:m], 8, 8)
			m = 0
			for i := range n {
				if j0, j1, ok := coarseEntries(ab[i][0], ab[i][1]); ok {
					idx[m] = coarseProbe(coarse, j0, j1, times[pos[i]]) - 1
					m++
				}
			}
			prefetch.Rows(unsafe.Pointer(&coarse[0]), idx[:m], 8, 24)
		}
		m = 0
		for i := range n {
			a, b := ab[i][0], ab[i][1]
			fa, fb, gs := coarseRange(coarse, a, b, times[pos[i]], backward)
			run[i] = [3]uint64{fa, fb, gs}
			if gs < b {
				idx2[m] = min(max(gs, fa+4)-4, lastT)
				m++
			}
		}
		if m > 0 {
			prefetch.Rows(unsafe.Pointer(&times[0]), idx2[:m], 8, 72)
		}
		for i := range n {
			r := &rec[pos[i]]
			r.nx = uint32(timeFrom(times, run[i][0], run[i][1], times[pos[i]], backward, run[i][2]))
		}
	}
}

// expTable is one scale's (and direction's, and weighting's) records,
// built once on first use.
type expTable struct {
	scale              float64
	backward, weighted bool
	once               sync.Once
	rec                []timeRec
	// oneCell is true when every edge time of the graph falls in one time
	// cell: a window is then never cut by a cell boundary, and a step
	// needs neither its far end's time nor a cell check.
	oneCell bool
	// next is true when the records' nx are filled (the graph has fewer
	// than 2^32 edges, so a position fits nx), and verts is then set.
	next  bool
	verts []vertRec
}

// vertRec is vertex v's time order [a, b) (Offsets[v], Offsets[v+1]; the
// table exists only for graphs of fewer than 2^32 edges) and the density
// of its times, in positions per time scale (vertDensity), for the draw's
// guess (expGuessOff). A grouped exponential step reads all three in one
// aligned line (sixteen bytes an entry), where Offsets' two entries cross
// a line one vertex in eight and the times the guess used to read were
// lines of their own: the guess of where a draw lands needs how many
// positions a scale of time spans, which the vertex's mean gives about as
// well as the window's own ends did (on R-MAT graphs with random times the
// draw lands within four positions of either guess nine steps in ten).
type vertRec struct {
	a, b uint32
	dens float64
}

// vertDensity is the positions per time scale of the time order [a, b):
// its span of positions over its span of time in scales, +Inf where the
// times are all equal (a window's weights are then equal).
func vertDensity(times []int64, a, b uint64, scale float64) float64 {
	if b-a < 2 {
		return math.Inf(1)
	}
	span := float64(times[b-1]) - float64(times[a])
	if !(span > 0) {
		return math.Inf(1)
	}
	return float64(b-a-1) / (span / scale)
}

// maxExpTables bounds the tables the CPU engine keeps (16 bytes an edge
// each): a run with a third scale drops the least recently used.
const maxExpTables = 2

// expSums returns the cell sums of alg's exponential bias, copied out of
// its records (for tests).
func (e *Engine) expSums(alg walk.Algorithm) []float64 {
	rec := e.expTable(alg).rec
	s := make([]float64, len(rec))
	for i := range rec {
		s[i] = rec[i].s
	}
	runtime.KeepAlive(e) // the records are unmapped once e is collected
	return s
}

// expTable returns the records for alg's exponential bias, building them
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
		g := e.g
		var coarse []int64
		var verts []vertRec
		next := uint64(g.NumEdges()) < math.MaxUint32
		if next {
			coarse = e.coarseIndex() // timed as its own table
			// On huge pages with the records: every step reads an entry
			// at random, which on 4 KiB pages (a heap without huge
			// pages) is a TLB miss an entry.
			verts = hugemem.Alloc[vertRec](e, g.NumVertices())
		}
		t0 := time.Now()
		// Outside the Go heap, on huge pages (hugemem.Alloc): the steps
		// read it at random, and a table of the graph's size in the heap
		// paces the collector by it. A dropped table is unmapped once e
		// is; the workers keep e alive while they walk.
		rec := hugemem.Alloc[timeRec](e, int(g.NumEdges()))
		ranges := vertexRangesByEdges(g, e.cfg.workers*4)
		var inv []uint32
		if next {
			inv = make([]uint32, g.NumEdges())
		}
		var wg sync.WaitGroup
		for _, r := range ranges {
			wg.Add(1)
			go func() {
				defer wg.Done()
				fillExpRecs(g, tp.Scale, tp.Backward, alg.Weighted, rec, verts, r[0], r[1])
				if next {
					fillInverse(g, inv, r[0], r[1])
				}
			}()
		}
		wg.Wait()
		if next {
			fillNextAll(g, tp.Backward, rec, inv, coarse, e.cfg.workers)
		}
		tlo, thi := g.TimeRange()
		G := walk.ExpCell(tp.Scale)
		one := walk.TimeKey(tlo)/G == walk.TimeKey(thi)/G
		e.recordBuild(t0, func() { t.rec, t.oneCell, t.next, t.verts = rec, one, next, verts })
	})
	return t
}

// fillNextAll sets the nx of every record still marked noNext on workers
// goroutines: from the reverse edges, then the search for the rest; one
// range a worker, as each reads the whole adjacency.
func fillNextAll(g *graph.Graph, backward bool, rec []timeRec, inv []uint32, coarse []int64, workers int) {
	var wg sync.WaitGroup
	for _, r := range vertexRangesByEdges(g, workers) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			fillNextTwins(g, backward, rec, inv, r[0], r[1])
			fillNext(g, backward, rec, coarse, g.Offsets[r[0]], g.Offsets[r[1]])
		}()
	}
	wg.Wait()
}

// timeNextRecords builds the records of the uniform and linear biases with
// their nx for direction backward (walkTemporalNextGroup), once per engine
// and direction, 16 bytes an edge outside the Go heap: nil when the graph
// has 2^32 edges or more (a position does not fit nx), whose walks take
// timeRecords and search. The targets are those of timeRecords; nx is
// built as the exponential bias's is (fillNextTwins, fillNext).
func (e *Engine) timeNextRecords(backward bool) []timeRec {
	d := 0
	if backward {
		d = 1
	}
	e.nextOnce[d].Do(func() {
		g := e.g
		if uint64(g.NumEdges()) >= math.MaxUint32 {
			return
		}
		coarse := e.coarseIndex() // timed as its own table
		t0 := time.Now()
		rec := hugemem.Alloc[timeRec](e, int(g.NumEdges()))
		inv := make([]uint32, g.NumEdges())
		var wg sync.WaitGroup
		for _, r := range vertexRangesByEdges(g, e.cfg.workers*4) {
			wg.Add(1)
			go func() {
				defer wg.Done()
				fillTimeRecs(g, rec, r[0], r[1])
				for k := g.Offsets[r[0]]; k < g.Offsets[r[1]]; k++ {
					rec[k].nx = noNext
				}
				fillInverse(g, inv, r[0], r[1])
			}()
		}
		wg.Wait()
		fillNextAll(g, backward, rec, inv, coarse, e.cfg.workers)
		e.recordBuild(t0, func() { e.nextRecs[d] = rec })
	})
	return e.nextRecs[d]
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
// window [lo, hi) of the time order [a, b) from Philox draw number draw;
// ok is false when the window's
// sums are zero (the caller's exact scan decides).
func (s *stepper) expStep(id uint64, step, draw uint32, a, b, lo, hi uint64) (uint64, bool) {
	var d expDraw
	s.expPrepare(&d, id, step, draw, lo, hi)
	return s.expDrawn(s.tmp.rec, s.tmp.times, s.tmp.expCell, s.tmp.expOneCell, &d, a, b, lo, hi)
}

// expPrepare fills d for the step of walk id on window [lo, hi) from
// Philox draw number draw (0 but for temporal Node2Vec's proposals).
func (s *stepper) expPrepare(d *expDraw, id uint64, step, draw uint32, lo, hi uint64) {
	d.x0, d.x1, d.x2, d.x3 = s.draw(id, step, draw)
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
	if hi-lo <= expHintMin {
		return s.expHintFrom(s.tmp.times, lo, hi, u, 0, 0)
	}
	coarse := s.tmp.coarse
	if !s.alg.Time.Backward {
		j := (hi - 1) / coarseSpacing
		return s.expHintFrom(s.tmp.times, lo, hi, u, coarse[j], j*coarseSpacing-lo)
	}
	j := (lo + coarseSpacing - 1) / coarseSpacing
	return s.expHintFrom(s.tmp.times, lo, hi, u, coarse[j], hi-1-j*coarseSpacing)
}

// expHintFrom is expHint with the window's far time far, span positions
// from its near end (any time of the window and its distance serve; the
// guess is better the farther it is).
func (s *stepper) expHintFrom(T []int64, lo, hi uint64, u float64, far int64, span uint64) uint64 {
	n := hi - lo
	back := s.alg.Time.Backward
	if n <= expHintMin {
		if back {
			return hi - 1
		}
		return lo
	}
	near := T[lo]
	if back {
		near = T[hi-1]
	}
	X := math.Abs(float64(far)-float64(near)) * s.tmp.invScale
	var p float64
	if !(X > 0) {
		p = (1 - u) * float64(span) // equal times: equal weights
	} else {
		var e float64
		if X < 40 {
			e = roughExp(-X)
		}
		x := X
		if y := u + (1-u)*e; y > 0 {
			x = -roughLog(y)
		}
		p = x / X * float64(span)
	}
	off := uint64(int64(min(max(p, 0), float64(n-1)))) // as expGuessOff's
	if back {
		return hi - 1 - off
	}
	return lo + off
}

// expDensHintMin is expHintMin for expGuessOff, whose guess reads no
// memory: walkTemporalExpGroup prefetches the lines around every guess and
// checks the guess (expRefineForward) before the draw, so a window a few
// lines long gains from a guess too (its search from the near end went to
// lines nothing had prefetched).
const expDensHintMin = 8

// expGuessOff is expHintFrom for a vertex whose times have dens
// positions per scale (vertDensity), as positions from the near end of a
// window of n positions: the window spans X = (n-1)/dens scales, and the
// draw's x scales from the near end are x*dens positions. Its logarithm
// and exponential are table look-ups (tableLog, tableExp), a load where
// roughLog and roughExp chained six and four floating-point operations:
// the guess was a fifth of a cached step's instructions, and the check
// moves a bad one anyway.
func expGuessOff(n uint64, u, dens float64) uint64 {
	if n <= expDensHintMin {
		return 0
	}
	span := float64(n - 1)
	X := span / dens
	var p float64
	if !(X > 0) {
		p = (1 - u) * span // equal times: equal weights
	} else {
		var e float64
		if X < 40 {
			e = tableExp(-X)
		}
		x := X
		if y := u + (1-u)*e; y > 0 {
			x = -tableLog(y)
		}
		p = x * dens
	}
	// Through int64: p is in [0, span], span < 2^53, and Go's float64 to
	// uint64 conversion is a compare and a branch around two conversions
	// (for values of 2^63 and up), where float64 to int64 is one
	// instruction; on the 16-core host the guess's loop gained about a
	// tenth from it (docs/benchmarks/cpu-engine.md, "Where the exponential
	// step's time goes").
	return uint64(int64(min(max(p, 0), span)))
}

// expTabBits is the bits of a mantissa or a fraction that tableLog and
// tableExp look up: a table of 128 entries (1 KiB, L1-resident) is
// within 0.4% of the function, under roughLog's error.
const expTabBits = 7

// lnTab[i] is ln(1+f) at the middle of the i-th of the 128 intervals of
// the mantissa f in [0, 1); exp2Tab[i] is 2^-f at the middle of the i-th
// of f's intervals. Read-only after package initialization.
var lnTab, exp2Tab = func() (ln, e2 [1 << expTabBits]float64) {
	for i := range ln {
		f := (float64(i) + 0.5) / (1 << expTabBits)
		ln[i] = math.Log1p(f)
		e2[i] = math.Exp2(-f)
	}
	return ln, e2
}()

// tableLog is ln(y) for y in (0, 1] to about 0.004: the exponent's
// multiple of ln 2 and the mantissa's top bits looked up.
func tableLog(y float64) float64 {
	b := math.Float64bits(y)
	e := float64(int64(b>>52) - 1023) // y > 0: no sign bit
	return e*math.Ln2 + lnTab[b>>(52-expTabBits)&(1<<expTabBits-1)]
}

// tableExp is e^x for x in (-40, 0] to about 0.3%: x/ln 2 in 128ths, the
// whole part the exponent and the fraction looked up.
func tableExp(x float64) float64 {
	m := uint64(-x * (math.Log2E * (1 << expTabBits))) // x <= 0: truncation is floor
	return math.Float64frombits((1023-m>>expTabBits)<<52) * exp2Tab[m&(1<<expTabBits-1)]
}

// roughExp is e^x for x in (-40, 0] to about 0.2%, for the same reason.
func roughExp(x float64) float64 {
	y := x * math.Log2E
	i := math.Floor(y)
	f := y - i // 2^y = 2^i * 2^f, f in [0, 1)
	return math.Float64frombits(uint64(int64(i)+1023)<<52) * (1 + f*(0.6565+f*0.3435))
}

// roughLog is ln(y) for y > 0 to about 0.01: a guess needs no more, and
// math.Log would cost a tenth of a step.
func roughLog(y float64) float64 {
	b := math.Float64bits(y)
	e := float64(int64(b>>52&0x7ff) - 1023)
	f := math.Float64frombits(b&(1<<52-1)|1023<<52) - 1 // y = (1+f) 2^e, f in [0, 1)
	// log2(1+f) by a cubic through its ends, error under 0.01.
	l2 := f * (1.4425449 + f*(-0.7181451+f*0.2779070))
	return (e + l2) * math.Ln2
}

// expDrawn is expStep's draw from d on window [lo, hi) of the records
// R[a:b] with their times T[a:b] (one vertex's time order with its cell
// sums for cells of width G; one when every time shares a cell): the
// window's cells from its near end, each cell's part weighed by its sums
// times the cell's factor to the near end, a part drawn by (x2, x3) when
// there are more than one, and a position in it by (x0, x1) through the
// sums. R and T are the graph's (s.tmp.rec, s.tmp.times), or a delta
// vertex's list's (overlaytemporal.go).
func (s *stepper) expDrawn(R []timeRec, T []int64, G uint64, one bool, d *expDraw, a, b, lo, hi uint64) (uint64, bool) {
	u := unit53(d.x0, d.x1)
	if !s.alg.Time.Backward {
		if one {
			var base float64
			if hi < b {
				base = R[hi].s
			}
			return expPickForward(R, lo, hi, base, u, d.hint)
		}
		near := walk.TimeKey(T[lo])
		c0 := near / G
		if walk.TimeKey(T[hi-1])/G == c0 {
			return expPickForward(R, lo, hi, expBaseForward(R, T, b, hi, c0, G), u, d.hint)
		}
		var start, end [walk.MaxExpCells]uint64
		var base, cum [walk.MaxExpCells]float64
		var total float64
		n := 0
		for p := lo; p < hi && n < walk.MaxExpCells; n++ {
			c := walk.TimeKey(T[p]) / G
			var e uint64
			var bs float64
			if walk.TimeKey(T[hi-1])/G == c {
				e, bs = hi, expBaseForward(R, T, b, hi, c, G)
			} else {
				e = gallopLower(T, p, hi, walk.KeyTime((c+1)*G))
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
			total += float64((R[p].s - bs) * f) // float64(): never an FMA, as on the GPU
			start[n], end[n], base[n], cum[n] = p, e, bs, total
			p = e
		}
		i, ok := expPickCell(cum[:n], total, d.x2, d.x3)
		if !ok {
			return 0, false
		}
		return expPickForward(R, start[i], end[i], base[i], u, start[i])
	}
	if one {
		var base float64
		if lo > a {
			base = R[lo-1].s
		}
		return expPickBackward(R, lo, hi, base, u, d.hint)
	}
	near := walk.TimeKey(T[hi-1])
	c0 := near / G
	if walk.TimeKey(T[lo])/G == c0 {
		return expPickBackward(R, lo, hi, expBaseBackward(R, T, a, lo, c0, G), u, d.hint)
	}
	var start, end [walk.MaxExpCells]uint64
	var base, cum [walk.MaxExpCells]float64
	var total float64
	n := 0
	for p := hi; p > lo && n < walk.MaxExpCells; n++ {
		c := walk.TimeKey(T[p-1]) / G
		var st uint64
		var bs float64
		if walk.TimeKey(T[lo])/G == c {
			st, bs = lo, expBaseBackward(R, T, a, lo, c, G)
		} else {
			// The first position of [lo, p) in cell c: c > the cell of
			// T[lo], which is >= 0, so c*G-1 does not wrap.
			st = gallopUpperBack(T, lo, p, walk.KeyTime(c*G-1))
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
		total += float64((R[p-1].s - bs) * f)
		start[n], end[n], base[n], cum[n] = st, p, bs, total
		p = st
	}
	i, ok := expPickCell(cum[:n], total, d.x2, d.x3)
	if !ok {
		return 0, false
	}
	return expPickBackward(R, start[i], end[i], base[i], u, end[i]-1)
}

// expBaseForward is the forward sums' value past a window part ending at
// hi in cell c: R[hi].s when position hi is in the same vertex and cell,
// else 0 (the cell's sums end there).
func expBaseForward(R []timeRec, T []int64, b, hi, c, G uint64) float64 {
	if hi < b && walk.TimeKey(T[hi])/G == c {
		return R[hi].s
	}
	return 0
}

// expBaseBackward is the backward sums' value before a part starting at lo
// in cell c: R[lo-1].s when position lo-1 is in the same vertex and cell.
func expBaseBackward(R []timeRec, T []int64, a, lo, c, G uint64) float64 {
	if lo > a && walk.TimeKey(T[lo-1])/G == c {
		return R[lo-1].s
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
// forward suffix sums: r = base + u * (R[lo].s - base), and the position is
// the last k with R[k].s > r (R[k].s - R[k+1].s is k's weight; lo when there is
// none past it), found by galloping from the guess g in [lo, hi) (lo: from
// the near end, where the mass is) toward it. S does not increase inside a
// cell, so the position does not depend on g. ok is false when the part
// weighs nothing.
func expPickForward(R []timeRec, lo, hi uint64, base, u float64, g uint64) (uint64, bool) {
	m := R[lo].s - base
	if !(m > 0) {
		return 0, false
	}
	r := base + float64(u*m) // float64(): never an FMA
	// l: the first j in [lo+1, hi) with R[j].s <= r, or hi; it is in [l, h]
	// (h == hi or R[h].s <= r).
	var l, h uint64
	if g <= lo || R[g].s > r {
		at, step := max(g, lo), uint64(1) // R[at].s > r, or at == lo
		for {
			next := at + step
			if next >= hi {
				l, h = at+1, hi
				break
			}
			if R[next].s <= r {
				l, h = at+1, next
				break
			}
			at, step = next, 2*step
		}
	} else {
		at, step := g, uint64(1) // R[at].s <= r, at > lo
		for {
			if at <= lo+step {
				l, h = lo+1, at
				break
			}
			next := at - step
			if R[next].s > r {
				l, h = next+1, at
				break
			}
			at, step = next, 2*step
		}
	}
	for l < h {
		mid := l + (h-l)/2
		if R[mid].s <= r {
			h = mid
		} else {
			l = mid + 1
		}
	}
	return l - 1, true
}

// expPickBackward draws a position of [lo, hi) from the backward prefix
// sums: r = base + u * (R[hi-1].s - base), and the position is the first k
// with R[k].s > r (hi-1 when there is none before it), found by galloping
// from the guess g in [lo, hi) (hi-1: from the near end) toward it.
func expPickBackward(R []timeRec, lo, hi uint64, base, u float64, g uint64) (uint64, bool) {
	m := R[hi-1].s - base
	if !(m > 0) {
		return 0, false
	}
	r := base + float64(u*m)
	// l: the first j in [lo, hi-1) with R[j].s > r, or hi-1; it is in
	// [l, h] (h == hi-1 or R[h].s > r).
	var l, h uint64
	if g >= hi-1 || R[g].s > r {
		at, step := min(g, hi-1), uint64(1) // R[at].s > r, or at == hi-1
		for {
			if at < lo+step {
				l, h = lo, at
				break
			}
			next := at - step
			if R[next].s <= r {
				l, h = next+1, at
				break
			}
			at, step = next, 2*step
		}
	} else {
		at, step := g, uint64(1) // R[at].s <= r, at < hi-1
		for {
			next := at + step
			if next >= hi-1 {
				l, h = at+1, hi-1
				break
			}
			if R[next].s > r {
				l, h = at+1, next
				break
			}
			at, step = next, 2*step
		}
	}
	for l < h {
		mid := l + (h-l)/2
		if R[mid].s > r {
			h = mid
		} else {
			l = mid + 1
		}
	}
	return l, true
}

// temporalGroup is how many walks walkTemporalGroup advances together.
const temporalGroup = 32

// walkTemporalGroup walks up to temporalGroup walks a step at a time each,
// in rounds, on the records (timeRec) and Times: a walk's step is a chain of
// dependent loads (its vertex's offsets, the coarse entries of its times,
// the run of times they leave, the draw's reads, the drawn position's
// target), so one walk alone waits on memory at every link. A round takes
// each link for every walk of the group before the next, prefetching what
// the next link reads for all of them first, so the misses of the group's
// walks overlap: the offsets; both ends of the vertex's coarse entries,
// then the first probe between them (coarseProbe); the times around the
// guess of the window's near end (coarseRange); the window and, before
// any sum is read, the draw's words: the exponential draw's guess of its
// position (expHint) and the position of an unweighted uniform or linear
// draw, whose records and times are prefetched, with the sums past the
// window's far end (exponential) or the weighted prefix sums' ends; then
// the draw, whose record gives the target. Each walk draws exactly as
// walkTemporal does (Philox keyed by walk and step): the walks are the
// same, byte for byte.
func (s *stepper) walkTemporalGroup(starts []uint32, firstID uint64, buf []uint32, times []int64, timesRow int, lens []uint32) {
	stride := s.alg.Length + 1
	n := len(starts)
	var (
		cur    [temporalGroup]uint32
		t      [temporalGroup]int64
		active [temporalGroup]int // indexes of the walks still going
		idx    [3 * temporalGroup]uint64
		idx2   [2 * temporalGroup]uint64
		idx3   [temporalGroup]uint64
		idxT   [2 * temporalGroup]uint64
		ab     [temporalGroup][2]uint64 // the vertex's time order [a, b)
		win    [temporalGroup][2]uint64 // the search's run, then the window [lo, hi)
		guess  [temporalGroup]uint64    // coarseRange's guess of the window's near end
		ed     [temporalGroup]expDraw   // the exponential draws; uniform and linear: the position in hint
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
	R := s.tmp.rec
	if len(R) == 0 {
		return // no edges: no walk takes a step
	}
	T := s.tmp.times
	const rs = unsafe.Sizeof(timeRec{})
	back := s.alg.Time.Backward
	exp := s.alg.Time.Bias == walk.TimeExponential && s.tmp.rejections > 0
	// Unweighted uniform and linear draws read no sums: drawn with the
	// window, their records are prefetched a phase ahead.
	early := !exp && !s.weighted && s.alg.Time.Bias != walk.TimeExponential
	cumw := s.tmp.cumw
	for step := uint32(0); step < uint32(s.alg.Length) && live > 0; step++ {
		bounded := step > 0 || s.alg.Time.HasStart
		for i, k := range active[:live] {
			idx[i] = uint64(cur[k])
		}
		prefetch.Rows(unsafe.Pointer(&s.off[0]), idx[:live], 8, 16)
		// The coarse search's entries: both ends of the vertex's, then
		// the first probe between them (coarseProbe), each a phase ahead.
		m := 0
		for _, k := range active[:live] {
			a, b := s.off[cur[k]], s.off[cur[k]+1]
			ab[k] = [2]uint64{a, b}
			if j0, j1, ok := coarseEntries(a, b); ok && bounded {
				idx[m], idx[m+1] = j0, j1-1
				m += 2
			}
		}
		if m > 0 {
			prefetch.Rows(unsafe.Pointer(&s.tmp.coarse[0]), idx[:m], 8, 8)
			m = 0
			for _, k := range active[:live] {
				if j0, j1, ok := coarseEntries(ab[k][0], ab[k][1]); ok && bounded {
					idx[m] = coarseProbe(s.tmp.coarse, j0, j1, t[k]) - 1
					m++
				}
			}
			prefetch.Rows(unsafe.Pointer(&s.tmp.coarse[0]), idx[:m], 8, 24)
		}
		// The coarse step; a run it narrowed is searched from its guess
		// g, whose times are prefetched; a short vertex's whole range
		// from its middle, whose first probes are.
		m, m2 := 0, 0
		for _, k := range active[:live] {
			a, b := ab[k][0], ab[k][1]
			fa, fb := a, b
			if bounded && b > a {
				var g uint64
				fa, fb, g = coarseRange(s.tmp.coarse, a, b, t[k], back)
				guess[k] = g
				switch {
				case fb-fa > 2*coarseSpacing-4 || fa == a && fb == b:
					idx[m], idx[m+1], idx[m+2] = fa, fa+(fb-fa)/2, fb-1
					m += 3
				case g < b:
					// g-4..g+4 (its first, middle and last lines): the
					// gallop's probes where the guess is up to three
					// positions off, nine steps in ten on R-MAT graphs
					// with random times (a probe outside the prefetched
					// lines is a miss that the walk waits on alone).
					idx2[m2] = max(g, fa+4) - 4
					idx[m] = g
					m2++
					m++
				}
			}
			win[k] = [2]uint64{fa, fb}
		}
		if m > 0 {
			prefetch.Rows(unsafe.Pointer(&T[0]), idx[:m], 8, 8)
		}
		if m2 > 0 {
			prefetch.Rows(unsafe.Pointer(&T[0]), idx2[:m2], 8, 9*8)
		}
		// Windows, and the draws' first reads.
		m, m2, m3, mT := 0, 0, 0, 0
		for _, k := range active[:live] {
			a, b := ab[k][0], ab[k][1]
			lo, hi := a, b
			if bounded && b > a {
				lo, hi = s.windowIn(a, b, t[k], win[k][0], win[k][1], guess[k])
			}
			win[k] = [2]uint64{lo, hi}
			if lo == hi {
				continue
			}
			d := &ed[k]
			switch {
			case exp:
				s.expPrepare(d, firstID+uint64(k), step, 0, lo, hi)
				idx[m] = d.hint
				m++
				if d.hint != lo && d.hint != hi-1 { // a guess: hint-4..hint+4 too, as above
					idx3[m3] = max(d.hint, lo+4) - 4
					m3++
				}
				if !back && hi < b {
					idx[m] = hi // the base past the far end
					m++
				} else if back && lo > a {
					idx[m] = lo - 1
					m++
				}
				idxT[mT] = d.hint // the drawn position's time, near the guess mostly
				mT++
				if !s.tmp.expOneCell { // the far end's time, for its cell
					if back {
						idxT[mT] = lo
					} else {
						idxT[mT] = hi - 1
					}
					mT++
				}
			case early:
				d.hint, _ = s.temporalDraw(firstID+uint64(k), step, a, b, lo, hi)
				idx[m] = d.hint
				m++
				idxT[mT] = d.hint
				mT++
			case cumw != nil:
				idx2[m2] = hi - 1
				m2++
				if lo > a {
					idx2[m2] = lo - 1
					m2++
				}
			}
		}
		if m > 0 {
			prefetch.Rows(unsafe.Pointer(&R[0]), idx[:m], rs, rs)
		}
		if m3 > 0 {
			prefetch.Rows(unsafe.Pointer(&R[0]), idx3[:m3], rs, 9*rs)
		}
		if m2 > 0 {
			prefetch.Rows(unsafe.Pointer(&cumw[0]), idx2[:m2], 8, 8)
		}
		if mT > 0 {
			prefetch.Rows(unsafe.Pointer(&T[0]), idxT[:mT], 8, 8)
		}
		// Draws.
		kept := 0
		for _, k := range active[:live] {
			a, b, lo, hi := ab[k][0], ab[k][1], win[k][0], win[k][1]
			if lo == hi {
				continue
			}
			var e uint64
			ok := true
			switch {
			case early:
				e = ed[k].hint
			case exp:
				e, ok = s.expDrawn(s.tmp.rec, s.tmp.times, s.tmp.expCell, s.tmp.expOneCell, &ed[k], a, b, lo, hi)
			default:
				ok = false
			}
			if !ok {
				// Weighted uniform and linear draws, and the exact scan
				// for an exponential window whose sums are zero.
				if e, ok = s.temporalDraw(firstID+uint64(k), step, a, b, lo, hi); !ok {
					continue
				}
			}
			cur[k], t[k] = R[e].tgt, T[e]
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
