package cpu

import (
	"math/bits"
	"unsafe"

	"github.com/walkstage/walkstage/internal/prefetch"
	"github.com/walkstage/walkstage/walk"
)

// The ring walker serves DeepWalk and PPR, uniform or alias (lockstep.go's
// ring says why not MetaPath). A worker keeps ringSlots walks in flight,
// one per slot, and goes round the slots: a round first computes the Philox
// words of every slot's next draw at once (philox64: the counter of a draw
// is known before the vertex it starts from), then visits the slots eight
// at a time. A visit resolves the step that the slot's walk drew a round
// earlier, from the line prefetched then, draws the next step with the
// round's words and prefetches its line, so every walk always has one miss
// in flight and a step's wait overlaps the other slots' work, with no wait
// at the end of a step as in a lockstep unit. The slots' state, the lines
// they prefetch and the rows they write stay in L1, where a lockstep unit
// of 1,024 walks wrote 1,024 rows per step and read its per-walk state from
// L2.
//
// A walk that ends (its length, a vertex without edges, a PPR stop) hands
// its slot in the same visit to the unit's next walk, whose first step is
// already drawn: walks are started a batch of ringHalf at a time (prepare),
// with one philox64 call for their first draws and their starts' offsets
// prefetched a batch ahead, and the walks that end at their start (no
// edges, a PPR stop before the first step) are finished there without
// taking a slot. So a slot never idles for a round between two walks, which
// is what PPR's walks of four steps on average paid for on the ring before
// (a walk of s steps held its slot s+1 rounds), and a start costs no Philox
// call and no miss of its own.
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

// ringHalf is the width of philox64: the ring draws for its slots 64 at a
// time, and starts walks in batches of as many.
const ringHalf = 64

// Slot states. ringvec_amd64.s compares with slotDrawn's value.
const (
	slotEmpty  = 0 // no walk, and the unit has none left to start
	slotDrawn  = 2 // next step drawn, its entry or target prefetched
	slotChosen = 3 // next vertex chosen, its offsets prefetched (two-load steps)
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
	// The batch of walks being started (prepare): their ids, the step
	// of their first draw (0) and its words.
	bLo, bHi, bCtr [ringHalf]uint32
	bWords         [4][ringHalf]uint32
}

// readyWalk is a started walk waiting for a slot, its first step drawn: the
// entry or target idx and the alias coin.
type readyWalk struct {
	idx  uint64
	k    int32 // position of the walk in the unit
	coin uint32
}

// walkRing walks starts (walk ids firstID, firstID+1, ...) into buf at a
// stride of Length+1 and sets lens to the walks' vertex counts. It returns
// how many rounds it took, and how many of them ran in vector lanes, for
// tests.
func (s *stepper) walkRing(starts []uint32, firstID uint64, buf []uint32, lens []uint32) (rounds, vecRounds int) {
	return s.walkRingIn(new(ring), starts, firstID, buf, lens)
}

// walkRingIn is walkRing with the ring state in r, which a worker reuses
// from unit to unit.
func (s *stepper) walkRingIn(r *ring, starts []uint32, firstID uint64, buf []uint32, lens []uint32) (rounds, vecRounds int) {
	// Every slot starts empty; the rest of a slot's state is written
	// when it takes a walk, and the batch's step counters stay 0.
	r.state = [ringSlots]uint8{}
	w := ringWalker{s: s, r: r, starts: starts, firstID: firstID, buf: buf, lens: lens,
		stride: s.alg.Length + 1, length: uint32(s.alg.Length),
		off: s.off, tgt: s.tgt, tab: s.alias, fused: s.fused, keep: s.sampler == walk.StepperUniform,
		wide: uint64(len(s.tgt)) >= 1<<32, ppr: s.alg.Kind == walk.PPR, stopT: s.stopT}
	w.vec = w.fused != nil && !w.wide && (ringVector && !s.goRounds || hasRingAVX512 && s.vecRounds)
	if w.ppr {
		// The vector rounds draw from words x1, x2 (row 1 on).
		w.wordOff = unsafe.Sizeof(ring{}.words[0][0])
	}
	w.empty = ringSlots
	w.prefetchStarts(0)
	n := 0
	for i := range ringSlots {
		if w.head == w.nReady && !w.prepare() {
			break
		}
		w.pfAll[n] = w.take(i)
		n++
	}
	w.prefetchDrawn(w.pfAll[:n])
	for ; w.live > 0; rounds++ {
		for h := range r.words {
			philox64((*[ringHalf]uint32)(r.idLo[h*ringHalf:]), (*[ringHalf]uint32)(r.idHi[h*ringHalf:]),
				(*[ringHalf]uint32)(r.ctr[h*ringHalf:]), 0, s.k0, s.k1, &r.words[h])
		}
		switch {
		case w.vec && w.empty == 0:
			w.roundFusedVec()
			w.vecRounds++
		case w.fused != nil && w.ppr:
			for b := 0; b < ringSlots; b += 8 {
				w.roundFusedPPR(b)
			}
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
	return rounds, w.vecRounds
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
	ppr     bool         // a draw first tests word 0 against stopT, and steps on words 1 and 2
	stopT   uint64
	wordOff uintptr   // byte offset of the column words in a round's words (vector rounds)
	next    int       // next walk of the unit to start
	live    int       // slots holding a walk
	empty   int       // slots without one
	pf, pf2 [8]uint64 // a block's prefetches
	// Started walks waiting for a slot: ready[head:nReady].
	ready        [ringHalf]readyWalk
	head, nReady int
	pfAll        [ringSlots]uint64 // prefetches of a whole round (the first fill, vector rounds)
	pfStarts     [ringHalf]uint64  // a batch's start vertices, for their offsets' prefetch
	vecRounds    int               // rounds run in vector lanes (tests ask)
}

// prefetchStarts prefetches the offsets of the batch of starts from
// position from on.
func (w *ringWalker) prefetchStarts(from int) {
	if from >= len(w.starts) {
		return
	}
	batch := w.starts[from:min(from+ringHalf, len(w.starts))]
	for j, v := range batch {
		w.pfStarts[j] = uint64(v)
	}
	prefetch.Rows(unsafe.Pointer(&w.off[0]), w.pfStarts[:len(batch)], 8, 16)
}

// prefetchDrawn prefetches the entries or targets of drawn steps.
func (w *ringWalker) prefetchDrawn(idx []uint64) {
	switch {
	case len(idx) == 0:
	case w.fused != nil:
		prefetch.Rows(unsafe.Pointer(&w.fused[0]), idx, unsafe.Sizeof(w.fused[0]), unsafe.Sizeof(w.fused[0]))
	case w.tab != nil:
		prefetch.Rows(unsafe.Pointer(&w.tab[0]), idx, unsafe.Sizeof(w.tab[0]), unsafe.Sizeof(w.tab[0]))
	default:
		prefetch.Rows(unsafe.Pointer(&w.tgt[0]), idx, 4, 4)
	}
}

// prepare starts the unit's next batch of walks: it writes their start
// vertices, finishes those that end there, and draws the first step of the
// others into ready. It goes on to the next batch while a batch yields no
// walk, and reports whether any is ready.
func (w *ringWalker) prepare() bool {
	r := w.r
	w.head, w.nReady = 0, 0
	for w.nReady == 0 && w.next < len(w.starts) {
		lo, hi := w.next, min(w.next+ringHalf, len(w.starts))
		w.next = hi
		for j := lo; j < hi; j++ {
			id := w.firstID + uint64(j)
			r.bLo[j-lo], r.bHi[j-lo] = uint32(id), uint32(id>>32)
		}
		philox64(&r.bLo, &r.bHi, &r.bCtr, 0, w.s.k0, w.s.k1, &r.bWords)
		// PPR's x0 is the stop word, x1, x2 the column and coin;
		// DeepWalk's x0, x1.
		cols, coins, stopT := &r.bWords[0], &r.bWords[1], uint64(0)
		if w.ppr {
			cols, coins, stopT = &r.bWords[1], &r.bWords[2], w.stopT
		}
		var none uint
		if w.length == 0 {
			none = 1
		}
		for j := lo; j < hi; j++ {
			v := w.starts[j]
			w.buf[j*w.stride] = v
			w.lens[j] = 1
			a := w.off[v]
			d := uint32(w.off[v+1] - a)
			// A walk that ends at its start (no edges, a stop before
			// the first step) is written to ready all the same but
			// not counted: a fifth of PPR's walks stop there, at
			// random, and a branch on it mispredicted.
			ends := none | b2u(d == 0) | b2u(uint64(r.bWords[0][j-lo]) < stopT)
			w.ready[w.nReady&(ringHalf-1)] = readyWalk{idx: a + (uint64(cols[j-lo])*uint64(d))>>32, k: int32(j), coin: coins[j-lo]}
			w.nReady += int(1 - ends)
		}
		// The offsets of the next batch, read at the next call.
		w.prefetchStarts(hi)
	}
	return w.nReady > 0
}

// take gives slot i, empty until now, the next ready walk and returns the
// entry or target its first step drew, for the caller to prefetch.
func (w *ringWalker) take(i int) uint64 {
	w.live++
	w.empty--
	return w.refill(i)
}

// refill puts the next ready walk into slot i and returns the entry or
// target its first step drew. The slot's state becomes slotDrawn, which a
// slot on the fused table already has.
func (w *ringWalker) refill(i int) uint64 {
	r := w.r
	rw := &w.ready[w.head]
	w.head++
	id := w.firstID + uint64(rw.k)
	r.walk[i], r.step[i], r.pos[i] = rw.k, 0, int(rw.k)*w.stride
	r.idLo[i], r.idHi[i], r.ctr[i] = uint32(id), uint32(id>>32), 1
	r.idx[i], r.coin[i], r.state[i] = rw.idx, rw.coin, slotDrawn
	return rw.idx
}

// finish ends the walk of slot i after its current vertex and gives the
// slot the unit's next walk, if any is left: ok says so, and idx is what
// its first step drew, to prefetch.
func (w *ringWalker) finish(i int) (idx uint64, ok bool) {
	r := w.r
	w.lens[r.walk[i]] = r.step[i] + 1
	if w.head == w.nReady && !w.prepare() {
		r.walk[i], r.state[i] = -1, slotEmpty
		w.live--
		w.empty++
		return 0, false
	}
	return w.refill(i), true
}

// roundFused visits slots b..b+7 on the fused table: it resolves each drawn
// step from the entry prefetched a round ago, which also gives the next
// vertex's edge range, draws the next step and prefetches its entry. A slot
// whose walk ends takes the unit's next walk at once (finish).
func (w *ringWalker) roundFused(b int) {
	r := w.r
	n := 0
	for i := b; i < b+8; i++ {
		if r.state[i] == slotEmpty {
			continue
		}
		e := &w.fused[r.idx[i]]
		// keep or alias as an index, without a branch: the coin is
		// random, and a mispredicted branch here threw away the work of
		// the slots behind it.
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
			if x, ok := w.finish(i); ok {
				w.pf[n] = x
				n++
			}
			continue
		}
		// Draw the next step with the round's words: x0 the column, x1
		// the alias coin.
		words := &r.words[i/ringHalf]
		x := lo + (uint64(words[0][i%ringHalf])*uint64(deg))>>32
		r.idx[i], r.coin[i], r.ctr[i] = x, words[1][i%ringHalf], r.step[i]+1
		w.pf[n] = x
		n++
	}
	if n > 0 {
		prefetch.Rows(unsafe.Pointer(&w.fused[0]), w.pf[:n], unsafe.Sizeof(w.fused[0]), unsafe.Sizeof(w.fused[0]))
	}
}

// roundFusedPPR is roundFused for PPR: whether a walk ends here (its
// length, no edges, its stop word: a coin toss of probability 0.2 at every
// step) is kept as a count, not a branch, and the walks that ended are
// finished and refilled after the block: a mispredicted branch in the loop
// threw away the work of the slots behind it. (DeepWalk's walks end once in
// 80 steps, a branch predicted right, and this count made its rounds 10%
// slower with the table in cache.)
func (w *ringWalker) roundFusedPPR(b int) {
	r := w.r
	words := &r.words[b/ringHalf]
	var ended [8]int
	n, ne := 0, 0
	for i := b; i < b+8; i++ {
		if r.state[i] == slotEmpty {
			continue
		}
		e := &w.fused[r.idx[i]]
		// keep or alias as an index, without a branch, for the same
		// reason.
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
		// Draw the next step with the round's words: x0 the stop word,
		// x1 the column, x2 the alias coin.
		end := b2u(r.step[i] == w.length) | b2u(deg == 0) | b2u(uint64(words[0][i%ringHalf]) < w.stopT)
		x := lo + (uint64(words[1][i%ringHalf])*uint64(deg))>>32
		r.idx[i], r.coin[i], r.ctr[i] = x, words[2][i%ringHalf], r.step[i]+1
		w.pf[n] = x
		ended[ne] = i
		n += int(1 - end)
		ne += int(end)
	}
	for _, i := range ended[:ne] {
		if w.head == w.nReady {
			if x, ok := w.finish(i); ok {
				w.pf[n] = x
				n++
			}
			continue
		}
		// finish and refill, inlined: at five steps a walk, PPR
		// takes this path at every fifth step.
		w.lens[r.walk[i]] = r.step[i] + 1
		rw := &w.ready[w.head]
		w.head++
		id := w.firstID + uint64(rw.k)
		r.walk[i], r.step[i], r.pos[i] = rw.k, 0, int(rw.k)*w.stride
		r.idLo[i], r.idHi[i], r.ctr[i] = uint32(id), uint32(id>>32), 1
		r.idx[i], r.coin[i] = rw.idx, rw.coin
		w.pf[n] = rw.idx
		n++
	}
	if n > 0 {
		prefetch.Rows(unsafe.Pointer(&w.fused[0]), w.pf[:n], unsafe.Sizeof(w.fused[0]), unsafe.Sizeof(w.fused[0]))
	}
}

// b2u is 1 for true and 0 for false (the compiler makes it a SETcc).
func b2u(b bool) uint {
	var u uint
	if b {
		u = 1
	}
	return u
}

// roundFusedVec is the rounds of roundFused over all slots at once in
// AVX-512 lanes (ringvec_amd64.s), for a ring without empty slots:
// the same steps of the same walks, in about a sixth of the instructions,
// which is what a step waits on once its line has been prefetched a round
// ahead (docs/design/cpu-engine.md). The walks that ended come back as
// bits, and their slots take the unit's next walks here.
func (w *ringWalker) roundFusedVec() {
	done := ringFusedAVX512(w.r, unsafe.Pointer(&w.fused[0]), unsafe.Pointer(&w.buf[0]), w.length, w.keep, uint32(w.stopT), w.wordOff)
	n := 0
	for done != 0 {
		if x, ok := w.finish(bits.TrailingZeros64(done)); ok {
			w.pfAll[n] = x
			n++
		}
		done &= done - 1
	}
	w.prefetchDrawn(w.pfAll[:n])
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
				if walk.Unit24(r.coin[i]) < e.prob {
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
				break
			}
			r.idx[i], r.state[i] = uint64(nx), slotChosen
			w.pf2[m] = r.idx[i]
			m++
			continue
		case slotChosen:
			a := w.off[r.idx[i]]
			d := w.off[r.idx[i]+1] - a
			if d == 0 {
				break
			}
			// Draw the next step with the round's words: x0 the
			// column, x1 the alias coin; PPR's x0 is its stop word,
			// and x1, x2 serve the step.
			words := &r.words[i/ringHalf]
			col, coin := words[0][i%ringHalf], words[1][i%ringHalf]
			if w.ppr {
				if uint64(col) < w.stopT {
					break
				}
				col, coin = coin, words[2][i%ringHalf]
			}
			x := a + (uint64(col)*uint64(uint32(d)))>>32
			r.idx[i], r.coin[i], r.state[i], r.ctr[i] = x, coin, slotDrawn, r.step[i]+1
			w.pf[n] = x
			n++
			continue
		}
		if x, ok := w.finish(i); ok {
			w.pf[n] = x
			n++
		}
	}
	if m > 0 {
		prefetch.Rows(unsafe.Pointer(&w.off[0]), w.pf2[:m], 8, 16)
	}
	switch {
	case n == 0:
	case w.tab != nil:
		prefetch.Rows(unsafe.Pointer(&w.tab[0]), w.pf[:n], unsafe.Sizeof(w.tab[0]), unsafe.Sizeof(w.tab[0]))
	default:
		prefetch.Rows(unsafe.Pointer(&w.tgt[0]), w.pf[:n], 4, 4)
	}
}
