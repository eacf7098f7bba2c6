package cpu

import (
	"math"
	"unsafe"

	"github.com/walkstage/walkstage/internal/prefetch"
	"github.com/walkstage/walkstage/walk"
)

// temporalExpGroup is how many walks walkTemporalExpGroup advances
// together: the lines a walk's visit prefetches have the other walks'
// visits to arrive, and the group's draws are one philox64 call.
const temporalExpGroup = 64

// walkTemporalExpGroup is walkTemporalGroup for the exponential bias on
// records whose nx are filled (expTable.next). A step after the first is
// bounded by the time of the record it took, and that record's nx is the
// window's near bound in the next vertex's time order, so the step needs
// no search for it: the record names both the next vertex and where its
// window starts. A step is then one round of two loops over the group (three
// for a forward draw in one cell), where walkTemporalGroup's took six phases:
//
//  1. each walk's window (its vertex's end from vertRec, or the gap's
//     search from the near end), the draw's words and its guess
//     (expGuessOff with the vertex's density, so no time is read); then
//     the prefetch of the three lines around the guess, with the sums past
//     the window's far end (forward, gap) or before it (backward) and the
//     window's end times where it may span cells. For a forward draw in one cell (the bench's case) the guess is
//     expGuessOff's for every window of more than expDensHintMin
//     positions, and the lines prefetched are its neighbours' in the
//     window (expGuessSpan);
//  2. forward one-cell draws only: each walk's check of its guess against
//     the sums at its neighbours' ends (expGuessHolds); a guess that fails
//     moves toward the drawn position (expRefineForward) and its new
//     neighbours are prefetched, so that the draw's search no longer
//     gallops through lines nothing prefetched;
//  3. each walk's draw (expDrawn; a checked guess's by expCountForward),
//     whose record gives the target and the
//     next window's near bound; then the prefetch of what the next step's
//     first loop and draw read first: the vertex's vertRec and the two
//     records at the near end.
//
// A step reads a time only where it needs one: a gap's search needs the
// bound, cells their ends' times, and a walk with output times its steps'.
// The drawn position's time is then prefetched at the draw and read at the
// walk's next visit (pend), and a step without any of these reads no time
// at all: records and vertRec are all its lines.
//
// Each walk's prefetches are issued as it is visited (prefetch.Lines4), the
// group's other walks' visits before their lines are read; issued for the
// whole group at once, a hundred lines and more fill the line-fill buffers
// and stall the loop that issues them. The first step, when bounded by a
// start time, searches its window as walkTemporalGroup does (coarseRange,
// windowIn), unprefetched. The windows, the words and the draws are those
// of walkTemporal: the walks are the same, byte for byte
// (TestTemporalGroupMatchesOneWalk).
func (s *stepper) walkTemporalExpGroup(starts []uint32, firstID uint64, buf []uint32, times []int64, timesRow int, lens []uint32) {
	const G = temporalExpGroup
	stride := s.alg.Length + 1
	n := len(starts)
	var (
		cur    [G]uint32
		t      [G]int64
		nx     [G]uint64 // the window's near bound, from the record taken last
		pend   [G]uint64 // the record taken last, whose time t is not read yet
		active [G]int    // indexes of the walks still going
		idx    [G]uint64
		win    [G][4]uint64 // a, b, lo, hi
		ed     [G]expDraw
		dens   [G]float64 // the vertex's density (vertRec), for the guess's check
		// in: the check found the drawn position among the guess's
		// neighbours, with rv the draw's sum there (expCountForward).
		in    [G]bool
		rv    [G]float64
		idLo  [G]uint32 // the walks' Philox counters: id, step
		idHi  [G]uint32
		ctr   [G]uint32
		words [4][G]uint32
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
		id := firstID + uint64(k)
		idLo[k], idHi[k] = uint32(id), uint32(id>>32)
	}
	live := n
	R := s.tmp.rec
	if len(R) == 0 {
		return // no edges: no walk takes a step
	}
	const rs, vs = unsafe.Sizeof(timeRec{}), unsafe.Sizeof(vertRec{})
	tp := &s.alg.Time
	back := tp.Backward
	verts := s.tmp.expVerts
	one := s.tmp.expOneCell
	T := s.tmp.times
	// refine: forward draws in one cell, whose guesses are checked before
	// the draws (expRefineForward).
	refine := one && !back
	// needT: the steps after the first read their bound t (a gap), or
	// write it out.
	needT := tp.HasMaxGap || times != nil
	// settle reads walk k's time pending from its last draw.
	settle := func(k int) {
		t[k] = T[pend[k]]
		if times != nil {
			times[(timesRow+k)*stride+int(lens[k])-1] = t[k]
		}
	}
	rBase := uintptr(unsafe.Pointer(&R[0]))
	vBase := uintptr(unsafe.Pointer(&verts[0]))
	tBase := uintptr(unsafe.Pointer(&T[0]))
	// recAt is the address of record k (k may lie outside R: the
	// addresses are only prefetched).
	recAt := func(k uint64) uintptr { return rBase + uintptr(k)*rs }
	for i, k := range active[:live] {
		idx[i] = uint64(cur[k])
	}
	prefetch.Rows(unsafe.Pointer(&verts[0]), idx[:live], vs, vs)
	for step := uint32(0); step < uint32(s.alg.Length) && live > 0; step++ {
		fromRec := step > 0 // t is a record's time, nx its window bound
		// Every walk's draw (id, step, 0).
		for i := range ctr {
			ctr[i] = step
		}
		philox64(&idLo, &idHi, &ctr, 0, s.k0, s.k1, &words)
		// The windows, the draws' words and guesses; each walk's lines
		// for its draw are prefetched as it is visited, the group's other
		// walks' visits before its draw.
		for _, k := range active[:live] {
			if fromRec && needT {
				settle(k)
			}
			v := cur[k]
			vr := &verts[v]
			a, b := uint64(vr.a), uint64(vr.b)
			lo, hi := s.nextWindow(a, b, nx[k], t[k], fromRec)
			win[k] = [4]uint64{a, b, lo, hi}
			if lo == hi {
				continue
			}
			d := &ed[k]
			d.x0, d.x1, d.x2, d.x3 = words[0][k], words[1][k], words[2][k], words[3][k]
			// From the near end: forward, lo + off; backward, hi-1 - off.
			if off := expGuessOff(hi-lo, unit53(d.x0, d.x1), vr.dens); back {
				d.hint = hi - 1 - off
			} else {
				d.hint = lo + off
			}
			if refine {
				// The lines of the guess's neighbours in the window, which
				// the check reads at its ends and the draw's search reads
				// nine steps in ten.
				dens[k] = vr.dens
				wl, wh := expGuessSpan(lo, hi, d.hint)
				p, e := recAt(wl), recAt(wh)+rs-1
				prefetch.Lines4(p, min(p+64, e), min(p+128, e), e)
			} else if d.hint != lo && d.hint != hi-1 {
				// A guess: the lines of hint-4..hint+4, where the search
				// in the sums goes nine steps in ten (at the near end,
				// the lines asked for at the last draw serve).
				p := recAt(d.hint - 4)
				prefetch.Lines4(p, p+64, p+128, p+9*rs-1)
			}
			// The sums past the window's far end (forward, a gap) or
			// before it (backward), and the window's end times where it
			// may span cells.
			switch {
			case !one:
				prefetch.Lines4(tBase+uintptr(lo)*8, tBase+uintptr(hi-1)*8, recAt(hi), recAt(lo-1))
			case !back && hi < b:
				p := recAt(hi)
				prefetch.Lines4(p, p, p, p)
			case back && lo > a:
				p := recAt(lo - 1)
				prefetch.Lines4(p, p, p, p)
			}
		}
		if refine {
			// The guesses' checks: a guess more than four positions off
			// (one step in eight on R-MAT graphs with random times) made
			// the draw's search gallop through lines nothing prefetched,
			// each a miss the whole group waited on. Checked against the
			// sums at the ends of its prefetched neighbours, such a guess
			// moves toward the answer, and its new neighbours are
			// prefetched for the draws' loop.
			for _, k := range active[:live] {
				lo, hi := win[k][2], win[k][3]
				if lo == hi {
					continue
				}
				d := &ed[k]
				var base float64
				if hi < win[k][1] {
					base = R[hi].s
				}
				m := R[lo].s - base
				r := base + float64(unit53(d.x0, d.x1)*m) // float64(): never an FMA, as expPickForward
				in[k], rv[k] = m > 0, r
				if wl, wh := expGuessSpan(lo, hi, d.hint); !expGuessHolds(R, lo, hi, wl, wh, r) {
					in[k] = false
					d.hint = expRefineForward(R, lo, hi, wl, wh, r, dens[k])
					wl, wh = expGuessSpan(lo, hi, d.hint)
					p, e := recAt(wl), recAt(wh)+rs-1
					prefetch.Lines4(p, min(p+64, e), min(p+128, e), e)
				}
			}
		}
		// The draws.
		kept := 0
		for _, k := range active[:live] {
			a, b, lo, hi := win[k][0], win[k][1], win[k][2], win[k][3]
			if lo == hi {
				continue
			}
			var e uint64
			var ok bool
			if refine && in[k] {
				wl, wh := expGuessSpan(lo, hi, ed[k].hint)
				e, ok = expCountForward(R, wl, wh, rv[k]), true
			} else if one && !back {
				// expDrawn's one-cell forward draw, the common case,
				// without its call.
				var base float64
				if hi < b {
					base = R[hi].s
				}
				d := &ed[k]
				e, ok = expPickForward(R, lo, hi, base, unit53(d.x0, d.x1), d.hint)
			} else {
				e, ok = s.expDrawn(s.tmp.rec, s.tmp.times, s.tmp.expCell, s.tmp.expOneCell, &ed[k], a, b, lo, hi)
			}
			if !ok {
				// The exact scan, for a window whose sums are zero.
				if e, ok = s.temporalDraw(firstID+uint64(k), step, a, b, lo, hi); !ok {
					continue
				}
			}
			r := &R[e]
			cur[k], nx[k], pend[k] = r.tgt, uint64(r.nx), e
			// The next step's lines: the vertex's entry, and the
			// two records at its window's near end (the near end's sum,
			// and the next one, where the draw in a window too short
			// for a guess mostly stops).
			nr := recAt(nx[k])
			if back {
				nr = recAt(nx[k] - 2)
			}
			va := vBase + uintptr(cur[k])*vs
			prefetch.Lines4(va, va, nr, nr+2*rs-1)
			if needT {
				p := tBase + uintptr(e)*8
				prefetch.Lines4(p, p, p, p)
			}
			buf[k*stride+int(lens[k])] = cur[k]
			lens[k]++
			active[kept] = k
			kept++
		}
		live = kept
	}
	if needT {
		// The last step's times; a walk whose window closed settled its
		// own at that visit.
		for _, k := range active[:live] {
			settle(k)
		}
	}
}

// nextWindow is the window [lo, hi) of a step from the vertex whose time
// order is [a, b): after the first step (fromRec) its near end is nx, the
// bound of the record the walk took last, whose time t bounds a gap's
// far end (searched from the near end); a first step is bounded by the
// start time, when given, and searched as walkTemporalGroup searches.
func (s *stepper) nextWindow(a, b, nx uint64, t int64, fromRec bool) (lo, hi uint64) {
	tp := &s.alg.Time
	lo, hi = a, b
	switch {
	case b == a:
	case fromRec && !tp.Backward:
		lo = nx
		if tp.HasMaxGap {
			hi = upperTime(s.tmp.times, lo, b, satAdd(t, tp.MaxGap))
		}
	case fromRec:
		hi = nx
		if tp.HasMaxGap {
			lo = lowerTime(s.tmp.times, a, hi, satAdd(t, -tp.MaxGap))
		}
	case tp.HasStart:
		fa, fb, g := coarseRange(s.tmp.coarse, a, b, t, tp.Backward)
		lo, hi = s.windowIn(a, b, t, fa, fb, g)
	}
	return lo, hi
}

// walkTemporalNextGroup is walkTemporalExpGroup for the uniform and linear
// biases, on their records with nx (timeNextRecords): a step after the
// first takes its window from the record it took last (nx) and its
// vertex's end from Offsets, draws its position from the window and its
// Philox words (no sums: uniform, or the linear bias's rank), and then
// reads that position's record for the target and the next nx. Where
// walkTemporalGroup searched every window (the coarse index, then the
// times), an unweighted step here reads two lines: the vertex's offsets
// and the drawn record, each prefetched at the walk's visit in the loop
// before:
//
//  1. each walk's window and draw; the drawn record's prefetch (and its
//     time's, where the step needs times: a gap, output times);
//  2. each walk's record: target and nx; the next vertex's offsets'
//     prefetch.
//
// A weighted step draws by the weights' prefix sums (cumw) as
// temporalDraw does, in a loop between the two: the first prefetches the
// sums at the window's ends, the middle one draws and prefetches the drawn
// record. The windows, words and positions are temporalDraw's, so the
// walks are walkTemporal's, byte for byte (TestTemporalGroupMatchesOneWalk).
func (s *stepper) walkTemporalNextGroup(starts []uint32, firstID uint64, buf []uint32, times []int64, timesRow int, lens []uint32) {
	const G = temporalExpGroup
	stride := s.alg.Length + 1
	n := len(starts)
	var (
		cur    [G]uint32
		t      [G]int64
		nx     [G]uint64    // the window's near bound, from the record taken last
		pick   [G]uint64    // the drawn position, noPick where the window is empty
		win    [G][4]uint64 // weighted: a, b, lo, hi
		active [G]int       // indexes of the walks still going
		idx    [G]uint64
		idLo   [G]uint32 // the walks' Philox counters: id, step
		idHi   [G]uint32
		ctr    [G]uint32
		words  [4][G]uint32
	)
	const noPick = ^uint64(0)
	bound := s.alg.Time.Bound()
	for k := range n {
		cur[k], t[k] = starts[k], bound
		buf[k*stride] = starts[k]
		if times != nil {
			times[(timesRow+k)*stride] = bound
		}
		lens[k] = 1
		active[k] = k
		id := firstID + uint64(k)
		idLo[k], idHi[k] = uint32(id), uint32(id>>32)
	}
	live := n
	R := s.tmp.rec
	if len(R) == 0 {
		return // no edges: no walk takes a step
	}
	const rs = unsafe.Sizeof(timeRec{})
	tp := &s.alg.Time
	linear := tp.Bias == walk.TimeLinear
	weighted := s.weighted
	off, T, cumw := s.off, s.tmp.times, s.tmp.cumw
	cBase := uintptr(0)
	if weighted {
		cBase = uintptr(unsafe.Pointer(&cumw[0]))
	}
	needT := tp.HasMaxGap || times != nil
	rBase := uintptr(unsafe.Pointer(&R[0]))
	oBase := uintptr(unsafe.Pointer(&off[0]))
	tBase := uintptr(unsafe.Pointer(&T[0]))
	for i, k := range active[:live] {
		idx[i] = uint64(cur[k])
	}
	prefetch.Rows(unsafe.Pointer(&off[0]), idx[:live], 8, 16)
	for step := uint32(0); step < uint32(s.alg.Length) && live > 0; step++ {
		fromRec := step > 0
		for i := range ctr {
			ctr[i] = step
		}
		philox64(&idLo, &idHi, &ctr, 0, s.k0, s.k1, &words)
		for _, k := range active[:live] {
			if fromRec && needT {
				t[k] = T[pick[k]]
				if times != nil {
					times[(timesRow+k)*stride+int(lens[k])-1] = t[k]
				}
			}
			v := cur[k]
			lo, hi := s.nextWindow(off[v], off[v+1], nx[k], t[k], fromRec)
			if lo == hi {
				pick[k] = noPick
				continue
			}
			if weighted {
				// The draw reads the weights' prefix sums at the
				// window's ends first: prefetched for the draws' loop.
				win[k], pick[k] = [4]uint64{off[v], off[v+1], lo, hi}, lo // pick: drawn in the next loop
				c := cBase + uintptr(hi-1)*8
				c0 := c
				if lo > off[v] {
					c0 = cBase + uintptr(lo-1)*8
				}
				prefetch.Lines4(c, c, c0, c0)
				continue
			}
			// temporalDraw's unweighted uniform and linear draws.
			w := hi - lo
			var e uint64
			if linear {
				e = s.near(lo, hi, linearPos(words[0][k], words[1][k], w))
			} else {
				e = lo + uint64(walk.Bounded(words[0][k], uint32(w)))
			}
			pick[k] = e
			p := rBase + uintptr(e)*rs
			q := p
			if needT {
				q = tBase + uintptr(e)*8
			}
			prefetch.Lines4(p, p, q, q)
		}
		if weighted {
			// temporalDraw's weighted draws (by the prefix sums; linear:
			// by weight, accepted by rank), then the drawn record's
			// prefetch.
			for _, k := range active[:live] {
				if pick[k] == noPick {
					continue
				}
				wk := &win[k]
				e, ok := s.temporalDraw(firstID+uint64(k), step, wk[0], wk[1], wk[2], wk[3])
				if !ok {
					pick[k] = noPick
					continue
				}
				pick[k] = e
				p := rBase + uintptr(e)*rs
				q := p
				if needT {
					q = tBase + uintptr(e)*8
				}
				prefetch.Lines4(p, p, q, q)
			}
		}
		kept := 0
		for _, k := range active[:live] {
			e := pick[k]
			if e == noPick {
				continue
			}
			r := &R[e]
			cur[k], nx[k] = r.tgt, uint64(r.nx)
			o := oBase + uintptr(cur[k])*8
			prefetch.Lines4(o, o+15, o, o)
			buf[k*stride+int(lens[k])] = cur[k]
			lens[k]++
			active[kept] = k
			kept++
		}
		live = kept
	}
	if needT {
		// The last step's times; a walk whose window closed read its own
		// at that visit.
		for _, k := range active[:live] {
			t[k] = T[pick[k]]
			if times != nil {
				times[(timesRow+k)*stride+int(lens[k])-1] = t[k]
			}
		}
	}
}

// expGuessSpan is the part of window [lo, hi) within four positions of the
// guess g: where the draw's search lands nine steps in ten.
func expGuessSpan(lo, hi, g uint64) (wl, wh uint64) {
	wl, wh = lo, min(hi-1, g+4)
	if g > lo+4 {
		wl = g - 4
	}
	return wl, wh
}

// expGuessHolds reports whether the forward one-cell draw whose sum is r
// lands in [wl, wh] of window [lo, hi), by the sums at its ends: wl is the
// near end or its sum exceeds r, and wh is the far end or its sum does not.
// A draw landing on wh itself with wh short of the far end fails it too.
func expGuessHolds(R []timeRec, lo, hi, wl, wh uint64, r float64) bool {
	return !(wh < hi-1 && R[wh].s > r || wl > lo && R[wl].s <= r)
}

// expRefineForward is a new guess for a forward one-cell draw on window
// [lo, hi) whose drawn position lies outside the neighbours [wl, wh] of
// its last guess: the last position whose sum exceeds r is past wh
// (R[wh].s > r) or before wl. It models the weights past that end as
// decaying by e^(-1/dens) a position from the neighbours' mean weight, and
// puts the guess where they add up to the mass still to cross. Any guess
// gives the same draw (expPickForward is exact): this only moves where the
// search starts.
func expRefineForward(R []timeRec, lo, hi, wl, wh uint64, r, dens float64) uint64 {
	sl, sh := R[wl].s, R[wh].s
	past := sh > r
	w := (sl - sh) / float64(max(wh-wl, 1)) // the mean weight of a neighbour
	// c is 1 - e^(-1/dens): the share of its weight a position's successor
	// lacks (0 for equal times, dens +Inf).
	c := 1.0
	if x := 1 / dens; x < 40 {
		c = 1 - roughExp(-x)
	}
	// n: how many positions past the end the mass D is crossed, the
	// weights decaying from w by c a position (past: forward; else
	// backward, growing); linear where the decay over them is slight.
	D := r - sl
	if past {
		D = sh - r
	}
	z := D * c / w
	var n float64
	switch {
	case !(w > 0):
		n = 1
	case z < 0.05:
		n = D / w
	case past && z >= 1:
		n = math.Inf(1)
	case past:
		n = -roughLog(1-z) * dens
	default:
		n = roughLog(1+z) * dens
	}
	if past {
		n = min(n, float64(hi-1-wh))
		if !(n >= 1) {
			n = 1
		}
		return wh + uint64(int64(n)) // n < 2^63: as expGuessOff's conversion
	}
	n = min(n, float64(wl-lo))
	if !(n >= 1) {
		n = 1
	}
	return wl - uint64(int64(n))
}

// expCountForward is expPickForward's position where it is known to lie in
// [wl, wh] (the check of walkTemporalExpGroup: wl is the window's near end
// or its sum exceeds r, wh is the far end or its sum does not): the sums
// do not increase inside a cell, so the positions past wl whose sums exceed
// r are the ones before the drawn position, counted without a branch on
// each (the search's branches are a misprediction or two a draw).
func expCountForward(R []timeRec, wl, wh uint64, r float64) uint64 {
	e := wl
	for j := wl + 1; j <= wh; j++ {
		e += uint64(b2u(R[j].s > r))
	}
	return e
}
