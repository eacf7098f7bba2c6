package walk

import (
	"math/bits"
	"unsafe"
)

// The ring walker serves DeepWalk, uniform or alias (lockstep.go's ring
// says why not PPR and MetaPath). A worker keeps ringSlots walks in flight,
// one per slot, and goes round the slots: a round first computes the Philox
// words of every slot's next draw at once (philox64: the counter of a draw
// is known before the vertex it starts from), then visits the slots eight
// at a time. A visit resolves the step that the slot's walk drew a round
// earlier, from the line prefetched then, draws the next step with the
// round's words and prefetches its line, so every walk always has one miss
// in flight and a step's wait overlaps the other slots' work, with no wait
// at the end of a step as in a lockstep unit. A walk that ends leaves its
// slot to the unit's next walk at the next round. The slots' state, the
// lines they prefetch and the rows they write stay in L1, where a lockstep
// unit of 1,024 walks wrote 1,024 rows per step and read its per-walk state
// from L2.
//
// On the fused table a step is one dependent load (the entry names the next
// vertex and its edge range). Without it a step is two (the target or alias
// entry, then the chosen vertex's offsets), and takes two rounds: one
// resolves the target and prefetches the offsets, the next reads them,
// draws and prefetches the next target. Walks and random words are those of
// stepper.walk for the same (seed, walk id): only the order in which the
// steps of different walks are taken changes.

// ringSlots is how many walks a worker keeps in flight, each with one miss
// outstanding. Memory here answers random lines at about 70 M/s per core
// with one miss in flight per ten instructions (a plain loop of loads), and
// at 200-250 M/s with 64 to 128 prefetched ahead (docs/design/cpu-engine.md): the
// walk needs many more misses in flight than a reorder window holds. A walk
// step costs far more instructions than that loop, so a round of 64 slots
// already outlasts a miss: 64 measured 9-12% faster than 128 and 256, whose
// rounds only hold the lines longer in L1. It is a multiple of philox64's
// width.
const ringSlots = 64

// ringHalf is the width of philox64: the ring draws for its slots 64 at a time.
const ringHalf = 64

// Slot states.
const (
	slotEmpty  = iota // no walk: the next round takes the unit's next one
	slotReady         // a new walk: its start's edge range is known
	slotDrawn         // next step drawn, its entry or target prefetched
	slotChosen        // next vertex chosen, its offsets prefetched (two-load steps)
)

// ring is the state of a worker's walks in flight, by slot.
type ring struct {
	state [ringSlots]uint8
	walk  [ringSlots]int32  // position of the walk in the unit
	pos   [ringSlots]int    // where the walk's current vertex is in buf
	step  [ringSlots]uint32 // steps taken (resolved)
	deg   [ringSlots]uint32 // current vertex's degree
	coin  [ringSlots]uint32 // the drawn step's alias coin
	lo    [ringSlots]uint64 // current vertex's first edge
	idx   [ringSlots]uint64 // drawn entry or target (slotDrawn), offsets row (slotChosen)
	// The Philox counter of each slot's next draw: walk id and step.
	idLo, idHi, ctr [ringSlots]uint32
	words           [ringSlots / ringHalf][4][ringHalf]uint32
}

// walkRing walks starts (walk ids firstID, firstID+1, ...) into buf at a
// stride of Length+1 and sets lens to the walks' vertex counts.
func (s *stepper) walkRing(starts []uint32, firstID uint64, buf []uint32, lens []uint32) {
	w := ringWalker{s: s, r: new(ring), starts: starts, firstID: firstID, buf: buf, lens: lens,
		stride: s.alg.Length + 1, length: uint32(s.alg.Length),
		off: s.off, tgt: s.tgt, tab: s.alias, fused: s.fused, keep: s.sampler == StepperUniform,
		wide: uint64(len(s.tgt)) >= 1<<32}
	w.vec = w.fused != nil && !w.wide && (ringVector && !s.goRounds || hasRingAVX512 && s.vecRounds)
	w.empty = ringSlots
	for {
		if w.empty > 0 && w.next < len(starts) {
			for i := range w.r.state {
				if w.r.state[i] == slotEmpty {
					w.start(i)
				}
			}
		}
		if w.live == 0 {
			return
		}
		r := w.r
		for h := range r.words {
			philox64((*[ringHalf]uint32)(r.idLo[h*ringHalf:]), (*[ringHalf]uint32)(r.idHi[h*ringHalf:]),
				(*[ringHalf]uint32)(r.ctr[h*ringHalf:]), 0, s.k0, s.k1, &r.words[h])
		}
		switch {
		case w.vec && w.empty == 0:
			w.roundFusedVec()
		case w.fused != nil:
			for b := 0; b < ringSlots; b += 8 {
				w.roundFused(b)
			}
		default:
			for b := 0; b < ringSlots; b += 8 {
				w.roundTwoLoads(b)
			}
		}
	}
}

// ringWalker is one call of walkRing.
type ringWalker struct {
	s       *stepper
	r       *ring
	starts  []uint32
	firstID uint64
	buf     []uint32
	lens    []uint32
	stride  int
	length  uint32
	off     []uint64
	tgt     []uint32
	tab     []aliasEntry // nil: uniform
	fused   []fusedEntry // set: one-load steps
	keep    bool         // uniform walk on the fused table: every step takes the entry's keep
	wide    bool         // 2^32 edges or more: first edges have high bits in the fused entries
	vec     bool         // full rounds on the fused table run in vector lanes (roundFusedVec)
	next    int          // next walk of the unit to start
	live    int          // slots holding a walk
	empty   int          // slots without one
	pf, pf2 [8]uint64    // a block's prefetches
	pfStart [1]uint64    // start's prefetch
}

// finish ends the walk of slot i after its current vertex.
func (w *ringWalker) finish(i int) {
	r := w.r
	w.lens[r.walk[i]] = r.step[i] + 1
	r.walk[i], r.state[i] = -1, slotEmpty
	w.live--
	w.empty++
}

// start puts the unit's next walk that has a step to take into slot i, if
// any is left; walks that end at their start are finished on the way.
func (w *ringWalker) start(i int) {
	r := w.r
	for w.next < len(w.starts) {
		k := w.next
		w.next++
		v := w.starts[k]
		w.buf[k*w.stride] = v
		if k+ringSlots < len(w.starts) {
			// The offsets of a walk taken about a round from now.
			w.pfStart[0] = uint64(w.starts[k+ringSlots])
			prefetchRows(unsafe.Pointer(&w.off[0]), w.pfStart[:], 8, 16)
		}
		a := w.off[v]
		d := w.off[v+1] - a
		if w.length == 0 || d == 0 {
			w.lens[k] = 1
			continue
		}
		id := w.firstID + uint64(k)
		r.walk[i], r.step[i], r.pos[i] = int32(k), 0, k*w.stride
		r.idLo[i], r.idHi[i], r.ctr[i] = uint32(id), uint32(id>>32), 0
		r.lo[i], r.deg[i], r.state[i] = a, uint32(d), slotReady
		w.live++
		w.empty--
		return
	}
}

// roundFused visits slots b..b+7 on the fused table: it resolves each drawn
// step from the entry prefetched a round ago, which also gives the next
// vertex's edge range, draws the next step and prefetches its entry.
func (w *ringWalker) roundFused(b int) {
	r := w.r
	n := 0
	for i := b; i < b+8; i++ {
		switch r.state[i] {
		case slotEmpty:
			continue
		case slotDrawn:
			e := &w.fused[r.idx[i]]
			// keep or alias as an index, without a branch: the coin is
			// random, and a mispredicted branch here threw away the
			// work of the slots behind it.
			var t uint32
			if !w.keep {
				t = e.pick(r.coin[i])
			}
			nx, deg, lo := e.to[t&1].v, e.to[t&1].deg, uint64(e.to[t&1].lo)
			if w.wide {
				lo = e.lo64(t)
			}
			r.step[i]++
			r.pos[i]++
			w.buf[r.pos[i]] = nx
			if r.step[i] == w.length || deg == 0 {
				w.finish(i)
				continue
			}
			r.lo[i], r.deg[i] = lo, deg
		}
		// Draw the next step with the round's words: x0 the column,
		// x1 the alias coin.
		words := &r.words[i/ringHalf]
		x := r.lo[i] + (uint64(words[0][i%ringHalf])*uint64(r.deg[i]))>>32
		r.idx[i], r.coin[i], r.state[i], r.ctr[i] = x, words[1][i%ringHalf], slotDrawn, r.step[i]+1
		w.pf[n] = x
		n++
	}
	if n > 0 {
		prefetchRows(unsafe.Pointer(&w.fused[0]), w.pf[:n], unsafe.Sizeof(w.fused[0]), unsafe.Sizeof(w.fused[0]))
	}
}

// roundFusedVec is the rounds of roundFused over all slots at once in
// AVX-512 lanes (ringvec_amd64.s), for a ring without empty slots: the same
// steps of the same walks, in about a sixth of the instructions, which is
// what a step waits on once its line has been prefetched a round ahead
// (docs/design/cpu-engine.md). The walks that ended come back as bits.
func (w *ringWalker) roundFusedVec() {
	done := ringFusedAVX512(w.r, unsafe.Pointer(&w.fused[0]), unsafe.Pointer(&w.buf[0]), w.length, w.keep)
	for done != 0 {
		w.finish(bits.TrailingZeros64(done))
		done &= done - 1
	}
}

// roundTwoLoads visits slots b..b+7 for steps of two loads: a drawn step is
// resolved from its target (or alias entry) and the chosen vertex's offsets
// are prefetched; a walk whose offsets were prefetched a round ago draws its
// next step and prefetches the target. A step takes two rounds, so at any
// time about half the slots wait on a target and half on offsets.
func (w *ringWalker) roundTwoLoads(b int) {
	r := w.r
	n, m := 0, 0
	for i := b; i < b+8; i++ {
		switch r.state[i] {
		case slotEmpty:
			continue
		case slotDrawn:
			var nx uint32
			if w.tab != nil {
				e := &w.tab[r.idx[i]]
				var m uint32
				if unit24(r.coin[i]) < e.prob {
					m = ^uint32(0)
				}
				nx = e.alt ^ ((e.alt ^ e.keep) & m)
			} else {
				nx = w.tgt[r.idx[i]]
			}
			r.step[i]++
			r.pos[i]++
			w.buf[r.pos[i]] = nx
			if r.step[i] == w.length {
				w.finish(i)
				continue
			}
			r.idx[i], r.state[i] = uint64(nx), slotChosen
			w.pf2[m] = r.idx[i]
			m++
			continue
		case slotChosen:
			a := w.off[r.idx[i]]
			d := w.off[r.idx[i]+1] - a
			if d == 0 {
				w.finish(i)
				continue
			}
			r.lo[i], r.deg[i] = a, uint32(d)
		}
		// Draw the next step with the round's words: x0 the column,
		// x1 the alias coin.
		words := &r.words[i/ringHalf]
		x := r.lo[i] + (uint64(words[0][i%ringHalf])*uint64(r.deg[i]))>>32
		r.idx[i], r.coin[i], r.state[i], r.ctr[i] = x, words[1][i%ringHalf], slotDrawn, r.step[i]+1
		w.pf[n] = x
		n++
	}
	if m > 0 {
		prefetchRows(unsafe.Pointer(&w.off[0]), w.pf2[:m], 8, 16)
	}
	switch {
	case n == 0:
	case w.tab != nil:
		prefetchRows(unsafe.Pointer(&w.tab[0]), w.pf[:n], unsafe.Sizeof(w.tab[0]), unsafe.Sizeof(w.tab[0]))
	default:
		prefetchRows(unsafe.Pointer(&w.tgt[0]), w.pf[:n], 4, 4)
	}
}
