package cpu

import (
	"unsafe"

	"github.com/walkstage/walkstage/walk"
)

// The ring walker on a live graph's snapshot (walkRingOverlay): the ring's
// slots and its vectorised Philox (ring.go), with two more slot states for
// a walk standing on a vertex that has a delta. Each round computes the
// words of draw 0 of every slot's next step, as the ring does; a slot then
// goes one state further and prefetches what the next state reads:
//
//   - slotChosen: the walk stands on a vertex without a delta, its offsets
//     prefetched. Draw the base edge with the round's words (the base's
//     draw of walk/draws.go, exactly what overlayStep takes for such a
//     vertex) and prefetch its entry: slotDrawn.
//   - slotDrawn: resolve the drawn entry to the next vertex. Without a
//     delta there, on the fused table, draw its next step at once (the
//     entry holds its edge range, as in roundFused); on the other tables
//     prefetch its offsets (slotChosen). With a delta: slotDelta.
//   - slotDelta: the walk stands on a vertex with a delta, its DeltaVertex
//     and offsets prefetched. Take the first attempt of overlayStep (PPR's
//     stop from the round's words, the attempt's draw 1 computed here) and
//     prefetch the base entry or appended edge it names: slotDeltaDrawn.
//   - slotDeltaDrawn: decide as walkOverlayUnit does; a dead or unkept edge
//     goes on in overlayAttempts from attempt 1, at once (rare: a delete or
//     a weight rejection).
//
// So the walks are overlayStep's word for word, and only the order in which
// the steps of different walks are taken changes. Walks start in slotChosen
// or slotDelta with their first step undrawn, one round later than on the
// ring, which keeps starting them simple: no batch draws.
const (
	slotDelta      = 4
	slotDeltaDrawn = 5
)

// ovRing is one call of walkRingOverlay.
type ovRing struct {
	s       *stepper
	r       *ring
	x       *walk.DeltaIndex
	starts  []uint32
	firstID uint64
	buf     []uint32
	lens    []uint32
	stride  int
	length  uint32
	off     []uint64
	tgt     []uint32
	tab     []aliasEntry // packed alias entries of a weighted walk without the fused table
	fused   []fusedEntry // set: base edges are drawn from the fused table
	keep    bool         // uniform walk on the fused table: an entry's keep is the edge's target
	baseV   uint32
	ppr     bool
	stopT   uint64
	next    int // next walk of the unit to start
	live    int // slots holding a walk
	// Per slot: the DeltaVertex and vertex of a walk in slotDelta or
	// slotDeltaDrawn, what its first attempt drew (ovBaseD or ovDelta) and
	// the draw that attempt took (1 for PPR).
	dv    [ringSlots]*walk.DeltaVertex
	cur   [ringSlots]uint32
	kind  [ringSlots]uint8
	first [ringSlots]uint32
	// A block's prefetches: offsets rows, base entries (fused, alias or
	// target), addresses (DeltaVertex, appended edges).
	pfOff, pfEnt, pfAddr [8]uint64
	nOff, nEnt, nAddr    int
}

// walkRingOverlay is walkRing for a job on an overlay (s.ov, s.ovIdx).
func (s *stepper) walkRingOverlay(r *ring, starts []uint32, firstID uint64, buf, lens []uint32) {
	r.state = [ringSlots]uint8{}
	w := ovRing{s: s, r: r, x: s.ovIdx, starts: starts, firstID: firstID, buf: buf, lens: lens,
		stride: s.alg.Length + 1, length: uint32(s.alg.Length), off: s.off, tgt: s.tgt, tab: s.alias,
		fused: s.fused, keep: s.sampler == walk.StepperUniform, baseV: uint32(len(s.off) - 1),
		ppr: s.alg.Kind == walk.PPR, stopT: s.stopT}
	for b := 0; b < ringSlots; b += 8 {
		for i := b; i < b+8; i++ {
			if !w.start(i) {
				break
			}
		}
		w.flush()
	}
	for w.live > 0 {
		for h := range r.words {
			philox64((*[ringHalf]uint32)(r.idLo[h*ringHalf:]), (*[ringHalf]uint32)(r.idHi[h*ringHalf:]),
				(*[ringHalf]uint32)(r.ctr[h*ringHalf:]), 0, s.k0, s.k1, &r.words[h])
		}
		for b := 0; b < ringSlots; b += 8 {
			w.round(b)
		}
	}
}

// start gives slot i, empty, the unit's next walk that takes a step, and
// reports whether there was one. A walk of length 0 ends at its start.
func (w *ovRing) start(i int) bool {
	r := w.r
	for w.next < len(w.starts) {
		k := w.next
		w.next++
		v := w.starts[k]
		w.buf[k*w.stride] = v
		w.lens[k] = 1
		if w.length == 0 {
			continue
		}
		id := w.firstID + uint64(k)
		r.walk[i], r.pos[i], r.step[i] = int32(k), k*w.stride, 0
		r.idLo[i], r.idHi[i] = uint32(id), uint32(id>>32)
		w.live++
		w.arrive(i, v)
		return true
	}
	r.state[i] = slotEmpty
	return false
}

// finish ends slot i's walk after its current vertex and starts the next.
func (w *ovRing) finish(i int) {
	r := w.r
	w.lens[r.walk[i]] = r.step[i] + 1
	w.live--
	w.start(i)
}

// arrive puts slot i's walk on vertex v, whose step is r.step[i], undrawn:
// slotDelta or slotChosen, its lines prefetched. The next round's words are
// that step's draw 0.
func (w *ovRing) arrive(i int, v uint32) {
	r := w.r
	r.ctr[i], r.idx[i] = r.step[i], uint64(v)
	if w.x.Has(v) {
		dv := w.x.Vertex(v)
		w.dv[i], w.cur[i], r.state[i] = dv, v, slotDelta
		w.pfAddr[w.nAddr] = uint64(uintptr(unsafe.Pointer(dv)))
		w.nAddr++
	} else {
		r.state[i] = slotChosen
	}
	if v < w.baseV {
		w.pfOff[w.nOff] = uint64(v)
		w.nOff++
	}
}

// drawBase draws slot i's step from a vertex without a delta whose edges
// are [a, a+d), with the round's words (the base step of draws.go).
func (w *ovRing) drawBase(i int, a, d uint64) {
	r := w.r
	words := &r.words[i/ringHalf]
	col, coin := words[0][i%ringHalf], words[1][i%ringHalf]
	if w.ppr {
		if uint64(col) < w.stopT {
			w.finish(i)
			return
		}
		col, coin = coin, words[2][i%ringHalf]
	}
	if d == 0 {
		w.finish(i)
		return
	}
	x := a + uint64(walk.Bounded(col, uint32(d)))
	r.idx[i], r.coin[i], r.state[i], r.ctr[i] = x, coin, slotDrawn, r.step[i]+1
	w.pfEnt[w.nEnt] = x
	w.nEnt++
}

// entryTarget is the target the base entry e draws with coin.
func (w *ovRing) entryTarget(e uint64, coin uint32) uint32 {
	switch {
	case w.fused != nil:
		en := &w.fused[e]
		var t uint32
		if !w.keep {
			t = en.pick(coin)
		}
		return en.to[t&1].v
	case w.tab != nil:
		en := &w.tab[e]
		if walk.Unit24(coin) < en.prob {
			return en.keep
		}
		return en.alt
	default:
		return w.tgt[e]
	}
}

// took writes next as slot i's next vertex (ok false: the walk ends here)
// and moves the walk on.
func (w *ovRing) took(i int, next uint32, ok bool) bool {
	r := w.r
	if !ok {
		w.finish(i)
		return false
	}
	r.step[i]++
	r.pos[i]++
	w.buf[r.pos[i]] = next
	if r.step[i] == w.length {
		w.finish(i)
		return false
	}
	return true
}

// round visits slots b..b+7 and takes each one state further.
func (w *ovRing) round(b int) {
	r := w.r
	s := w.s
	for i := b; i < b+8; i++ {
		switch r.state[i] {
		case slotEmpty:
		case slotChosen:
			v := r.idx[i]
			a := w.off[v]
			w.drawBase(i, a, w.off[v+1]-a)
		case slotDrawn:
			var nx uint32
			var lo, deg uint64
			if w.fused != nil {
				en := &w.fused[r.idx[i]]
				var t uint32
				if !w.keep {
					t = en.pick(r.coin[i])
				}
				nx, deg, lo = en.to[t&1].v, uint64(en.to[t&1].deg), uint64(en.to[t&1].lo)
			} else {
				nx = w.entryTarget(r.idx[i], r.coin[i])
			}
			if !w.took(i, nx, true) {
				continue
			}
			if w.fused != nil && !w.x.Has(nx) {
				// The entry holds nx's edge range, and the round's
				// words are its step's draw 0 (ctr was set to it).
				w.drawBase(i, lo, deg)
				continue
			}
			w.arrive(i, nx)
		case slotDelta:
			w.deltaFirst(i)
		case slotDeltaDrawn:
			dv, c := w.dv[i], w.cur[i]
			id := w.firstID + uint64(r.walk[i])
			next, ok := uint32(0), true
			if w.kind[i] == ovBaseD {
				next = w.entryTarget(r.idx[i], r.coin[i])
				if dv.BaseDead(next) {
					next, ok = s.overlayAttempts(id, r.step[i], c, dv, w.first[i], 1)
				}
			} else {
				de := dv.Edges[r.idx[i]]
				if s.weighted && walk.Unit24(r.coin[i])*dv.MaxWeight >= de.Weight || dv.DeltaDead(int(r.idx[i])) {
					next, ok = s.overlayAttempts(id, r.step[i], c, dv, w.first[i], 1)
				} else {
					next = de.Target
				}
			}
			if w.took(i, next, ok) {
				w.arrive(i, next)
			}
		}
	}
	w.flush()
}

// deltaFirst takes the first attempt of slot i's step from a vertex with a
// delta (overlayStep's, with the round's words as draw 0).
func (w *ovRing) deltaFirst(i int) {
	r := w.r
	s := w.s
	dv, c := w.dv[i], w.cur[i]
	if dv.Live == 0 {
		w.finish(i)
		return
	}
	words := &r.words[i/ringHalf]
	x0, x1, x2 := words[0][i%ringHalf], words[1][i%ringHalf], words[2][i%ringHalf]
	id := w.firstID + uint64(r.walk[i])
	first := uint32(0)
	if w.ppr {
		if uint64(x0) < w.stopT {
			w.finish(i)
			return
		}
		first = 1
		x0, x1, x2, _ = s.draw(id, r.step[i], 1)
	}
	var a, b uint64
	if c < w.baseV {
		a, b = w.off[c], w.off[c+1]
	}
	wb, wd := dv.BaseWeight, float64(len(dv.Edges))*float64(dv.MaxWeight)
	if !s.weighted {
		wb, wd = float64(b-a), float64(len(dv.Edges))
	}
	w.first[i] = first
	switch {
	case float64(x0)*(1.0/(1<<32))*(wb+wd) < wb:
		if a == b {
			break
		}
		e := a + uint64(walk.Bounded(x1, uint32(b-a)))
		w.kind[i], r.idx[i], r.coin[i], r.state[i] = ovBaseD, e, x2, slotDeltaDrawn
		w.pfEnt[w.nEnt] = e
		w.nEnt++
		return
	case len(dv.Edges) == 0:
	default:
		k := walk.Bounded(x1, uint32(len(dv.Edges)))
		w.kind[i], r.idx[i], r.coin[i], r.state[i] = ovDelta, uint64(k), x2, slotDeltaDrawn
		w.pfAddr[w.nAddr] = uint64(uintptr(unsafe.Pointer(&dv.Edges[k])))
		w.nAddr++
		return
	}
	// The attempt drew nothing (an empty side): go on from attempt 1.
	next, ok := s.overlayAttempts(id, r.step[i], c, dv, first, 1)
	if w.took(i, next, ok) {
		w.arrive(i, next)
	}
}

// flush issues a block's prefetches.
func (w *ovRing) flush() {
	if w.nOff > 0 {
		prefetchRows(unsafe.Pointer(&w.off[0]), w.pfOff[:w.nOff], 8, 16)
	}
	if w.nEnt > 0 {
		switch {
		case w.fused != nil:
			prefetchRows(unsafe.Pointer(&w.fused[0]), w.pfEnt[:w.nEnt], unsafe.Sizeof(w.fused[0]), unsafe.Sizeof(w.fused[0]))
		case w.tab != nil:
			prefetchRows(unsafe.Pointer(&w.tab[0]), w.pfEnt[:w.nEnt], unsafe.Sizeof(w.tab[0]), unsafe.Sizeof(w.tab[0]))
		default:
			prefetchRows(unsafe.Pointer(&w.tgt[0]), w.pfEnt[:w.nEnt], 4, 4)
		}
	}
	if w.nAddr > 0 {
		prefetchRows(nil, w.pfAddr[:w.nAddr], 1, unsafe.Sizeof(walk.DeltaVertex{}))
	}
	w.nOff, w.nEnt, w.nAddr = 0, 0, 0
}
