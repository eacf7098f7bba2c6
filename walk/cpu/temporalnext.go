package cpu

import "unsafe"

// temporalExpGroup is how many walks walkTemporalExpGroup advances
// together: the lines a walk's visit prefetches have the other walks'
// visits to arrive, and the group's draws are one philox64 call.
const temporalExpGroup = 64

// walkTemporalExpGroup is walkTemporalGroup for the exponential bias on
// records whose nx are filled (expTable.next). A step after the first is
// bounded by the time of the record it took, and that record's nx is the
// window's near bound in the next vertex's time order, so the step needs
// no search for it: the record names both the next vertex and where its
// window starts. A step is then one round of two loops over the group,
// where walkTemporalGroup's took six phases:
//
//  1. each walk's window (its vertex's end from vertRec, or the gap's
//     search from the near end), the draw's words and its guess
//     (expHintFrom with the vertex's far time); then the prefetch of the
//     four lines around the guess, with the sums past the window's far end
//     (forward, gap) or before it (backward) and the far end's time where
//     the window may span cells;
//  2. each walk's draw (expDrawn), whose record gives the target, the time
//     and the next window's near bound; then the prefetch of what the next
//     step's first loop reads: the vertex's two vertRec and the two
//     records at the near end.
//
// Each walk's prefetches are issued as it is visited (prefetch4), the
// group's other walks' visits before their lines are read; issued for the
// whole group at once, a hundred lines and more fill the line-fill buffers
// and stall the loop that issues them. The first step, when bounded by a
// start time, searches its window as walkTemporalGroup does (coarseRange,
// recWindow), unprefetched. The windows, the words and the draws are those
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
		active [G]int    // indexes of the walks still going
		idx    [G]uint64
		win    [G][4]uint64 // a, b, lo, hi
		ed     [G]expDraw
		idLo   [G]uint32 // the walks' Philox counters: id, step
		idHi   [G]uint32
		ctr    [G]uint32
		words  [4][G]uint32
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
	rBase := uintptr(unsafe.Pointer(&R[0]))
	vBase := uintptr(unsafe.Pointer(&verts[0]))
	// recAt is the address of record k's byte off (k may lie outside R:
	// the addresses are only prefetched).
	recAt := func(k uint64, off uintptr) uintptr { return rBase + uintptr(k)*rs + off }
	for i, k := range active[:live] {
		idx[i] = uint64(cur[k])
	}
	prefetchRows(unsafe.Pointer(&verts[0]), idx[:live], vs, 2*vs)
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
			v := cur[k]
			a, b := verts[v].a, verts[v+1].a
			lo, hi := a, b
			switch {
			case b == a:
			case fromRec && !back:
				lo = nx[k]
				if tp.HasMaxGap {
					hi = recTimeFrom(R, lo, b, satAdd(t[k], tp.MaxGap), true, b)
				}
			case fromRec:
				hi = nx[k]
				if tp.HasMaxGap {
					lo = recTimeFrom(R, a, hi, satAdd(t[k], -tp.MaxGap), false, hi)
				}
			case tp.HasStart:
				fa, fb, g := coarseRange(s.tmp.coarse, a, b, t[k], back)
				lo, hi = s.recWindow(a, b, t[k], fa, fb, g)
			}
			win[k] = [4]uint64{a, b, lo, hi}
			if lo == hi {
				continue
			}
			d := &ed[k]
			d.x0, d.x1, d.x2, d.x3 = words[0][k], words[1][k], words[2][k], words[3][k]
			u := unit53(d.x0, d.x1)
			switch {
			case !back && hi == b:
				d.hint = s.expHintFrom(s.tmp.rec, lo, hi, u, verts[v].far, b-1-lo)
			case back && lo == a:
				d.hint = s.expHintFrom(s.tmp.rec, lo, hi, u, verts[v].far, hi-1-a)
			default:
				d.hint = s.expHint(lo, hi, u)
			}
			if d.hint != lo && d.hint != hi-1 {
				// A guess: the lines of hint-4..hint+4, where the search
				// in the sums goes nine steps in ten (at the near end,
				// the lines asked for at the last draw serve).
				p := recAt(d.hint-4, 0)
				prefetch4(p, p+64, p+128, p+192)
			}
			// The sums past the window's far end (forward, a gap) or
			// before it (backward), and the far end's time where the
			// window may span cells.
			switch {
			case !one:
				prefetch4(recAt(lo, 0), recAt(hi-1, 0), recAt(hi, 0), recAt(lo-1, 0))
			case !back && hi < b:
				p := recAt(hi, 0)
				prefetch4(p, p, p, p)
			case back && lo > a:
				p := recAt(lo-1, 0)
				prefetch4(p, p, p, p)
			}
		}
		// The draws.
		kept := 0
		for _, k := range active[:live] {
			a, b, lo, hi := win[k][0], win[k][1], win[k][2], win[k][3]
			if lo == hi {
				continue
			}
			e, ok := s.expDrawn(s.tmp.rec, s.tmp.expCell, s.tmp.expOneCell, &ed[k], a, b, lo, hi)
			if !ok {
				// The exact scan, for a window whose sums are zero.
				if e, ok = s.temporalDraw(firstID+uint64(k), step, a, b, lo, hi); !ok {
					continue
				}
			}
			r := &R[e]
			cur[k], t[k], nx[k] = r.tgt, r.t, uint64(r.nx)
			// The next step's lines: the vertex's two entries, and the
			// two records at its window's near end (the near end's time
			// and sum, and the next one, where the draw in a window too
			// short for a guess mostly stops).
			nr := recAt(nx[k], 0)
			if back {
				nr = recAt(nx[k]-2, 0)
			}
			va := vBase + uintptr(cur[k])*vs
			prefetch4(va, va+2*vs-1, nr, nr+2*rs-1)
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
