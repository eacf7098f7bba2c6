package cpu

import (
	"unsafe"

	"github.com/walkstage/walkstage/internal/prefetch"
	"github.com/walkstage/walkstage/walk"
)

// The ring walker on a live graph's snapshot (walkRingOverlay): the ring's
// slots and its vectorised Philox (ring.go), reading which vertices have a
// delta from the snapshot's flat index (walk.DeltaIndex: a bit per vertex,
// and the DeltaHead of each marked one). Each round computes the words of
// draw 0 of every slot's next step, as the ring does, and a slot goes one
// state further, prefetching what its next state reads:
//
//   - slotChosen: the walk stands on a vertex, its offsets (and DeltaHead)
//     prefetched a round ago; take the step's first draw (stepFrom).
//   - slotDrawn: resolve the base entry drawn (an alias entry or target, or
//     a fused entry, which also holds the next vertex's edge range). A
//     DeepWalk step drawn before its side was known (spec) first takes the
//     side: from the vertex's side word (walk.DeltaIndex.Sides) in
//     roundSides, which takes the step as roundFused does when the word
//     says base and the target has no tombstone bit; else from the
//     vertex's DeltaHead, a round later (slotDecide): an appended edge
//     instead of the entry (slotDeltaDrawn), or the entry. A base edge
//     drawn at a vertex with tombstones is taken unless dead. On the fused
//     table the round's words are the next vertex's draw 0: a DeepWalk step
//     is drawn at once, whether the vertex has a delta or not (by the draw
//     contract its base edge takes the same words either way), spec, its
//     side word prefetched with the entry; PPR's step is drawn at once at a
//     vertex without a delta, and at one with a delta the walk is
//     slotArrived, its DeltaHead prefetched, and the round's second pass
//     draws it. On the other tables the walk waits a round for the offsets
//     (slotChosen).
//   - slotDecide: the head of a spec step's vertex, prefetched a round
//     ago, decides its side (the side word did not).
//   - slotDeltaDrawn: an appended edge drawn: taken if kept and not dead.
//   - slotRetry: the attempt drew a dead or unkept edge, or an empty side:
//     the next attempt is drawn (its words computed scalar), and prefetched
//     like the first.
//
// The first draw (stepFrom) of a vertex without a delta is the base's step
// of walk/draws.go, which is what overlayStep takes for it ("a vertex
// without a delta steps as on the base"); of a vertex with a delta,
// overlayStep's first attempt (PPR's stop from the round's words, its
// attempt's draw 1 computed here). An attempt that lands on a dead or
// unkept edge, or on an empty side, is followed by overlayAttempts' next
// one a round later (slotRetry), its edge prefetched as the first's was:
// called in place, overlayAttempts waited on each of its loads in turn,
// and at 3% of a weighted walk's steps (a weight rejection) took 10-15% of
// the time. After walk.MaxRejections attempts overlayScan decides, as in
// overlayAttempts. So the walks are overlayStep's word for word; only the
// order in which the steps of different walks are taken changes. Walks
// start in slotChosen, one round later than on the ring, which keeps
// starting them simple: no batch draws.
const (
	slotDeltaDrawn = 5
	// slotArrived: the walk reached a vertex with a delta through a fused
	// entry in this round's first pass (PPR, or no base edges), its edge
	// range known; the second pass draws its step with the round's words.
	slotArrived = 6
	slotRetry   = 7
	// slotDecide: a step drawn at a vertex with a delta whose side word
	// did not decide its side (roundSides): the head, prefetched a round
	// ago, decides it (decideHead), then the base entry is resolved.
	slotDecide = 8
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
	// Per slot, for a step drawn at a vertex with a delta: the vertex,
	// its delta's position in the index, and the draw its first attempt
	// took (1 for PPR).
	cur  [ringSlots]uint32
	rank [ringSlots]int32
	// dead: the tombstone bits (DeltaHead.DeadBits) of the vertex whose
	// base edge a slot drew, 0 where it has none or no delta: a step
	// checks the edge's target against them without reading the head
	// again.
	dead  [ringSlots]uint64
	first [ringSlots]uint32
	// The attempt a slot's step at a vertex with a delta drew, or draws
	// next (slotRetry): draw first+att.
	att [ringSlots]uint32
	// A walk in slotArrived: its vertex's edge range; at a vertex with a
	// delta (deltaFirst on): its base edges [lo, lo+deg).
	lo, deg [ringSlots]uint64
	// A block's prefetches: offsets rows, base entries (fused, alias or
	// target), addresses (DeltaHeads, appended edges). A slot adds at
	// most one of each in a pass.
	pfOff, pfEnt, pfAddr [8]uint64
	nOff, nEnt, nAddr    int
	// The slots the round's first pass left in slotArrived, in order:
	// the second pass visits these alone (a test of every slot's state
	// there was a branch mispredicted about every other slot).
	arr  [ringSlots]uint8
	nArr int
	// A DeepWalk step drawn on the fused table before its side was
	// decided (spec 1: the vertex has a delta, its head at rank): the
	// words of the side (x2) and of an appended edge (x3).
	spec     [ringSlots]uint8
	side, x3 [ringSlots]uint32
	// sides are the snapshot's side words (walk.DeltaIndex.Sides), for
	// a DeepWalk on the fused table: a step drawn there reads its vertex's
	// word (prefetched with the entry) instead of looking the vertex up in
	// the index, and turns to the DeltaHead only when the word does not
	// say that the base edge is the step's.
	sides  []uint64
	pfSide [8]uint64
	nSide  int
}

// walkRingOverlay is walkRing for a job on an overlay (s.ov, s.ovIdx).
func (s *stepper) walkRingOverlay(r *ring, starts []uint32, firstID uint64, buf, lens []uint32) {
	r.state = [ringSlots]uint8{}
	w := ovRing{s: s, r: r, x: s.ovIdx, starts: starts, firstID: firstID, buf: buf, lens: lens,
		stride: s.alg.Length + 1, length: uint32(s.alg.Length), off: s.off, tgt: s.tgt, tab: s.alias,
		fused: s.fused, keep: s.sampler == walk.StepperUniform, baseV: uint32(len(s.off) - 1),
		ppr: s.alg.Kind == walk.PPR, stopT: s.stopT}
	if w.fused != nil && !w.ppr {
		w.sides = w.x.Sides(s.weighted, s.off)
	}
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
		// A second pass over the slots the first left in slotArrived
		// (PPR, and a vertex with a delta but no base edges), so that
		// their DeltaHeads, prefetched in the first, have come in.
		w.nArr = 0
		for b := 0; b < ringSlots; b += 8 {
			if w.sides != nil {
				w.roundSides(b)
			} else {
				w.resolve(b)
			}
		}
		for b := 0; b < w.nArr; b += 8 {
			w.arrived(w.arr[b:min(b+8, w.nArr)])
		}
	}
}

// start gives slot i, empty, the unit's next walk that takes a step, and
// reports whether there was one.
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

// arrive puts slot i's walk on vertex v, whose step is r.step[i], to draw
// it next round (slotChosen) with that step's draw 0, v's offsets and
// DeltaHead prefetched.
func (w *ovRing) arrive(i int, v uint32) {
	r := w.r
	r.ctr[i], r.idx[i], r.state[i] = r.step[i], uint64(v), slotChosen
	if v < w.baseV {
		w.pfOff[w.nOff] = uint64(v)
		w.nOff++
	}
	if k := w.x.Rank(v); k >= 0 {
		w.pfAddr[w.nAddr] = uint64(uintptr(unsafe.Pointer(w.x.Head(k))))
		w.nAddr++
	}
}

// stepFrom takes the first draw of slot i's step from v, whose base edges
// are [a, a+d) and whose delta is at k in the index (-1: none), with the
// round's words, which are the step's draw 0.
func (w *ovRing) stepFrom(i int, v uint32, k int, a, d uint64) {
	if k >= 0 {
		w.deltaFirst(i, v, k, a, a+d)
		return
	}
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
	w.drawn(i, a+uint64(walk.Bounded(col, uint32(d))), coin, 0)
}

// drawn makes slot i's step the base entry e with coin, and prefetches it.
// The next round's words are the next step's draw 0.
func (w *ovRing) drawn(i int, e uint64, coin uint32, dead uint64) {
	r := w.r
	r.idx[i], r.coin[i], r.state[i], r.ctr[i] = e, coin, slotDrawn, r.step[i]+1
	w.dead[i], w.spec[i] = dead, 0
	w.pfEnt[w.nEnt] = e
	w.nEnt++
}

// entryTarget is the target the base entry e draws with coin, off the
// fused table (resolve reads a fused entry itself, for the range too).
func (w *ovRing) entryTarget(e uint64, coin uint32) uint32 {
	if w.tab != nil {
		en := &w.tab[e]
		if walk.Unit24(coin) < en.prob {
			return en.keep
		}
		return en.alt
	}
	return w.tgt[e]
}

// took writes next as slot i's next vertex (ok false: the walk ends here)
// and reports whether the walk goes on.
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

// resolve is a round's first pass over slots b..b+7 (visit).
func (w *ovRing) resolve(b int) {
	for i := b; i < b+8; i++ {
		w.visit(i)
	}
	w.flush()
}

// roundSides is resolve for a DeepWalk on the fused table (w.sides set):
// the step of a walk drawn at a vertex before its side was known (spec),
// whose side word takes the base side, and whose base edge is not under
// a tombstone's bit, is taken here as roundFused takes a step on the base
// (visit's path for it, without its calls and stores); every other slot
// goes to visit. That step is nine in ten at a 10% delta.
func (w *ovRing) roundSides(b int) {
	r := w.r
	for i := b; i < b+8; i++ {
		if r.state[i] != slotDrawn || w.spec[i] == 0 {
			w.visit(i)
			continue
		}
		sw := w.sides[w.cur[i]]
		if uint64(w.side[i]) >= sw&walk.SideThresholdMask {
			// The head decides, a round on, prefetched now (a miss
			// where the words are not); at a vertex without a delta
			// (x2 at the cap) the base side, at once.
			w.spec[i], w.first[i], w.att[i] = 0, 0, 0
			k := w.x.Rank(w.cur[i])
			if k < 0 {
				w.dead[i] = 0
				w.resolveBase(i)
				continue
			}
			w.rank[i], r.state[i] = int32(k), slotDecide
			w.pfAddr[w.nAddr] = uint64(uintptr(unsafe.Pointer(w.x.Head(k))))
			w.nAddr++
			continue
		}
		en := &w.fused[r.idx[i]]
		var t uint32
		if !w.keep {
			t = en.pick(r.coin[i])
		}
		nx, deg, lo := en.to[t&1].v, uint64(en.to[t&1].deg), uint64(en.to[t&1].lo)
		if sw&walk.SideDead(nx) != 0 || deg == 0 {
			// Maybe a tombstone to search, or a vertex without base
			// edges: visit's path for a base edge whose side is
			// decided (the head's bits and search decide the edge).
			w.spec[i], w.first[i], w.att[i] = 0, 0, 0
			w.dead[i] = 0
			if k := w.x.Rank(w.cur[i]); k >= 0 {
				w.rank[i], w.dead[i] = int32(k), ^uint64(0)
			}
			w.visit(i)
			continue
		}
		r.step[i]++
		r.pos[i]++
		w.buf[r.pos[i]] = nx
		if r.step[i] == w.length {
			w.finish(i)
			continue
		}
		words := &r.words[i/ringHalf]
		e := lo + uint64(walk.Bounded(words[0][i%ringHalf], uint32(deg)))
		r.idx[i], r.coin[i], r.ctr[i] = e, words[1][i%ringHalf], r.step[i]+1
		w.side[i], w.x3[i] = words[2][i%ringHalf], words[3][i%ringHalf]
		w.cur[i], w.lo[i], w.deg[i] = nx, lo, deg
		w.pfEnt[w.nEnt] = e
		w.nEnt++
		w.pfSide[w.nSide] = uint64(nx)
		w.nSide++
	}
	w.flush()
}

// visit is a round's first pass at slot i: it draws the step of a walk
// that stands on a vertex (slotChosen) or resolves the edge drawn a round
// ago. A walk it starts or moves to slotChosen is drawn next round, with
// the words of its ctr.
func (w *ovRing) visit(i int) {
	r := w.r
	s := w.s
	switch r.state[i] {
	case slotChosen:
		v := uint32(r.idx[i])
		var a, d uint64
		if v < w.baseV {
			a = w.off[v]
			d = w.off[v+1] - a
		}
		w.stepFrom(i, v, w.x.Rank(v), a, d)
	case slotDecide:
		r.state[i] = slotDrawn
		if w.decideHead(i) {
			w.resolveBase(i)
		}
	case slotDrawn:
		// A spec step never comes here: roundSides decides its side,
		// or hands it to the head (slotDecide).
		w.resolveBase(i)
	case slotDeltaDrawn:
		h := w.x.Head(int(w.rank[i]))
		j := uint32(r.idx[i])
		de := unsafe.Slice(h.First, h.N)[j]
		if s.weighted && walk.Unit24(r.coin[i])*h.MaxWeight >= de.Weight || h.DeltaDeadTarget(j, de.Target) {
			r.state[i] = slotRetry
			w.att[i]++
			return
		}
		if w.took(i, de.Target, true) {
			w.arrive(i, de.Target)
		}
	case slotRetry:
		w.retry(i)
	}
}

// resolveBase resolves the base entry slot i drew (slotDrawn), its side
// decided: the edge is taken unless under a tombstone, and the next step
// drawn.
func (w *ovRing) resolveBase(i int) {
	r := w.r
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
	if w.dead[i]&walk.DeadBit(nx) != 0 && w.x.Head(int(w.rank[i])).BaseDead(nx) {
		r.state[i] = slotRetry
		w.att[i]++
		return
	}
	if w.fused != nil && !w.ppr && deg != 0 {
		// took, inlined.
		r.step[i]++
		r.pos[i]++
		w.buf[r.pos[i]] = nx
		if r.step[i] == w.length {
			w.finish(i)
			return
		}
		// The entry holds nx's edge range, and this round's
		// words are its step's draw 0 (drawn set ctr so). By
		// the draw contract a base edge is drawn on x0 and x1
		// whether nx has a delta or not, so the step is drawn
		// now either way and its entry prefetched, with nx's
		// side word; the next round decides the side from the
		// word (roundSides, on x2) before it reads the entry.
		// No lookup in the index and no branch on whether nx
		// has a delta: a vertex without one has a word whose
		// threshold takes the base side at every draw but the
		// last.
		words := &r.words[i/ringHalf]
		e := lo + uint64(walk.Bounded(words[0][i%ringHalf], uint32(deg)))
		r.idx[i], r.coin[i], r.ctr[i] = e, words[1][i%ringHalf], r.step[i]+1
		w.spec[i], w.side[i], w.x3[i] = 1, words[2][i%ringHalf], words[3][i%ringHalf]
		w.cur[i], w.lo[i], w.deg[i], w.first[i], w.att[i] = nx, lo, deg, 0, 0
		w.pfEnt[w.nEnt] = e
		w.nEnt++
		w.pfSide[w.nSide] = uint64(nx)
		w.nSide++
		return
	}
	if !w.took(i, nx, true) {
		return
	}
	if w.fused == nil {
		w.arrive(i, nx)
		return
	}
	k := w.x.Rank(nx)
	if k < 0 {
		w.stepFrom(i, nx, -1, lo, deg)
		return
	}
	r.idx[i], r.state[i], w.lo[i], w.deg[i], w.rank[i] = uint64(nx), slotArrived, lo, deg, int32(k)
	w.pfAddr[w.nAddr] = uint64(uintptr(unsafe.Pointer(w.x.Head(k))))
	w.nAddr++
	w.arr[w.nArr] = uint8(i)
	w.nArr++
}

// arrived is a round's second pass over up to eight slots the first left
// in slotArrived: it draws the steps of the walks it moved on through a
// fused entry to a vertex with a delta.
func (w *ovRing) arrived(slots []uint8) {
	r := w.r
	for _, i8 := range slots {
		i := int(i8)
		w.deltaFirst(i, uint32(r.idx[i]), int(w.rank[i]), w.lo[i], w.lo[i]+w.deg[i])
	}
	w.flush()
}

// decideHead takes the side of slot i's step, drawn in slotDrawn before it
// was known (spec), from the head of its vertex w.cur[i], which has a delta
// at w.rank[i]: the step drew base entry r.idx[i] on x0 and x1 of draw 0,
// and the first attempt's side is on x2 (w.side[i]). It reports whether
// the base entry is the attempt's edge (its tombstone check still to come:
// w.dead[i]).
func (w *ovRing) decideHead(i int) bool {
	r := w.r
	h := w.x.Head(int(w.rank[i]))
	if h.Live == 0 {
		w.finish(i)
		return false
	}
	d := w.deg[i]
	wb, wd := h.BaseWeight, float64(h.N)*float64(h.MaxWeight)
	if !w.s.weighted {
		wb, wd = float64(d), float64(h.N)
	}
	if float64(w.side[i])*(1.0/(1<<32))*(wb+wd) < wb {
		if d == 0 {
			r.state[i], w.att[i] = slotRetry, 1
			return false
		}
		w.dead[i] = h.DeadBits
		return true
	}
	if h.N == 0 {
		r.state[i], w.att[i] = slotRetry, 1
		return false
	}
	// An appended edge on x3, kept on x1 (r.coin[i]), resolved next round.
	j := walk.Bounded(w.x3[i], h.N)
	r.idx[i], r.state[i] = uint64(j), slotDeltaDrawn
	w.pfAddr[w.nAddr] = uint64(uintptr(unsafe.Pointer(&unsafe.Slice(h.First, h.N)[j])))
	w.nAddr++
	return false
}

// deltaFirst takes the first attempt of slot i's step from v, which has
// the delta at k in the index and base edges [a, b): overlayStep's, with
// the round's words as its draw 0.
func (w *ovRing) deltaFirst(i int, v uint32, k int, a, b uint64) {
	r := w.r
	h := w.x.Head(k)
	if h.Live == 0 {
		w.finish(i)
		return
	}
	words := &r.words[i/ringHalf]
	x0, x1, x2, x3 := words[0][i%ringHalf], words[1][i%ringHalf], words[2][i%ringHalf], words[3][i%ringHalf]
	first := uint32(0)
	if w.ppr {
		if uint64(x0) < w.stopT {
			w.finish(i)
			return
		}
		first = 1
		x0, x1, x2, x3 = w.s.draw(w.firstID+uint64(r.walk[i]), r.step[i], 1)
	}
	w.cur[i], w.rank[i], w.first[i], w.lo[i], w.deg[i] = v, int32(k), first, a, b-a
	w.attempt(i, h, 0, x0, x1, x2, x3)
}

// retry takes slot i's next attempt (slotRetry), or, after
// walk.MaxRejections of them, overlayAttempts' exact scan.
func (w *ovRing) retry(i int) {
	r := w.r
	s := w.s
	id, att := w.firstID+uint64(r.walk[i]), w.att[i]
	if att >= walk.MaxRejections {
		next, ok := s.overlayScan(id, r.step[i], w.first[i]+walk.FallbackDraw, w.x.At(int(w.rank[i])), w.lo[i], w.lo[i]+w.deg[i])
		if w.took(i, next, ok) {
			w.arrive(i, next)
		}
		return
	}
	x0, x1, x2, x3 := s.draw(id, r.step[i], w.first[i]+att)
	w.attempt(i, w.x.Head(int(w.rank[i])), att, x0, x1, x2, x3)
}

// attempt draws attempt att of slot i's step at a vertex with a delta
// (head h, base edges [w.lo[i], w.lo[i]+w.deg[i])) with words x0..x3:
// overlayAttempts' loop body, its edge prefetched and decided next round.
func (w *ovRing) attempt(i int, h *walk.DeltaHead, att, x0, x1, x2, x3 uint32) {
	r := w.r
	a, d := w.lo[i], w.deg[i]
	w.att[i] = att
	// The sides weighed as overlayAttempts weighs them (the delta's by its
	// draw's envelope), in the same float64 operations.
	wb, wd := h.BaseWeight, float64(h.N)*float64(h.MaxWeight)
	if !w.s.weighted {
		wb, wd = float64(d), float64(h.N)
	}
	switch {
	case float64(x2)*(1.0/(1<<32))*(wb+wd) < wb:
		if d == 0 {
			break
		}
		w.drawn(i, a+uint64(walk.Bounded(x0, uint32(d))), x1, h.DeadBits)
		return
	case h.N == 0:
	default:
		j := walk.Bounded(x3, h.N)
		r.idx[i], r.coin[i], r.state[i] = uint64(j), x1, slotDeltaDrawn
		w.pfAddr[w.nAddr] = uint64(uintptr(unsafe.Pointer(&unsafe.Slice(h.First, h.N)[j])))
		w.nAddr++
		return
	}
	// The attempt drew nothing (an empty side): the next, a round on.
	r.state[i], w.att[i] = slotRetry, att+1
}

// flush issues a block's prefetches.
func (w *ovRing) flush() {
	if w.nOff > 0 {
		prefetch.Rows(unsafe.Pointer(&w.off[0]), w.pfOff[:w.nOff], 8, 16)
	}
	if w.nEnt > 0 {
		switch {
		case w.fused != nil:
			prefetch.Rows(unsafe.Pointer(&w.fused[0]), w.pfEnt[:w.nEnt], unsafe.Sizeof(w.fused[0]), unsafe.Sizeof(w.fused[0]))
		case w.tab != nil:
			prefetch.Rows(unsafe.Pointer(&w.tab[0]), w.pfEnt[:w.nEnt], unsafe.Sizeof(w.tab[0]), unsafe.Sizeof(w.tab[0]))
		default:
			prefetch.Rows(unsafe.Pointer(&w.tgt[0]), w.pfEnt[:w.nEnt], 4, 4)
		}
	}
	if w.nAddr > 0 {
		prefetch.Rows(nil, w.pfAddr[:w.nAddr], 1, unsafe.Sizeof(walk.DeltaHead{}))
	}
	if w.nSide > 0 {
		prefetch.Rows(unsafe.Pointer(&w.sides[0]), w.pfSide[:w.nSide], 8, 8)
	}
	w.nOff, w.nEnt, w.nAddr, w.nSide = 0, 0, 0, 0
}
